package config

import (
	"strings"
	"testing"
)

func TestClientIPv6Prefix(t *testing.T) {
	c, err := FromEnv(base())
	if err != nil || c.ClientIPv6Prefix != 64 {
		t.Fatalf("default: %v %v", c.ClientIPv6Prefix, err)
	}
	if c, err = FromEnv(base("CLIENT_IPV6_PREFIX=56")); err != nil || c.ClientIPv6Prefix != 56 {
		t.Fatalf("56: %v %v", c.ClientIPv6Prefix, err)
	}
	for _, env := range []string{"CLIENT_IPV6_PREFIX=0", "CLIENT_IPV6_PREFIX=129", "CLIENT_IPV6_PREFIX=16", "CLIENT_IPV6_PREFIX=/64"} {
		if _, err := FromEnv(base(env)); err == nil || !strings.Contains(err.Error(), "CLIENT_IPV6_PREFIX") {
			t.Errorf("%s: %v", env, err)
		}
	}
	if _, err := FromEnv(base("OAUTH_GRANTS_PER_ACCOUNT=1")); err == nil || !strings.Contains(err.Error(), "OAUTH_GRANTS_PER_ACCOUNT: expected a number from 2") {
		t.Errorf("OAUTH_GRANTS_PER_ACCOUNT=1: %v", err)
	}
}
