package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

type encryptArgs struct {
	User     string `json:"user" max:"320" desc:"Mailbox user name (usually the email address). Defaults to the x-imap-user header."`
	Password string `json:"password" max:"1024" desc:"Mailbox password or app password. Defaults to the x-imap-pass header."`
	Verify   *bool  `json:"verify" default:"true" desc:"Check the credentials with an IMAP login before sealing them (default true)."`
}

func (a *encryptArgs) check() error {
	if (a.User == "") != (a.Password == "") {
		return badArg("give both user and password, or neither to seal the x-imap-user and x-imap-pass headers")
	}
	for _, r := range a.User {
		if r < 0x20 || r == 0x7f {
			return badArg("user must not contain control characters")
		}
	}
	return nil
}

// EncryptResult is imap_encrypt_credentials' result.
type EncryptResult struct {
	Token    string `json:"token" desc:"sealed credentials token (mbx1. followed by base64url); pass it as the credentials argument or the x-mailbox-token header"`
	User     string `json:"user" desc:"the mailbox user the token is for"`
	Verified bool   `json:"verified" desc:"true when the credentials were checked with an IMAP login"`
	KeyID    string `json:"key_id" desc:"identifier of the server key that sealed the token (8 hex characters)"`
	Usage    string `json:"usage" desc:"how to use the token"`
}

const tokenUsage = "Pass this token as the `credentials` argument of any mailbox tool, or configure your MCP client to send it as the x-mailbox-token header instead of x-imap-user and x-imap-pass. Treat it like a password: it grants access to the mailbox through this gateway until the server's ENCRYPTION_KEY changes or the password does."

var encryptCredentials = Def[encryptArgs, EncryptResult]{
	Name:  "imap_encrypt_credentials",
	Title: "Encrypt mailbox credentials",
	Description: "Seal mailbox credentials into an encrypted token (AES-256-GCM, readable only by this server) that can be passed as the `credentials` argument of the other tools, or sent as the x-mailbox-token header, instead of sending the password with every request. " +
		"By default the credentials are first checked with an IMAP login. Without user and password, the connection's x-imap-user and x-imap-pass headers are sealed.",
	ReadOnly: true, Idempotent: true, OpenWorld: true,
	OwnCredentials: true,
	Example:        map[string]any{"user": "alice@demo.test", "password": "demo-alice"},
	Run: func(ctx context.Context, c *Call, a encryptArgs) (EncryptResult, error) {
		creds, ok := credentials.FromContext(ctx)
		if a.User != "" {
			creds, ok = credentials.New(a.User, a.Password), true
		}
		if !ok {
			return EncryptResult{}, badArg("user and password are required (or send the x-imap-user and x-imap-pass headers)")
		}
		if err := c.admit(ctx, creds); err != nil {
			return EncryptResult{}, err
		}
		// Sealed first: credentials that cannot become a token are refused
		// without a login at the mail server.
		token, err := c.Sealer.Seal(creds)
		if errors.Is(err, credentials.ErrNotUTF8) || errors.Is(err, credentials.ErrTooLong) || errors.Is(err, credentials.ErrNUL) {
			return EncryptResult{}, mailerr.Wrap(mailerr.BadInput, err, err.Error())
		}
		if err != nil {
			return EncryptResult{}, err
		}
		verify := a.Verify == nil || *a.Verify
		if verify {
			if err := c.Mailbox.Verify(ctx, creds); err != nil {
				return EncryptResult{}, err
			}
		}
		return EncryptResult{Token: token, User: creds.User, Verified: verify, KeyID: c.Sealer.KeyID(), Usage: tokenUsage}, nil
	},
	Text: func(r EncryptResult) string {
		status := "not verified (verify=false)"
		if r.Verified {
			status = "verified with an IMAP login"
		}
		return fmt.Sprintf("Credentials for %s %s.\nToken: %s\n\n%s", line(r.User), status, r.Token, r.Usage)
	},
}
