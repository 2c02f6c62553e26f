package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// TestIPv6ClientsCountByTheirPrefix: the per-address limits count an IPv6
// client by its /64 (CLIENT_IPV6_PREFIX), since one host can send from any
// address of it: 12 registrations from 12 addresses of one /64 at
// OAUTH_RATE_PER_ADDRESS=5 go through 5 times, and 30 wrong passwords from
// 30 of its addresses reach the mail server LOGIN_BACKOFF_FAILURES_PER_ADDRESS
// (20) times. Another /64 is another client. (Before, each address was a
// client of its own: all 12 and all 30 went through.) The client address
// comes through a trusted proxy's X-Forwarded-For, as in a deployment.
func TestIPv6ClientsCountByTheirPrefix(t *testing.T) {
	_, base, _ := startSignInGateway(t, "TRUSTED_PROXIES=127.0.0.1", "OAUTH_RATE_PER_ADDRESS=5",
		"LOGIN_BACKOFF_FAILURES_PER_ADDRESS=20", "LOGIN_BACKOFF_FAILURES=5")
	register := func(from string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/register", strings.NewReader(`{"client_name":"x","redirect_uris":["http://127.0.0.1:9/cb"]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", from)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	registered := 0
	for i := range 12 {
		if register(fmt.Sprintf("2001:db8:1:2::%x", i+1)) == http.StatusCreated {
			registered++
		}
	}
	if registered != 5 {
		t.Errorf("%d of 12 registrations from one /64 went through at 5 per minute, want 5", registered)
	}
	if st := register("2001:db8:1:3::1"); st != http.StatusCreated {
		t.Errorf("the next /64: %d", st)
	}

	reached, heldBack := 0, 0
	for i := range 30 {
		c := mailtest.MCPClient(t, base+"/mcp", map[string]string{"x-imap-user": fmt.Sprintf("guess%d@demo.test", i), "x-imap-pass": "wrong",
			"X-Forwarded-For": fmt.Sprintf("2001:db8:5:6:%x::1", i+1)}, "")
		switch text := mailtest.Text(mailtest.Call(t, c, "imap_list_folders", nil)); {
		case strings.Contains(text, "authentication failed"):
			reached++
		case strings.Contains(text, "too many failed logins"):
			heldBack++
		default:
			t.Fatalf("guess %d: %s", i, text)
		}
	}
	if reached != 20 || heldBack != 10 {
		t.Errorf("30 wrong passwords from one /64: %d reached the mail server, %d held back; want 20 and 10", reached, heldBack)
	}
}
