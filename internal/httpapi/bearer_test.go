package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

type fakeOAuth struct{ http.Handler }

func (fakeOAuth) OpenAccess(token string) (credentials.Credentials, error) {
	if token == "oat1.good" {
		return credentials.New("u@x", "pw"), nil
	}
	return credentials.Credentials{}, errors.New("not valid here")
}

func (fakeOAuth) ResourceMetadataURL() string {
	return "https://gw.example/.well-known/oauth-protected-resource/mcp"
}

// The bearer middleware: anonymous /mcp gets the challenge only with OAuth
// on; header credentials pass untouched; an access token becomes
// credentials; a bad one is 401 invalid_token; the REST mirror keeps its
// own bearer credentials tokens.
func TestBearer(t *testing.T) {
	var got credentials.Credentials
	var gotAuth string
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = credentials.FromContext(r.Context())
		gotAuth = r.Header.Get("Authorization")
	})
	cases := []struct {
		name      string
		oauth     OAuth
		rest      bool
		headers   map[string]string
		status    int
		challenge string
		user      string
	}{
		{"off: anonymous passes", nil, false, nil, 200, "", ""},
		{"on: anonymous /mcp is challenged", fakeOAuth{}, false, nil, 401, `Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp"`, ""},
		{"on: anonymous /v1 is the mirror's", fakeOAuth{}, true, nil, 200, "", ""},
		{"on: header credentials pass", fakeOAuth{}, false, map[string]string{"X-Imap-User": "a", "X-Imap-Pass": "b"}, 200, "", ""},
		{"on: x-mailbox-token passes", fakeOAuth{}, false, map[string]string{"X-Mailbox-Token": "mbx1.x"}, 200, "", ""},
		{"on: access token", fakeOAuth{}, false, map[string]string{"Authorization": "Bearer oat1.good"}, 200, "", "u@x"},
		{"on: bad token", fakeOAuth{}, false, map[string]string{"Authorization": "Bearer oat1.bad"}, 401,
			`Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="not valid here"`, ""},
		{"on: both kinds", fakeOAuth{}, false, map[string]string{"Authorization": "Bearer oat1.good", "X-Imap-User": "a"}, 400, "", ""},
		{"on: /v1 credentials token as bearer is the mirror's", fakeOAuth{}, true, map[string]string{"Authorization": "Bearer mbx1.x"}, 200, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, gotAuth = credentials.Credentials{}, ""
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			for k, v := range c.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			withBearer(c.oauth, c.rest, next).ServeHTTP(w, r)
			if w.Code != c.status || w.Header().Get("WWW-Authenticate") != c.challenge || got.User != c.user {
				t.Errorf("got %d %q user %q", w.Code, w.Header().Get("WWW-Authenticate"), got.User)
			}
			if c.user != "" && gotAuth != "" {
				t.Errorf("the consumed Authorization header was passed on")
			}
		})
	}
}
