package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

func TestRedisVariables(t *testing.T) {
	c, err := FromEnv(base())
	if err != nil {
		t.Fatal(err)
	}
	if c.RedisURL != "" || c.RedisFailPolicy() != memory.FailClosed || c.RedisTimeout != 200*time.Millisecond {
		t.Fatalf("defaults: url %q, fail %v, timeout %s", c.RedisURL, c.RedisFailPolicy(), c.RedisTimeout)
	}
	if roots, err := c.RedisCAs(); roots != nil || err != nil {
		t.Fatalf("no REDIS_CA_FILE: %v, %v", roots, err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte(testCA), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = FromEnv(base("REDIS_URL=rediss://gw:pw@redis.internal:6380/2", "REDIS_FAIL=open", "REDIS_TIMEOUT=50ms", "REDIS_CA_FILE="+ca))
	if err != nil {
		t.Fatal(err)
	}
	if c.RedisFailPolicy() != memory.FailOpen || c.RedisTimeout != 50*time.Millisecond {
		t.Fatalf("parsed: %+v", c)
	}
	if roots, err := c.RedisCAs(); roots == nil || err != nil {
		t.Fatalf("REDIS_CA_FILE: %v, %v", roots, err)
	}
	for _, tc := range []struct{ env, want string }{
		{"REDIS_URL=redis.internal:6379", "REDIS_URL: expected a redis:// or rediss:// URL"},
		{"REDIS_URL=http://redis:6379", "REDIS_URL: expected a redis:// or rediss:// URL"},
		{"REDIS_URL=redis://redis:6379/x", "REDIS_URL: invalid database number"},
		{"REDIS_URL=redis://:hunter2@redis:6379/0?pool_size=5", "REDIS_URL: expected no query"},
		{"REDIS_FAIL=sometimes", `REDIS_FAIL: expected closed or open, got "sometimes"`},
		{"REDIS_TIMEOUT=1ms", "REDIS_TIMEOUT: expected a duration from 10ms to 5s"},
		{"REDIS_TIMEOUT=soon", "REDIS_TIMEOUT: expected a duration"},
		{"REDIS_CA_FILE=/nonexistent/ca.pem", "REDIS_CA_FILE: cannot read the CA file"},
	} {
		_, err := FromEnv(base(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.env, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", tc.env, err)
		}
	}
}

// testCA is a self-signed certificate (its key is thrown away).
const testCA = `-----BEGIN CERTIFICATE-----
MIIBhTCCASugAwIBAgIQIRi6zePL6mKjOipn+dNuaTAKBggqhkjOPQQDAjASMRAw
DgYDVQQKEwdBY21lIENvMB4XDTE3MTAyMDE5NDMwNloXDTE4MTAyMDE5NDMwNlow
EjEQMA4GA1UEChMHQWNtZSBDbzBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABD0d
7VNhbWvZLWPuj/RtHFjvtJBEwOkhbN/BnnE8rnZR8+sbwnc/KhCk3FhnpHZnQz7B
5aETbbIgmuvewdjvSBSjYzBhMA4GA1UdDwEB/wQEAwICpDATBgNVHSUEDDAKBggr
BgEFBQcDATAPBgNVHRMBAf8EBTADAQH/MCkGA1UdEQQiMCCCDmxvY2FsaG9zdDo1
NDUzgg4xMjcuMC4wLjE6NTQ1MzAKBggqhkjOPQQDAgNIADBFAiEA2zpJEPQyz6/l
Wf86aX6PepsntZv2GYlA5UpabfT2EZICICpJ5h/iI+i341gBmLiAFQOyTDT+/wQc
6MF9+Yw1Yy0t
-----END CERTIFICATE-----
`
