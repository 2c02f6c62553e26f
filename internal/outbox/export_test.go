package outbox

import "github.com/mailbox-mcp/mailbox-mcp/internal/credentials"

// IdempotentID exposes the derived Message-ID to the tests.
func IdempotentID(o *Outbox, creds credentials.Credentials, key string) (string, error) {
	return o.idempotentID(creds, key)
}
