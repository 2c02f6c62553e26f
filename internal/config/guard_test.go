package config

import (
	"strings"
	"testing"
)

func TestGuardVariables(t *testing.T) {
	c, err := FromEnv(base())
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimitPerMinute != 0 || c.LoginBackoffFailures != 5 || c.LoginBackoffPerAddress != 20 || !c.LoopbackBind() || c.PreviousKey() != nil {
		t.Fatalf("defaults: %+v", c)
	}
	other := strings.Repeat("ab", 32)
	c, err = FromEnv(base("ENCRYPTION_KEY_PREVIOUS="+other, "RATE_LIMIT_PER_MINUTE=90.5", "TRUSTED_PROXIES=127.0.0.1, 10.0.0.0/8,::1",
		"ALLOWED_HOSTS=mcp.example.com,mcp.example.com:8443", "BIND_ADDRESS=0.0.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	nets, _ := c.ProxyNets()
	if len(c.PreviousKey()) != 32 || c.RateLimitPerMinute != 90.5 || len(nets) != 3 || c.LoopbackBind() || len(c.AllowedHosts) != 2 {
		t.Fatalf("parsed: %+v %v", c, nets)
	}
	for _, tc := range []struct{ env, want string }{
		{"ENCRYPTION_KEY_PREVIOUS=abc", "ENCRYPTION_KEY_PREVIOUS: expected exactly 64 hex characters"},
		{"ENCRYPTION_KEY_PREVIOUS=" + strings.ToUpper(goodKey), "ENCRYPTION_KEY_PREVIOUS: is the same as ENCRYPTION_KEY"},
		{"RATE_LIMIT_PER_MINUTE=-1", "RATE_LIMIT_PER_MINUTE: expected 0 (off) or a positive number"},
		{"RATE_LIMIT_PER_MINUTE=lots", "RATE_LIMIT_PER_MINUTE: expected a number"},
		{"RATE_LIMIT_BURST=0", "RATE_LIMIT_BURST: expected a value greater than zero"},
		{"LOGIN_BACKOFF_FAILURES=-2", "LOGIN_BACKOFF_FAILURES: expected 0 (off)"},
		{"LOGIN_BACKOFF_DELAY=0s", "LOGIN_BACKOFF_DELAY: expected a value greater than zero"},
		{"LOGIN_BACKOFF_MAX=10s", "LOGIN_BACKOFF_MAX: expected at least LOGIN_BACKOFF_DELAY"},
		{"TRUSTED_PROXIES=10.0.0.0/33", "TRUSTED_PROXIES: expected IP addresses or CIDRs"},
		{"TRUSTED_PROXIES=proxy.local", "TRUSTED_PROXIES: expected IP addresses or CIDRs"},
		{"ALLOWED_HOSTS=https://mcp.example.com/", "ALLOWED_HOSTS: expected host names"},
	} {
		_, err := FromEnv(base(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.env, err, tc.want)
		}
	}
}
