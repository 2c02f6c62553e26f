package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// client is what the server knows of a client: its name and the redirect
// URIs it may use.
type client struct {
	Name         string   `json:"n"`
	RedirectURIs []string `json:"r"`
	// Fetched: its metadata document came from its own https client_id
	// URL, so whoever runs that URL named these redirect URIs (never
	// sealed: only a fetch sets it).
	Fetched bool `json:"-"`
}

const (
	maxRedirectURIs   = 10
	maxRedirectURILen = 1000
	maxClientName     = 100
	maxMetadataBytes  = 64 << 10
)

// registration is the part of an RFC 7591 request (and of a client
// metadata document) the server reads.
type registration struct {
	ClientID     string   `json:"client_id"`
	ClientName   string   `json:"client_name"`
	RedirectURIs []string `json:"redirect_uris"`
	AuthMethod   string   `json:"token_endpoint_auth_method"`
}

// validRedirectURI is an allow-list (RFC 9700 §4.1.1, RFC 8252 §7):
// https URIs; http ones on a loopback address, for native clients that
// listen on a free port (RFC 8252 §7.3); and a native app's private-use
// scheme (RFC 8252 §7.1) when it is a reverse domain name
// (com.example.app:/callback) or one of knownClientSchemes. No fragment,
// no user info. Anything else, in particular the schemes an operating
// system hands to programs that act on the URI (search-ms:, ms-msdt:,
// ms-officecmd:, smb:, vscode:, javascript:, file: ...), is refused: a
// code sent there leaves the app's hands, or does something.
func validRedirectURI(raw string) bool {
	if len(raw) > maxRedirectURILen {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Fragment != "" || u.User != nil || !u.IsAbs() {
		return false
	}
	switch {
	case u.Scheme == "https":
		return u.Host != ""
	case u.Scheme == "http":
		return isLoopback(u.Hostname())
	case knownClientSchemes[u.Scheme] || reverseDomainScheme(u.Scheme):
		return u.Opaque == "" || strings.HasPrefix(u.Opaque, "/")
	}
	return false
}

// knownClientSchemes are private-use schemes of MCP clients in use that
// are not reverse domain names, allowed by name (docs/clients.md): Cursor
// signs in through cursor://anysphere.cursor-retrieval/.... Lower case
// (url.Parse lowers the scheme).
var knownClientSchemes = map[string]bool{"cursor": true}

// reverseDomainScheme reports whether scheme is a domain name in reverse
// order, as RFC 8252 §7.1 asks of private-use schemes: at least two
// labels of letters, digits and inner hyphens, the first (a top-level
// domain) of letters only. x-apple.systempreferences is not one.
func reverseDomainScheme(scheme string) bool {
	labels := strings.Split(scheme, ".")
	if len(labels) < 2 {
		return false
	}
	for i, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for j := 0; j < len(l); j++ {
			switch c := l[j]; {
			case 'a' <= c && c <= 'z':
			case ('0' <= c && c <= '9' || c == '-') && i > 0:
			default:
				return false
			}
		}
	}
	return true
}

// checkClient validates a registration's name and redirect URIs.
func checkClient(reg registration) (client, error) {
	if len(reg.RedirectURIs) == 0 || len(reg.RedirectURIs) > maxRedirectURIs {
		return client{}, fmt.Errorf("redirect_uris must list 1 to %d URIs", maxRedirectURIs)
	}
	for _, u := range reg.RedirectURIs {
		if !validRedirectURI(u) {
			return client{}, errors.New("each redirect URI must be https, http on a loopback address (127.0.0.1, [::1], localhost), or a native app's own scheme named as a reverse domain name (com.example.app:/callback; cursor: too), without a fragment or user info; other schemes are refused")
		}
	}
	name := strings.TrimSpace(reg.ClientName)
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > maxClientName {
		return client{}, fmt.Errorf("client_name must be UTF-8 text of at most %d characters", maxClientName)
	}
	return client{Name: name, RedirectURIs: reg.RedirectURIs}, nil
}

