package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

type encryptArgs struct {
	User     string `json:"user"`
	Password string `json:"password"`
	Verify   *bool  `json:"verify"`
}

// EncryptResult is imap_encrypt_credentials' structured result.
type EncryptResult struct {
	Token    string `json:"token" jsonschema_description:"sealed credentials token; pass it as the credentials argument of any tool"`
	User     string `json:"user" jsonschema_description:"the mailbox user the token is for"`
	Verified bool   `json:"verified" jsonschema_description:"true when the credentials were checked with an IMAP login"`
	KeyID    string `json:"key_id" jsonschema_description:"identifier of the server key that sealed the token"`
	Usage    string `json:"usage" jsonschema_description:"how to use the token"`
}

// EncryptCredentials is imap_encrypt_credentials: it seals a user and
// password into a token, after checking them with an IMAP login unless
// verify is false.
func EncryptCredentials(d Deps) Tool {
	def := mcp.NewTool("imap_encrypt_credentials",
		mcp.WithDescription("Seal mailbox credentials into an encrypted token (AES-256-GCM, readable only by this server) that can be passed as the `credentials` argument of the other tools instead of sending the password as a header. By default the credentials are first checked with an IMAP login. Without user and password, the connection's x-imap-user and x-imap-pass headers are sealed."),
		mcp.WithString("user", mcp.Description("Mailbox user name (usually the email address). Defaults to the x-imap-user header.")),
		mcp.WithString("password", mcp.Description("Mailbox password or app password. Defaults to the x-imap-pass header.")),
		mcp.WithBoolean("verify", mcp.Description("Check the credentials with an IMAP login before sealing them (default true)."), mcp.DefaultBool(true)),
		mcp.WithOutputSchema[EncryptResult](),
		annotations("Encrypt mailbox credentials", true, false, true, true),
	)
	handler := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := bind[encryptArgs](req)
		if err != nil {
			return d.fail(ctx, err), nil
		}
		var creds credentials.Credentials
		switch {
		case args.User != "" || args.Password != "":
			if args.User == "" || args.Password == "" {
				return d.fail(ctx, badInput("give both user and password, or neither to use the x-imap-user and x-imap-pass headers")), nil
			}
			if err := checkUser(args.User); err != nil {
				return d.fail(ctx, err), nil
			}
			creds = credentials.New(args.User, args.Password)
		default:
			c, ok := credentials.FromContext(ctx)
			if !ok {
				return d.fail(ctx, badInput("user and password are required (or send the x-imap-user and x-imap-pass headers)")), nil
			}
			creds = c
		}
		if err := d.admit(ctx, creds); err != nil {
			return d.fail(ctx, err), nil
		}
		// Sealed first: credentials that cannot become a token are refused
		// without a login at the mail server.
		token, err := d.Sealer.Seal(creds)
		if errors.Is(err, credentials.ErrNotUTF8) || errors.Is(err, credentials.ErrTooLong) {
			return d.fail(ctx, mailerr.Wrap(mailerr.BadInput, err, err.Error())), nil
		}
		if err != nil {
			return nil, fmt.Errorf("sealing failed")
		}
		verify := args.Verify == nil || *args.Verify
		if verify {
			if err := d.Mailbox.Verify(ctx, creds); err != nil {
				return d.fail(ctx, err), nil
			}
		}
		res := EncryptResult{
			Token: token, User: creds.User, Verified: verify, KeyID: d.Sealer.KeyID(),
			Usage: "Pass this token as the `credentials` argument of any mailbox tool, or configure your MCP client with it instead of the x-imap-pass header. Treat it like a password: it grants access to the mailbox through this gateway until the server's ENCRYPTION_KEY changes.",
		}
		status := "not verified (verify=false)"
		if verify {
			status = "verified with an IMAP login"
		}
		text := fmt.Sprintf("Credentials for %s %s.\nToken: %s\n\n%s", creds.User, status, token, res.Usage)
		return ok(res, text), nil
	}
	return Tool{Def: def, Handler: handler}
}

// checkUser refuses user names that cannot be right and could confuse the
// IMAP command line (control characters).
func checkUser(u string) error {
	if len(u) > 320 {
		return badInput("user is too long (at most 320 characters)")
	}
	for _, r := range u {
		if r < 0x20 || r == 0x7f {
			return badInput("user contains a control character")
		}
	}
	return nil
}
