package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// The checks of the shared memory (REDIS_URL) across replicas.

// redisHealthy checks that every replica's /health reports Redis "ok".
func redisHealthy(ctx context.Context, reps []string) error {
	for i, r := range reps {
		base := strings.TrimSuffix(r, "/mcp")
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
		resp, err := httpClient.Do(req)
		if err != nil {
			return fmt.Errorf("replica %d /health: %v", i+1, err)
		}
		var h map[string]string
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || h["redis"] != "ok" || h["status"] != "ok" {
			return fmt.Errorf("replica %d /health: %d %v (%v), want redis ok", i+1, resp.StatusCode, h, err)
		}
	}
	return nil
}

// signInClient drives the gateway's OAuth authorization server the way a
// browser without JavaScript would: no redirects followed, cookies kept.
type signInClient struct {
	http     *http.Client
	public   string // PUBLIC_URL of the replicas (the issuer)
	id       string
	redirect string
}

var signInForm = regexp.MustCompile(`name="form" value="([^"]+)"`)

type tokenAnswer struct {
	RefreshToken string `json:"refresh_token"`
	AccessToken  string `json:"access_token"`
	Error        string `json:"error"`
	Description  string `json:"error_description"`
}

// String shows an answer without its tokens (CI logs are public).
func (a tokenAnswer) String() string {
	if a.Error != "" {
		return a.Error + ": " + a.Description
	}
	return fmt.Sprintf("tokens issued (access %t, refresh %t)", a.AccessToken != "", a.RefreshToken != "")
}

// token posts form to base's /token.
func (c *signInClient) token(base string, form url.Values) (int, tokenAnswer, error) {
	resp, err := c.http.PostForm(base+"/token", form)
	if err != nil {
		return 0, tokenAnswer{}, err
	}
	defer resp.Body.Close()
	var a tokenAnswer
	err = json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a, err
}

// signIn registers a client at base, signs in as user there and returns
// the authorization code and the PKCE verifier.
func (c *signInClient) signIn(base, user, pass string) (code, verifier string, err error) {
	b, _ := json.Marshal(map[string]any{"client_name": "scaleout", "redirect_uris": []string{c.redirect}})
	resp, err := c.http.Post(base+"/register", "application/json", strings.NewReader(string(b)))
	if err != nil {
		return "", "", err
	}
	var reg struct {
		ClientID string `json:"client_id"`
	}
	json.NewDecoder(resp.Body).Decode(&reg)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || reg.ClientID == "" {
		return "", "", fmt.Errorf("register: %d %v", resp.StatusCode, reg)
	}
	c.id = reg.ClientID
	raw := make([]byte, 32)
	rand.Read(raw)
	verifier = base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {c.id}, "redirect_uri": {c.redirect},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"state": {"scaleout"}, "resource": {c.public + "/mcp"}}
	resp, err = c.http.Get(base + "/authorize?" + q.Encode())
	if err != nil {
		return "", "", err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := signInForm.FindSubmatch(page)
	if m == nil {
		return "", "", fmt.Errorf("authorize: %d, no sign-in form: %.300s", resp.StatusCode, page)
	}
	form := url.Values{"form": {html.UnescapeString(string(m[1]))}, "username": {user}, "password": {pass}, "action": {"allow"}}
	resp, err = c.http.PostForm(base+"/authorize", form)
	if err != nil {
		return "", "", err
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || loc == nil || loc.Query().Get("code") == "" {
		return "", "", fmt.Errorf("sign-in: %d %s: %.300s", resp.StatusCode, resp.Header.Get("Location"), page)
	}
	return loc.Query().Get("code"), verifier, nil
}

// refreshReplay signs in at replica 1 and checks that single use holds
// across replicas: the code redeemed at replica 1 is refused at replica
// 2; a refresh token rotated at replica 2 and replayed at replica 3 is
// refused there, and the sign-in it belongs to is revoked at replica 1
// too. It needs every replica's PUBLIC_URL to be public and OAUTH on.
func refreshReplay(reps []string, public, user, pass string) error {
	jar, _ := cookiejar.New(nil)
	c := &signInClient{public: strings.TrimSuffix(public, "/"), redirect: "http://127.0.0.1:9/callback",
		http: &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	base := func(i int) string { return strings.TrimSuffix(reps[i%len(reps)], "/mcp") }
	code, verifier, err := c.signIn(base(0), user, pass)
	if err != nil {
		return err
	}
	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {c.redirect},
		"client_id": {c.id}, "code_verifier": {verifier}, "resource": {c.public + "/mcp"}}
	status, first, err := c.token(base(0), exchange)
	if err != nil || status != http.StatusOK || first.RefreshToken == "" {
		return fmt.Errorf("code exchange at replica 1: %d %v %v", status, first, err)
	}
	if status, a, _ := c.token(base(1), exchange); status != http.StatusBadRequest || a.Error != "invalid_grant" {
		return fmt.Errorf("the code redeemed at replica 1, again at replica 2: %d %v, want 400 invalid_grant", status, a)
	}
	refresh := func(i int, tok string) (int, tokenAnswer, error) {
		return c.token(base(i), url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}, "client_id": {c.id}})
	}
	// the code's reuse revoked that sign-in: sign in again for the refresh check
	if code, verifier, err = c.signIn(base(0), user, pass); err != nil {
		return err
	}
	exchange.Set("code", code)
	exchange.Set("code_verifier", verifier)
	exchange.Set("client_id", c.id)
	if status, first, err = c.token(base(0), exchange); err != nil || status != http.StatusOK {
		return fmt.Errorf("second code exchange at replica 1: %d %v %v", status, first, err)
	}
	status, second, err := refresh(1, first.RefreshToken)
	if err != nil || status != http.StatusOK || second.RefreshToken == "" {
		return fmt.Errorf("refresh at replica 2: %d %v %v", status, second, err)
	}
	if status, a, _ := refresh(2, first.RefreshToken); status != http.StatusBadRequest || a.Error != "invalid_grant" {
		return fmt.Errorf("the refresh token rotated at replica 2, replayed at replica 3: %d %v, want 400 invalid_grant", status, a)
	}
	if status, a, _ := refresh(0, second.RefreshToken); status != http.StatusBadRequest || a.Error != "invalid_grant" {
		return fmt.Errorf("after the replay, the newest refresh token at replica 1: %d %v, want 400 invalid_grant (the sign-in revoked)", status, a)
	}
	return nil
}
