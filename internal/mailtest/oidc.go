// A small OpenID provider for unit tests of the sign-in with a provider
// (the real one, Ory Hydra, is in the integration tests): what a hostile
// or sloppy provider may do is a field to set, which Hydra cannot be made
// to do (reuse a code, answer userinfo for another subject, send
// email_verified as a string, name another issuer in its answer).

package mailtest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// OIDC is an OpenID provider on a loopback httptest server: discovery (also
// as Microsoft's multi-tenant template under /common/v2.0), keys, an
// authorization endpoint that signs anyone in at once, a token endpoint
// (codes and refresh tokens) and userinfo. Set its fields before the
// requests they affect.
type OIDC struct {
	*httptest.Server
	key *rsa.PrivateKey

	mu sync.Mutex
	// Issuer is the iss of the ID tokens (URL unless set: a tenant's, for
	// the multi-tenant template).
	Issuer string
	// Subject is the sub of the ID tokens ("s" unless set).
	Subject string
	// Claims are added to every ID token; InfoClaims are the userinfo
	// answer (sub is Subject unless they say otherwise).
	Claims, InfoClaims map[string]any
	// Nonce goes into ID tokens of codes the authorization endpoint did
	// not issue (an Exchange called directly with any code).
	Nonce string
	// ReuseCodes lets a code be exchanged again (some providers do);
	// otherwise a second exchange is invalid_grant.
	ReuseCodes bool
	// ISS is the iss parameter of authorization responses (RFC 9207): ""
	// none; AdvertiseISS says so in discovery
	// (authorization_response_iss_parameter_supported).
	ISS          string
	AdvertiseISS bool
	// Rotate makes refreshes return a new refresh token; Refused makes
	// them invalid_grant (revoked).
	Rotate, Refused bool
	// LastForm is the last form the token endpoint received; Exchanges
	// counts the codes exchanged.
	LastForm  url.Values
	Exchanges int

	codes map[string]string // code -> the nonce of its authorization request
	used  map[string]bool
}

// StartOIDC starts an OIDC provider, stopped when the test ends.
func StartOIDC(t testing.TB) *OIDC {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	o := &OIDC{key: key, Subject: "s", codes: map[string]string{}, used: map[string]bool{}}
	mux := http.NewServeMux()
	o.Server = httptest.NewServer(mux)
	t.Cleanup(o.Close)
	o.Issuer = o.URL
	discovery := func(issuer string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			o.mu.Lock()
			defer o.mu.Unlock()
			doc := map[string]any{"issuer": issuer, "authorization_endpoint": o.URL + "/auth",
				"token_endpoint": o.URL + "/token", "jwks_uri": o.URL + "/keys", "userinfo_endpoint": o.URL + "/userinfo",
				"id_token_signing_alg_values_supported": []string{"RS256"}}
			if o.AdvertiseISS {
				doc["authorization_response_iss_parameter_supported"] = true
			}
			writeJSONTo(w, http.StatusOK, doc)
		}
	}
	mux.HandleFunc("/.well-known/openid-configuration", discovery(o.URL))
	mux.HandleFunc("/common/v2.0/.well-known/openid-configuration", discovery(o.URL+"/{tenantid}/v2.0"))
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		writeJSONTo(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &o.key.PublicKey, KeyID: "k", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("/userinfo", func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		defer o.mu.Unlock()
		info := map[string]any{"sub": o.Subject, "email": "info@x.test"}
		if o.InfoClaims != nil {
			info = map[string]any{"sub": o.Subject}
			for k, v := range o.InfoClaims {
				info[k] = v
			}
		}
		writeJSONTo(w, http.StatusOK, info)
	})
	mux.HandleFunc("/auth", o.authorize)
	mux.HandleFunc("/token", o.token)
	return o
}

// authorize signs the person in at once: back to redirect_uri with a new
// code, the state, and ISS when set.
func (o *OIDC) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || back.Scheme == "" {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	b := make([]byte, 16)
	rand.Read(b)
	code := hex.EncodeToString(b)
	o.mu.Lock()
	o.codes[code] = q.Get("nonce")
	v := back.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	if o.ISS != "" {
		v.Set("iss", o.ISS)
	}
	o.mu.Unlock()
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (o *OIDC) token(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.LastForm = r.PostForm
	refused := map[string]string{"error": "invalid_grant", "error_description": "revoked"}
	if r.PostForm.Get("grant_type") == "refresh_token" {
		if o.Refused {
			writeJSONTo(w, http.StatusBadRequest, refused)
			return
		}
		ans := map[string]any{"access_token": "at2", "token_type": "Bearer", "expires_in": 3600}
		if o.Rotate {
			ans["refresh_token"] = "rt2"
		}
		writeJSONTo(w, http.StatusOK, ans)
		return
	}
	code := r.PostForm.Get("code")
	nonce, issued := o.codes[code]
	if !issued {
		nonce = o.Nonce
	}
	if o.used[code] && !o.ReuseCodes {
		writeJSONTo(w, http.StatusBadRequest, refused)
		return
	}
	o.used[code] = true
	o.Exchanges++
	now := time.Now()
	claims := map[string]any{"iss": o.Issuer, "sub": o.Subject, "aud": r.PostForm.Get("client_id"), "exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "nonce": nonce}
	if aud, _, ok := r.BasicAuth(); ok {
		claims["aud"] = aud
	}
	for k, v := range o.Claims {
		claims[k] = v
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: o.key}, (&jose.SignerOptions{}).WithHeader("kid", "k"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	idt, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSONTo(w, http.StatusOK, map[string]any{"access_token": "at1", "refresh_token": "rt1", "token_type": "Bearer", "expires_in": 600, "id_token": idt})
}

func writeJSONTo(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
