package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	gosmtp "github.com/emersion/go-smtp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/hydra"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// tokenIMAP logs in to the stack's IMAPS port as user with an OAuth access
// token (mech XOAUTH2 or OAUTHBEARER) and, once in, examines INBOX. It
// returns the login's error (nil: logged in and INBOX read).
func tokenIMAP(t *testing.T, s *mailtest.Stack, user, token, mech string) error {
	t.Helper()
	c, err := imapclient.DialTLS(s.IMAPSAddr(), &imapclient.Options{TLSConfig: s.TLSConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Caps().Has(imap.AuthCap(mech)) {
		t.Fatalf("Dovecot does not offer AUTH=%s: %v", mech, c.Caps())
	}
	sc, _ := credentials.NewOAuth(user, token).OAuthSASL([]string{mech})
	done := make(chan error, 1)
	go func() {
		if err := c.Authenticate(sc); err != nil {
			done <- err
			return
		}
		_, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		c.Close()
		t.Fatalf("%s login of %s: no answer in 20 s", mech, user)
		return nil
	}
}

// refused fails the test unless err is IMAP's NO [AUTHENTICATIONFAILED]
// (a refusal, not NO [UNAVAILABLE], which is what Dovecot says when the
// introspection answer makes no sense to it).
func refused(t *testing.T, err error, what string) {
	t.Helper()
	var ie *imap.Error
	if !errors.As(err, &ie) || ie.Code != imap.ResponseCodeAuthenticationFailed {
		t.Errorf("%s: %v, want NO [AUTHENTICATIONFAILED]", what, err)
	}
}

// tokenSMTP sends a message from user to bob through Postfix submission
// (implicit TLS) with SMTP AUTH mech and the access token; subject marks
// it.
func tokenSMTP(t *testing.T, s *mailtest.Stack, user, token, mech, subject string) error {
	t.Helper()
	c, err := gosmtp.DialTLS(s.SubmissionsAddr(), s.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("provider.test"); err != nil {
		t.Fatal(err)
	}
	sc, _ := credentials.NewOAuth(user, token).OAuthSASL([]string{mech})
	if err := c.Auth(sc); err != nil {
		return err
	}
	msg := fmt.Sprintf("From: %s\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%d@provider.test>\r\n\r\nsent with a token from Hydra\r\n",
		user, bob, subject, time.Now().UnixNano())
	if err := c.SendMail(user, []string{bob}, strings.NewReader(msg)); err != nil {
		return err
	}
	return c.Quit()
}

// The provider harness end to end, without the gateway: Ory Hydra issues
// tokens through the authorization-code flow with PKCE (login form,
// consent), and the mail stack takes exactly those tokens: Dovecot (IMAP,
// XOAUTH2 and OAUTHBEARER) and Postfix submission check each one at
// Hydra's introspection endpoint. A refreshed token works; a token
// without the mail scope, for another mailbox, expired, replaced by a
// refresh or whose consent was revoked is refused.
func TestProviderHarness(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	h := mailtest.StartHydra(t, mailtest.HydraOptions{Scopes: []string{"mail"}})
	hydraUp := time.Since(start)
	s := mailtest.OAuthStack(t, h, mailtest.Options{OAuthScope: "mail"})
	t.Logf("Hydra up in %v, the stack in %v", hydraUp.Round(time.Millisecond), (time.Since(start) - hydraUp).Round(time.Millisecond))

	// the gateway's registration: a confidential client, its callback
	gw, err := h.CreateClient(ctx, hydra.Client{
		Name:         "mailbox-mcp",
		RedirectURIs: []string{"http://127.0.0.1:8080/oauth/provider/callback"},
		Scopes:       []string{"openid", "offline_access", "email", "mail"},
	})
	if err != nil {
		t.Fatal(err)
	}
	mechs := []string{credentials.MechXOAuth2, credentials.MechOAuthBearer}

	flow := time.Now()
	authURL, req := h.AuthCodeURL(hydra.AuthRequest{Client: gw, LoginHint: alice})
	cb, err := h.SignIn(ctx, authURL, alice, s.Users[alice], gw.RedirectURIs[0])
	if err != nil {
		t.Fatal(err)
	}
	code, err := hydra.CallbackCode(cb, req.State)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := h.Exchange(ctx, gw, code, req.Verifier, req.RedirectURI)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("authorization-code flow (login form, consent, exchange) in %v", time.Since(flow).Round(time.Millisecond))
	if tok.RefreshToken == "" || tok.IDToken == "" {
		t.Fatal("no refresh or ID token")
	}
	claims, err := tok.IDClaims()
	if err != nil {
		t.Fatal(err)
	}
	if claims["email"] != alice {
		t.Fatalf("the ID token's email is %v, want %s", claims["email"], alice)
	}
	user := claims["email"].(string) // what the gateway logs in as

	// A client whose access tokens live 5 s (Client.AccessTTL; or
	// HydraOptions.AccessTTL for all), for the last subtest.
	const shortTTL = 5 * time.Second
	shortClient, err := h.CreateClient(ctx, hydra.Client{RedirectURIs: gw.RedirectURIs, Scopes: gw.Scopes, AccessTTL: shortTTL})
	if err != nil {
		t.Fatal(err)
	}
	shortIssued := time.Now()
	short, err := h.Login(ctx, shortClient, bob)
	if err != nil {
		t.Fatal(err)
	}
	if short.ExpiresIn > int(shortTTL/time.Second) || short.ExpiresIn < 1 {
		t.Fatalf("expires_in %d, want at most %v", short.ExpiresIn, shortTTL)
	}
	if err := tokenIMAP(t, s, bob, short.AccessToken, credentials.MechXOAuth2); err != nil {
		t.Fatalf("a fresh short-lived token: %v", err)
	}

	t.Run("IMAP and submission take the access token", func(t *testing.T) {
		for _, mech := range mechs {
			start := time.Now()
			if err := tokenIMAP(t, s, user, tok.AccessToken, mech); err != nil {
				t.Errorf("IMAP %s: %v", mech, err)
			}
			t.Logf("IMAP %s login + EXAMINE in %v", mech, time.Since(start).Round(time.Millisecond))
			if err := tokenSMTP(t, s, user, tok.AccessToken, mech, "via "+mech); err != nil {
				t.Errorf("submission %s: %v", mech, err)
			}
		}
		if _, err := s.WaitMessages(bob, "", 2, 15*time.Second); err != nil {
			t.Error(err)
		}
		plog, _ := os.ReadFile(filepath.Join(s.Dir, "log", "postfix.log"))
		for _, mech := range mechs {
			if !strings.Contains(string(plog), "sasl_method="+mech+", sasl_username="+alice) {
				t.Errorf("Postfix's log shows no %s login by %s", mech, alice)
			}
		}
	})

	t.Run("the token names one mailbox", func(t *testing.T) {
		refused(t, tokenIMAP(t, s, bob, tok.AccessToken, credentials.MechXOAuth2), "alice's token as bob")
		err := tokenSMTP(t, s, bob, tok.AccessToken, credentials.MechOAuthBearer, "as bob")
		if se := (*gosmtp.SMTPError)(nil); !errors.As(err, &se) || se.Code != 535 {
			t.Errorf("submission with alice's token as bob: %v, want 535", err)
		}
	})

	t.Run("without the mail scope", func(t *testing.T) {
		narrow, err := h.Login(ctx, gw, alice, "openid", "email")
		if err != nil {
			t.Fatal(err)
		}
		if in, err := h.Introspect(ctx, narrow.AccessToken); err != nil || !in.Active || slices.Contains(strings.Fields(in.Scope), "mail") {
			t.Fatalf("the narrow token: %+v %v", in, err)
		}
		refused(t, tokenIMAP(t, s, alice, narrow.AccessToken, credentials.MechOAuthBearer), "a token without the mail scope")
	})

	t.Run("refresh", func(t *testing.T) {
		start := time.Now()
		next, err := h.Refresh(ctx, gw, tok.RefreshToken)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("refresh in %v", time.Since(start).Round(time.Millisecond))
		for _, mech := range mechs {
			if err := tokenIMAP(t, s, alice, next.AccessToken, mech); err != nil {
				t.Errorf("IMAP %s with the refreshed token: %v", mech, err)
			}
		}
		// Hydra revokes the access token a refresh replaces
		refused(t, tokenIMAP(t, s, alice, tok.AccessToken, credentials.MechXOAuth2), "the replaced access token")
		tok = next
	})

	t.Run("revoked consent", func(t *testing.T) {
		if err := tokenIMAP(t, s, alice, tok.AccessToken, credentials.MechOAuthBearer); err != nil {
			t.Fatalf("before the revocation: %v", err)
		}
		if err := h.RevokeConsent(ctx, alice, gw.ID); err != nil {
			t.Fatal(err)
		}
		_, err := h.Refresh(ctx, gw, tok.RefreshToken)
		var oe *hydra.OAuthError
		if !errors.As(err, &oe) || oe.Code != "invalid_grant" {
			t.Errorf("refresh after the revocation: %v, want invalid_grant", err)
		}
		// no auth cache in the stack: refused at once
		for _, mech := range mechs {
			refused(t, tokenIMAP(t, s, alice, tok.AccessToken, mech), "IMAP "+mech+" after the revocation")
		}
		err = tokenSMTP(t, s, alice, tok.AccessToken, credentials.MechXOAuth2, "after revocation")
		if se := (*gosmtp.SMTPError)(nil); !errors.As(err, &se) || se.Code != 535 {
			t.Errorf("submission after the revocation: %v, want 535", err)
		}
	})

	t.Run("expired access token", func(t *testing.T) {
		// (issued before the other subtests, so that their time counts
		// toward the wait)
		time.Sleep(time.Until(shortIssued.Add(shortTTL + time.Second)))
		refused(t, tokenIMAP(t, s, bob, short.AccessToken, credentials.MechXOAuth2),
			fmt.Sprintf("a token %v old (lifetime %v)", time.Since(shortIssued).Round(time.Second), shortTTL))
		if in, _ := h.Introspect(ctx, short.AccessToken); in.Active {
			t.Error("Hydra still calls the expired token active")
		}
		// its refresh token outlives it
		again, err := h.Refresh(ctx, shortClient, short.RefreshToken)
		if err != nil {
			t.Fatal(err)
		}
		if err := tokenIMAP(t, s, bob, again.AccessToken, credentials.MechOAuthBearer); err != nil {
			t.Errorf("the refreshed short-lived token: %v", err)
		}
	})
}
