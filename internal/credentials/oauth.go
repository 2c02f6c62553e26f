package credentials

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
)

// OAuth layouts (the gateway as its own authorization server):
//
//	kind base64url-no-padding( keyID[4] | nonce[12] | AES-256-GCM(payload) )
//
// with the same keys as credentials tokens, and the additional data the
// kind's prefix plus the key id. Each kind has its own prefix, so an access
// token never opens as a refresh token, a code or a credentials token (nor
// any of those as another): the tag fails. Codes, access and refresh
// tokens carry the login (nothing is stored on the server); client
// registrations and sign-in form tokens carry no credential.
type OAuthKind string

const (
	KindCode    OAuthKind = "oac1." // authorization code
	KindAccess  OAuthKind = "oat1." // access token
	KindRefresh OAuthKind = "ort1." // refresh token
	KindClient  OAuthKind = "ocl1." // dynamically registered client (its client_id)
	KindForm    OAuthKind = "ocf1." // the sign-in page's anti-forgery token
	// Approval (internal/approval): the state of a tool call waiting for a
	// person's answer in the client (MCP requestState), and the link to
	// the approval page.
	KindApprovalState   OAuthKind = "aps1."
	KindApprovalLink    OAuthKind = "apl1."
	KindApprovalSession OAuthKind = "apc1." // an MCP session id that says the client can show forms
	KindApprovalPerson  OAuthKind = "app1." // the approval page's sign-in cookie: who the person proved to be
	// The state of a sign-in at the mailbox's provider (internal/oauth).
	KindProviderState OAuthKind = "ops1."
	maxOAuth                    = 8 << 10
)

// Errors an OAuth value can be refused with; none names the mailbox.
var (
	ErrGrantMalformed  = errors.New("not a token of this kind (malformed, truncated or of another kind)")
	ErrGrantForeignKey = errors.New("sealed with a different key than this server's (made by another server, or the key was rotated out)")
	ErrGrantTampered   = errors.New("altered, truncated or of another kind: it cannot be opened")
	ErrGrantExpired    = errors.New("expired")
)

// Grant is what a code, an access token or a refresh token carries.
type Grant struct {
	// ID is random and names this one grant (for single use).
	ID    string
	Creds Credentials // user, password and scope
	// ClientID and RedirectURI bind a code (and the tokens made from it)
	// to one client; Challenge is the code's PKCE S256 challenge.
	ClientID    string
	RedirectURI string
	Challenge   string
	// Audience is the resource the token is for (PUBLIC_URL + "/mcp").
	Audience string
	Expires  time.Time
	// Family names the sign-in a refresh token descends from, and Gen
	// counts the refreshes since: each refresh returns Gen+1, so a token
	// of an older generation is a reused one (single use without keeping
	// an id per refresh). A refresh token made before families existed
	// has none: its ID stands for the family.
	Family string
	Gen    uint32
	// Ledger names the memory of sign-ins (internal/oauth) that recorded
	// Family when this refresh token was issued: a family that ledger no
	// longer holds was ended there.
	Ledger string
	// Provider names the sign-in provider (microsoft, google, or the
	// operator's) when the login is an OAuth access token it issued (Creds
	// then has the OAuth mechanism); ProviderRefresh is the provider's
	// refresh token, travelling sealed so that nothing is stored, and
	// ProviderExpires when the provider's access token in Creds expires.
	Provider        string
	ProviderRefresh string
	ProviderExpires time.Time
}

type grantPayload struct {
	ID  string `json:"id"`
	U   string `json:"u"`
	P   string `json:"p"`
	A   string `json:"a,omitempty"`
	NS  bool   `json:"ns,omitempty"`
	C   string `json:"c,omitempty"`
	R   string `json:"r,omitempty"`
	CC  string `json:"cc,omitempty"`
	Aud string `json:"aud,omitempty"`
	Exp int64  `json:"exp"`
	F   string `json:"f,omitempty"`
	G   uint32 `json:"g,omitempty"`
	L   string `json:"l,omitempty"`
	K   string `json:"k,omitempty"` // "oauth": P is an access token
	H   string `json:"h,omitempty"` // the mail host
	Pv  string `json:"pv,omitempty"`
	PR  string `json:"pr,omitempty"`
	PE  int64  `json:"pe,omitempty"`
}

