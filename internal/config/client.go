package config

import (
	"os"
	"strings"
)

// Client is what the CLI client (mailbox-mcp send|peek|check|wait|list|read|agents|state)
// takes from the environment: where the gateway is and who is asking. It
// is not part of Config: the client never runs a gateway.
type Client struct {
	// URL is MAILBOX_URL, the gateway's base URL; when unset, the local
	// gateway of PORT and BIND_ADDRESS (as for healthcheck).
	URL string
	// Token is MAILBOX_TOKEN, a credentials token; it wins over User and
	// Password.
	Token string
	// User and Password are IMAP_USER and IMAP_PASS, the mailbox login.
	User, Password string
	// Agent is MAILBOX_AGENT, the agent of the mailbox the client acts as
	// (sent as x-mailbox-agent); --agent overrides it.
	Agent string
}

// ClientEnv reads the CLI client's variables.
func ClientEnv() Client { return clientEnv(os.Environ()) }

func clientEnv(environ []string) Client {
	var c Client
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "MAILBOX_URL":
			c.URL = strings.TrimSpace(v)
		case "MAILBOX_TOKEN":
			c.Token = strings.TrimSpace(v)
		case "IMAP_USER":
			c.User = strings.TrimSpace(v)
		case "IMAP_PASS":
			c.Password = v
		case "MAILBOX_AGENT":
			c.Agent = strings.TrimSpace(v)
		}
	}
	if c.URL == "" {
		c.URL = strings.TrimSuffix(healthURL(environ), "/health")
	}
	return c
}