// register is stateless dynamic client registration (RFC 7591): the
// client_id is the sealed registration itself.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	cors(w, r)
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST, OPTIONS")
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "use POST")
		return
	}
	if !s.admitFrom(w, r) {
		return
	}
	var reg registration
	if err := json.NewDecoder(io.LimitReader(r.Body, maxMetadataBytes)).Decode(&reg); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "the body must be a JSON client registration")
		return
	}
	c, err := checkClient(reg)
	if err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_redirect_uri", err.Error())
		return
	}
	plain, _ := json.Marshal(c)
	id, err := s.cfg.Sealer.SealOAuth(credentials.KindClient, plain)
	if err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "the registration is too large")
		return
	}
	// Only public clients: whatever method was asked, none is what they get.
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id":                  id,
		"client_id_issued_at":        s.now().Unix(),
		"client_name":                c.Name,
		"redirect_uris":              c.RedirectURIs,
		"token_endpoint_auth_method": "none",
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
	})
}

// lookupClient resolves a client_id: a sealed registration, or the URL of
// a client metadata document.
func (s *Server) lookupClient(ctx context.Context, id string) (client, error) {
	if strings.HasPrefix(id, string(credentials.KindClient)) {
		plain, err := s.cfg.Sealer.OpenOAuth(credentials.KindClient, id)
		if err != nil {
			return client{}, errors.New("this client_id was not issued by this server (or its key has changed): register the client again")
		}
		var c client
		if err := json.Unmarshal(plain, &c); err != nil {
			return client{}, errors.New("this client_id cannot be read: register the client again")
		}
		// Registered under older rules, perhaps: the rules of today apply.
		if _, err := checkClient(registration{ClientName: c.Name, RedirectURIs: c.RedirectURIs}); err != nil {
			return client{}, errors.New("this client was registered with a redirect URI this server no longer accepts: register the client again")
		}
		return c, nil
	}
	if strings.HasPrefix(id, "https://") {
		return s.fetchClient(ctx, id)
	}
	return client{}, errors.New("unknown client_id: register the client (dynamic registration) or use the https URL of a client metadata document")
}

// fetchClient gets a client metadata document (draft-ietf-oauth-client-id-metadata-document):
// at most 64 KiB, within 5 s, cached for a few minutes.
func (s *Server) fetchClient(ctx context.Context, id string) (client, error) {
	u, err := url.Parse(id)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" || u.Fragment != "" || u.User != nil || len(id) > maxRedirectURILen {
		return client{}, errors.New("a client_id URL must be an https URL with a path")
	}
	if c, ok := s.clients.get(id, s.now()); ok {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return client{}, errors.New("the client metadata document cannot be fetched")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return client{}, errors.New("the client metadata document cannot be fetched")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return client{}, fmt.Errorf("the client metadata document answered HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil || len(body) > maxMetadataBytes {
		return client{}, errors.New("the client metadata document is too large or cut short")
	}
	var reg registration
	if err := json.Unmarshal(body, &reg); err != nil {
		return client{}, errors.New("the client metadata document is not JSON")
	}
	if reg.ClientID != id {
		return client{}, errors.New("the client metadata document names another client_id than its URL")
	}
	if reg.AuthMethod != "" && reg.AuthMethod != "none" {
		return client{}, errors.New("only public clients (token_endpoint_auth_method none) are supported")
	}
	c, err := checkClient(reg)
	if err != nil {
		return client{}, fmt.Errorf("the client metadata document: %v", err)
	}
	c.Fetched = true
	s.clients.put(id, c, s.now())
	return c, nil
}

// clientCache keeps fetched metadata documents briefly.
type clientCache struct {
	mu      sync.Mutex
	max     int
	ttl     time.Duration
	entries map[string]cachedClient
}

type cachedClient struct {
	c       client
	fetched time.Time
}

func newClientCache(max int, ttl time.Duration) *clientCache {
	return &clientCache{max: max, ttl: ttl, entries: map[string]cachedClient{}}
}

func (cc *clientCache) get(id string, now time.Time) (client, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	e, ok := cc.entries[id]
	if !ok || now.Sub(e.fetched) > cc.ttl {
		return client{}, false
	}
	return e.c, true
}

func (cc *clientCache) put(id string, c client, now time.Time) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if len(cc.entries) >= cc.max {
		for k, e := range cc.entries {
			if now.Sub(e.fetched) > cc.ttl {
				delete(cc.entries, k)
			}
		}
		if len(cc.entries) >= cc.max {
			clear(cc.entries)
		}
	}
	cc.entries[id] = cachedClient{c, now}
}
