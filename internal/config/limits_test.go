package config

import (
	"strings"
	"testing"
	"time"
)

func TestFloodLimits(t *testing.T) {
	c, err := FromEnv(base())
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxConnections != 1024 || c.MaxInflightRequests != 768 || c.MaxBufferedBytes != 32<<20 || c.BodyReadTimeout != 10*time.Second {
		t.Fatalf("defaults: %d %d %d %s", c.MaxConnections, c.MaxInflightRequests, c.MaxBufferedBytes, c.BodyReadTimeout)
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{base("MAX_WAITERS=800"), "MAX_WAITERS: 800 waits would fill MAX_INFLIGHT_REQUESTS (768)"},
		{base("MAX_CONNECTIONS=0"), "MAX_CONNECTIONS: expected a value greater than zero"},
		{base("MAX_INFLIGHT_REQUESTS=-1"), "MAX_INFLIGHT_REQUESTS: expected a value greater than zero"},
		{base("BODY_READ_TIMEOUT=-1s"), "BODY_READ_TIMEOUT: expected a value greater than zero"},
		{base("MAX_BUFFERED_BYTES=2097151"), "MAX_BUFFERED_BYTES: expected at least twice MAX_REQUEST_BYTES (1048576)"},
		{base("MAX_REQUEST_BYTES=40000000"), "MAX_BUFFERED_BYTES: expected at least twice MAX_REQUEST_BYTES (40000000)"},
	} {
		_, err := FromEnv(tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.env[len(tc.env)-1], err, tc.want)
		}
	}
	if _, err := FromEnv(base("MAX_REQUEST_BYTES=2000", "MAX_BUFFERED_BYTES=4000")); err != nil {
		t.Fatalf("budget twice the request limit: %v", err)
	}
}
