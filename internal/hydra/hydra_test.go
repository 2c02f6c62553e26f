package hydra_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/hydra"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// redirect is where the test clients are sent back to; nothing listens
// there: SignIn stops at the redirect without following it.
const redirect = "http://127.0.0.1:9/callback"

func newClient(t *testing.T, h *mailtest.Hydra, c hydra.Client) hydra.Client {
	t.Helper()
	if c.RedirectURIs == nil {
		c.RedirectURIs = []string{redirect}
	}
	if c.Scopes == nil {
		c.Scopes = []string{"openid", "offline_access", "email", "mail"}
	}
	c, err := h.CreateClient(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wantOAuthError(t *testing.T, err error, code string) {
	t.Helper()
	var oe *hydra.OAuthError
	if !errors.As(err, &oe) || oe.Code != code {
		t.Fatalf("got %v, want OAuth error %s", err, code)
	}
}

// The authorization-code flow with PKCE through the login form: a wrong
// password is refused, the right one yields access, refresh and ID tokens;
// the ID token names the mailbox; introspection (what Dovecot asks) answers
// the address in sub; a refresh rotates the refresh token; revoking the
// consent kills both tokens.
func TestCodeFlow(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	h := mailtest.StartHydra(t, mailtest.HydraOptions{Scopes: []string{"mail"}})
	t.Logf("Hydra ready in %v (issuer %s)", time.Since(start).Round(time.Millisecond), h.IssuerURL)
	if !strings.HasPrefix(h.IssuerURL, "http://127.0.0.1:") || !strings.HasSuffix(h.IssuerURL, "/") {
		t.Fatalf("issuer %q", h.IssuerURL)
	}
	c := newClient(t, h, hydra.Client{Name: "gateway"})
	if c.ID == "" || c.Secret == "" {
		t.Fatalf("client %+v has no id or secret", c)
	}

	authURL, req := h.AuthCodeURL(hydra.AuthRequest{Client: c, LoginHint: mailtest.Alice})
	if _, err := h.SignIn(ctx, authURL, mailtest.Alice, "wrong", redirect); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("SignIn with a wrong password: %v", err)
	}
	flow := time.Now()
	cb, err := h.SignIn(ctx, authURL, "ALICE@example.test", mailtest.AlicePassword, redirect)
	if err != nil {
		t.Fatal(err)
	}
	code, err := hydra.CallbackCode(cb, req.State)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Exchange(ctx, c, code, "not-the-verifier-"+req.Verifier, req.RedirectURI); err == nil {
		t.Fatal("the code was exchanged with a wrong PKCE verifier")
	}
	// a failed exchange spends the code at Hydra: sign in again
	authURL, req = h.AuthCodeURL(hydra.AuthRequest{Client: c})
	if cb, err = h.SignIn(ctx, authURL, mailtest.Alice, mailtest.AlicePassword, redirect); err != nil {
		t.Fatal(err)
	}
	if code, err = hydra.CallbackCode(cb, req.State); err != nil {
		t.Fatal(err)
	}
	tok, err := h.Exchange(ctx, c, code, req.Verifier, req.RedirectURI)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sign-in and exchange in %v; token scope %q, expires in %ds", time.Since(flow).Round(time.Millisecond), tok.Scope, tok.ExpiresIn)
	if tok.AccessToken == "" || tok.RefreshToken == "" || tok.IDToken == "" || !strings.EqualFold(tok.TokenType, "bearer") {
		t.Fatalf("tokens: access %t refresh %t id %t type %q", tok.AccessToken != "", tok.RefreshToken != "", tok.IDToken != "", tok.TokenType)
	}
	claims, err := tok.IDClaims()
	if err != nil {
		t.Fatal(err)
	}
	aud, _ := claims["aud"].([]any)
	if claims["email"] != mailtest.Alice || claims["email_verified"] != true || claims["sub"] != mailtest.Alice ||
		claims["nonce"] != req.Nonce || claims["iss"] != h.IssuerURL || !slices.Contains(aud, any(c.ID)) {
		t.Errorf("ID token claims %v", claims)
	}

	in, err := h.Introspect(ctx, tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if !in.Active || in.Subject != mailtest.Alice || in.ClientID != c.ID || in.Scope != "openid offline_access email mail" || in.TokenUse != "access_token" {
		t.Errorf("introspection %+v", in)
	}
	if got := h.ConsentRequests(); len(got) != 2 || got[1].Subject != mailtest.Alice || got[1].ClientID != c.ID ||
		!slices.Equal(got[1].Scopes, c.Scopes) || !slices.Equal(got[1].Granted, c.Scopes) {
		t.Errorf("consent requests %+v", got)
	}
	if in, err := h.Introspect(ctx, "ory_at_unknown"); err != nil || in.Active {
		t.Errorf("an unknown token: %+v %v, want inactive", in, err)
	}

	next, err := h.Refresh(ctx, c, tok.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	if next.AccessToken == tok.AccessToken || next.RefreshToken == "" || next.RefreshToken == tok.RefreshToken {
		t.Fatal("a refresh gave the same access token, or no new refresh token")
	}
	if in, _ := h.Introspect(ctx, next.AccessToken); !in.Active || in.Subject != mailtest.Alice {
		t.Errorf("the refreshed token: %+v", in)
	}

	if err := h.RevokeConsent(ctx, mailtest.Alice, c.ID); err != nil {
		t.Fatal(err)
	}
	if in, _ := h.Introspect(ctx, next.AccessToken); in.Active {
		t.Error("the access token is still active after the consent was revoked")
	}
	_, err = h.Refresh(ctx, c, next.RefreshToken)
	wantOAuthError(t, err, "invalid_grant")

	// RFC 6749 4.1.2: a code used twice is refused, and what it gave is
	// revoked
	authURL, req = h.AuthCodeURL(hydra.AuthRequest{Client: c})
	if cb, err = h.SignIn(ctx, authURL, mailtest.Alice, mailtest.AlicePassword, redirect); err != nil {
		t.Fatal(err)
	}
	if code, err = hydra.CallbackCode(cb, req.State); err != nil {
		t.Fatal(err)
	}
	if tok, err = h.Exchange(ctx, c, code, req.Verifier, req.RedirectURI); err != nil {
		t.Fatal(err)
	}
	_, err = h.Exchange(ctx, c, code, req.Verifier, req.RedirectURI)
	wantOAuthError(t, err, "invalid_grant")
	if in, _ := h.Introspect(ctx, tok.AccessToken); in.Active {
		t.Error("the access token of a replayed code is still active")
	}
}

// A pairwise client sees an opaque sub in the ID token, as at Microsoft:
// only the email claim names the mailbox; introspection keeps the address
// in sub for Dovecot.
func TestPairwiseSubject(t *testing.T) {
	ctx := context.Background()
	h := mailtest.StartHydra(t, mailtest.HydraOptions{AutoLogin: mailtest.Bob})
	c := newClient(t, h, hydra.Client{Pairwise: true, Scopes: []string{"openid", "offline_access", "email"}})
	tok, err := h.Login(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	claims, err := tok.IDClaims()
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := claims["sub"].(string)
	if sub == "" || sub == mailtest.Bob || claims["email"] != mailtest.Bob {
		t.Errorf("ID token: sub %q email %v", sub, claims["email"])
	}
	in, err := h.Introspect(ctx, tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if in.Subject != mailtest.Bob || in.ObfuscatedSubject != sub {
		t.Errorf("introspection: sub %q obfuscated %q, want %q and %q", in.Subject, in.ObfuscatedSubject, mailtest.Bob, sub)
	}
}

// What a user can do at the provider besides saying yes: cancel the login,
// refuse consent, grant fewer scopes; and a public client (no secret).
func TestRefusalsAndPartialGrants(t *testing.T) {
	ctx := context.Background()
	h := mailtest.StartHydra(t, mailtest.HydraOptions{
		Consent: func(r hydra.ConsentRequest) ([]string, error) {
			if slices.Contains(r.Scopes, "admin") {
				return nil, errors.New("no admin for robots")
			}
			// the user unticks mail.send
			return slices.DeleteFunc(slices.Clone(r.Scopes), func(s string) bool { return s == "mail.send" }), nil
		},
	})
	c := newClient(t, h, hydra.Client{Public: true, Scopes: []string{"openid", "offline_access", "email", "mail", "mail.send", "admin"}})
	if c.Secret != "" {
		t.Fatalf("a public client got a secret")
	}

	t.Run("the login form", func(t *testing.T) {
		authURL, _ := h.AuthCodeURL(hydra.AuthRequest{Client: c, LoginHint: mailtest.Bob})
		resp, err := http.Get(authURL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("login page: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		for _, want := range []string{`id="email"`, `value="` + mailtest.Bob + `"`, `id="password"`, `id="login"`, `id="deny"`} {
			if !strings.Contains(string(body), want) {
				t.Errorf("the login page lacks %s", want)
			}
		}
	})

	t.Run("cancel at login", func(t *testing.T) {
		// a browser pressing Cancel: POST action=deny
		authURL, req := h.AuthCodeURL(hydra.AuthRequest{Client: c})
		resp, err := http.Get(authURL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		challenge := resp.Request.URL.Query().Get("login_challenge")
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err = noFollow.PostForm(h.AppURL+"/login", map[string][]string{"login_challenge": {challenge}, "action": {"deny"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, err := resp.Location()
		if err != nil {
			t.Fatalf("cancel: %d, no redirect", resp.StatusCode)
		}
		// Hydra's redirect then goes to the client with error=access_denied
		resp, err = noFollow.Get(loc.String())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, err = resp.Location()
		if err != nil || !strings.HasPrefix(loc.String(), redirect) {
			t.Fatalf("after cancel: %d %v %v", resp.StatusCode, loc, err)
		}
		_, err = hydra.CallbackCode(loc, req.State)
		wantOAuthError(t, err, "access_denied")
	})

	t.Run("consent refused", func(t *testing.T) {
		_, err := h.Login(ctx, c, mailtest.Alice, "openid", "admin")
		wantOAuthError(t, err, "access_denied")
	})

	t.Run("fewer scopes granted; no email without the email scope", func(t *testing.T) {
		tok, err := h.Login(ctx, c, mailtest.Alice, "openid", "offline_access", "mail", "mail.send")
		if err != nil {
			t.Fatal(err)
		}
		if tok.Scope != "openid offline_access mail" {
			t.Errorf("granted %q, want openid offline_access mail", tok.Scope)
		}
		claims, err := tok.IDClaims()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := claims["email"]; ok || claims["sub"] != mailtest.Alice {
			t.Errorf("ID token without the email scope: %v", claims)
		}
		// a public client refreshes with its id alone
		if _, err := h.Refresh(ctx, c, tok.RefreshToken); err != nil {
			t.Fatal(err)
		}
	})
}

// Stop ends Hydra and removes its directory; and the watchdog ends a Hydra
// whose test process was killed (a child test binary started here, killed
// with SIGKILL after it started Hydra).
func TestStopAndWatchdog(t *testing.T) {
	if os.Getenv("HYDRA_TEST_CHILD") == "1" {
		h, err := hydra.Start(hydra.Options{})
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("HYDRA " + h.Dir + " " + h.AdminURL + "\n")
		time.Sleep(time.Minute) // killed before this ends
		return
	}
	h := mailtest.StartHydra(t, mailtest.HydraOptions{})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	if h.Running() {
		t.Error("Hydra still runs after Stop")
	}
	if _, err := os.Stat(h.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stop left %s: %v", h.Dir, err)
	}
	if err := h.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}

	if testing.Short() {
		return
	}
	child := exec.Command(os.Args[0], "-test.run=^TestStopAndWatchdog$", "-test.v")
	child.Env = append(os.Environ(), "HYDRA_TEST_CHILD=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	var line string
	buf := make([]byte, 4096)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(line, "HYDRA ") && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		line += string(buf[:n])
		if err != nil {
			break
		}
	}
	i := strings.Index(line, "HYDRA ")
	if i < 0 {
		t.Fatalf("the child did not start Hydra: %q", line)
	}
	for !strings.Contains(line[i:], "\n") && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		line += string(buf[:n])
		if err != nil {
			break
		}
	}
	f := strings.Fields(line[i:])
	dir, admin := f[1], f[2]
	if resp, err := http.Get(admin + "/health/alive"); err != nil {
		t.Fatalf("the child's Hydra does not answer: %v", err)
	} else {
		resp.Body.Close()
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	gone := false
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		_, derr := os.Stat(dir)
		resp, herr := http.Get(admin + "/health/alive")
		if herr == nil {
			resp.Body.Close()
		}
		if errors.Is(derr, os.ErrNotExist) && herr != nil {
			gone = true
			break
		}
	}
	if !gone {
		t.Fatalf("Hydra of a killed process still runs or left %s behind", dir)
	}
}
