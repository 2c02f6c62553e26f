package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/reqlog"
)

// OAuth is the gateway's own authorization server (internal/oauth), as the
// HTTP layer needs it: the handler of its paths, and the opening of the
// access tokens clients send as Authorization: Bearer.
type OAuth interface {
	http.Handler
	// OpenAccess returns the login an access token carries; its errors
	// are sentences safe to show.
	OpenAccess(token string) (credentials.Credentials, error)
	// ResourceMetadataURL is the protected-resource metadata document of
	// /mcp, named in every 401.
	ResourceMetadataURL() string
}

// credentialHeaders are the headers that carry credentials other than a
// bearer token; any of them present means the caller is not anonymous.
var credentialHeaders = []string{HeaderUser, HeaderPass, HeaderToken, "X-Imap-Oauth-Token"}

// withBearer turns Authorization: Bearer <access token> into credentials
// in the request context, with the token's scope, so that the tool layer
// needs no change. With OAuth on, a request to /mcp with no credentials at
// all gets 401 and the WWW-Authenticate challenge that starts a client's
// sign-in (MCP authorization); x-imap-* headers and x-mailbox-token work as
// before. On the REST mirror (rest), a bearer token that is not an access
// token is left to the mirror, which takes credentials tokens that way, and
// an anonymous request is the mirror's to answer. With oauth nil (OAUTH=off,
// or no PUBLIC_URL) it changes nothing.
//
// A bearer request whose login the mail server refuses (the password was
// changed since sign-in) is answered 401 with error="invalid_token", so
// that the client signs in again.
func withBearer(oauth OAuth, rest bool, next http.Handler) http.Handler {
	if oauth == nil {
		return next
	}
	challenge := func(w http.ResponseWriter, errCode, desc string) {
		v := `Bearer resource_metadata="` + oauth.ResourceMetadataURL() + `"`
		if errCode != "" {
			v += `, error="` + errCode + `", error_description=` + strconv.Quote(desc)
		}
		w.Header().Set("WWW-Authenticate", v)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		hasOther := false
		for _, h := range credentialHeaders {
			if r.Header.Get(h) != "" {
				hasOther = true
			}
		}
		switch {
		case strings.EqualFold(scheme, "Bearer") && hasOther:
			httpError(w, http.StatusBadRequest, "send either Authorization: Bearer or the x-imap-* / x-mailbox-token headers, not both")
			return
		case strings.EqualFold(scheme, "Bearer") && rest && !strings.HasPrefix(strings.TrimSpace(token), string(credentials.KindAccess)):
			// The REST mirror takes a credentials token as a bearer token
			// too, and opens it itself.
			next.ServeHTTP(w, r)
		case strings.EqualFold(scheme, "Bearer"):
			creds, err := oauth.OpenAccess(strings.TrimSpace(token))
			if err != nil {
				challenge(w, "invalid_token", err.Error())
				httpError(w, http.StatusUnauthorized, err.Error())
				return
			}
			ctx := credentials.NewContext(r.Context(), creds)
			reqlog.FromContext(ctx).SetUser(creds.User)
			r = r.Clone(ctx)
			r.Header.Del("Authorization") // consumed: the REST mirror must not read it as a credentials token
			next.ServeHTTP(&bearerWriter{ResponseWriter: w, rec: reqlog.FromContext(ctx), challenge: challenge}, r)
		case !hasOther && !rest:
			challenge(w, "", "")
			httpError(w, http.StatusUnauthorized, "sign in: this server needs credentials (OAuth sign-in, x-imap-user and x-imap-pass, or x-mailbox-token)")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// signInAgain is what a bearer caller is told when the mail server
// refuses the login its token carries.
const signInAgain = "the mail server refused the login this token carries (was the password changed?): sign in again"

// bearerWriter turns the answer to a bearer request whose login failed at
// the mail server into 401 + invalid_token. The tool layer records the
// outcome before the response is written (responses are not streamed), so
// the status can still be changed when the header goes out. The body (the
// JSON-RPC answer with the tool's error) is kept.
type bearerWriter struct {
	http.ResponseWriter
	rec       *reqlog.Record
	challenge func(http.ResponseWriter, string, string)
	wrote     bool
}

func (w *bearerWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if _, outcome, _ := w.rec.Fields(); outcome == "auth_failed" && (code == http.StatusOK || code == http.StatusUnauthorized) {
			w.Header().Del("Content-Length")
			w.challenge(w.ResponseWriter, "invalid_token", signInAgain)
			code = http.StatusUnauthorized
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *bearerWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets SSE responses through the wrapper.
func (w *bearerWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *bearerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