// NewGrantID returns a fresh random grant id.
func NewGrantID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("credentials: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// SealGrant seals g as a value of kind (KindCode, KindAccess or
// KindRefresh). The expiry keeps whole seconds.
func (s *Sealer) SealGrant(kind OAuthKind, g Grant) (string, error) {
	c := g.Creds
	switch {
	case kind != KindCode && kind != KindAccess && kind != KindRefresh:
		return "", errors.New("credentials: not a grant kind")
	case !c.Valid() || g.ID == "" || g.Expires.IsZero():
		return "", errors.New("credentials: a grant needs a login, an id and an expiry")
	case c.Mechanism() == MechOAuth && g.Provider == "":
		// Only a provider's own sign-in seals an access token, with the
		// refresh token that renews it.
		return "", errors.New("credentials: an upstream OAuth access token is sealed into a grant only by a provider sign-in")
	case !utf8.ValidString(c.User) || !utf8.ValidString(c.password):
		return "", ErrNotUTF8
	case strings.ContainsRune(c.User, 0) || strings.ContainsRune(c.password, 0):
		return "", ErrNUL
	}
	p := grantPayload{ID: g.ID, U: c.User, P: c.password, NS: c.Scope.NoSend, C: g.ClientID, R: g.RedirectURI,
		CC: g.Challenge, Aud: g.Audience, Exp: g.Expires.Unix(), F: g.Family, G: g.Gen, L: g.Ledger,
		H: s.canonicalHost(c.Host), Pv: g.Provider, PR: g.ProviderRefresh}
	if c.Mechanism() == MechOAuth {
		p.K = kindOAuth
	}
	if !g.ProviderExpires.IsZero() {
		p.PE = g.ProviderExpires.Unix()
	}
	if c.Scope.Level != 0 {
		p.A = c.Scope.Level.String()
	}
	plain, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	defer clear(plain)
	return s.SealOAuth(kind, plain)
}

// OpenGrant checks and opens a value of kind at time now; expiry is
// checked last, so an altered value is never reported as merely expired.
func (s *Sealer) OpenGrant(kind OAuthKind, token string, now time.Time) (Grant, error) {
	plain, err := s.OpenOAuth(kind, token)
	if err != nil {
		return Grant{}, err
	}
	defer clear(plain)
	var p grantPayload
	if err := json.Unmarshal(plain, &p); err != nil || p.ID == "" || p.U == "" || p.P == "" {
		return Grant{}, ErrGrantMalformed
	}
	c := New(p.U, p.P)
	switch p.K {
	case "":
	case kindOAuth:
		c = NewOAuth(p.U, p.P)
	default:
		return Grant{}, ErrGrantMalformed
	}
	c.Host, c.Provider = s.canonicalHost(p.H), p.Pv
	c.Scope.NoSend = p.NS
	if p.A != "" {
		l, err := access.Parse(p.A)
		if err != nil {
			return Grant{}, ErrGrantMalformed
		}
		c.Scope.Level = l
	}
	c.Expires = time.Unix(p.Exp, 0)
	g := Grant{ID: p.ID, Creds: c, ClientID: p.C, RedirectURI: p.R, Challenge: p.CC, Audience: p.Aud, Expires: time.Unix(p.Exp, 0), Family: p.F, Gen: p.G, Ledger: p.L,
		Provider: p.Pv, ProviderRefresh: p.PR}
	if p.PE != 0 {
		g.ProviderExpires = time.Unix(p.PE, 0)
	}
	if !now.Before(g.Expires) {
		return Grant{}, ErrGrantExpired
	}
	return g, nil
}

// SealOAuth seals plain (a JSON payload the oauth package defines) as a
// value of kind under the current key.
func (s *Sealer) SealOAuth(kind OAuthKind, plain []byte) (string, error) {
	raw := make([]byte, keyIDLen+nonceLen, keyIDLen+nonceLen+len(plain)+tagLen)
	copy(raw, s.current.id[:])
	if _, err := rand.Read(raw[keyIDLen:]); err != nil {
		return "", err
	}
	raw = s.current.aead.Seal(raw, raw[keyIDLen:keyIDLen+nonceLen], plain, oauthAdditional(kind, s.current.id))
	out := string(kind) + b64.EncodeToString(raw)
	if len(out) > maxOAuth {
		return "", ErrTooLong
	}
	return out, nil
}

// OpenOAuth opens a value of kind sealed by SealOAuth under the current or
// a previous key (ENCRYPTION_KEY_PREVIOUS).
func (s *Sealer) OpenOAuth(kind OAuthKind, token string) ([]byte, error) {
	if len(token) > maxOAuth {
		return nil, ErrGrantMalformed
	}
	body, ok := strings.CutPrefix(token, string(kind))
	if !ok || !base64URL(body) {
		return nil, ErrGrantMalformed
	}
	raw, err := b64.DecodeString(body)
	if err != nil || len(raw) < keyIDLen+nonceLen+tagLen {
		return nil, ErrGrantMalformed
	}
	var id [keyIDLen]byte
	copy(id[:], raw)
	k, ok := s.keyFor(id)
	if !ok {
		return nil, ErrGrantForeignKey
	}
	plain, err := k.aead.Open(nil, raw[keyIDLen:keyIDLen+nonceLen], raw[keyIDLen+nonceLen:], oauthAdditional(kind, id))
	if err != nil {
		return nil, ErrGrantTampered
	}
	return plain, nil
}

func oauthAdditional(kind OAuthKind, id [keyIDLen]byte) []byte {
	return append([]byte(kind), id[:]...)
}
