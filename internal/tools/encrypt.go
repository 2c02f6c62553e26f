package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

type encryptArgs struct {
	User     string `json:"user" max:"320" desc:"Mailbox user name (usually the email address). Defaults to the x-imap-user header."`
	Password string `json:"password" max:"1024" desc:"Mailbox password or app password. Defaults to the x-imap-pass header."`
	Host     string `json:"host" max:"255" desc:"The mail host of user, when this gateway serves several (MAIL_HOSTS); default: the x-imap-host header, else the gateway's own."`
	Verify   *bool  `json:"verify" default:"true" desc:"Check the credentials with an IMAP login before sealing them (default true)."`
	Access   string `json:"access" enum:"read,organize,full" desc:"Narrow the token to this access level: read, organize or full (at most what the gateway allows, and what the caller's own credentials allow when no user and password are given). Default: as much as that."`
	Send     *bool  `json:"send" desc:"Allow sending mail with the token; false makes a token that cannot send. Default: as the credentials sealed allow (a sign-in or token that cannot send makes a token that cannot either)."`
	Approval string `json:"approval" enum:"off,send,destructive,all" desc:"Make the token ask a person first, besides what the gateway's APPROVAL asks: send (every message that leaves), destructive (permanent deletion, deleting a folder, pruning agent mail) or all. A token can only ask for more approval than the credentials it is made from, never less. Default: as those credentials."`
	Agent    string `json:"agent" max:"40" desc:"Bind the token to this agent name (lower-case letters, digits, '.', '_', '-'; 1 to 40): every call with it acts as that agent, with its own folder, and a request naming another agent is refused. Default: none (the x-mailbox-agent header or ?agent= names the agent per request), or the agent of the token being sealed again."`
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
	if a.Agent != "" && !credentials.ValidAgentName(a.Agent) {
		return badArg("agent is not a valid agent name: %s", credentials.AgentNameRule)
	}
	return nil
}

// EncryptResult is imap_encrypt_credentials' result.
type EncryptResult struct {
	Token    string `json:"token" desc:"sealed credentials token (mbx1. followed by base64url); pass it as the credentials argument or the x-mailbox-token header"`
	User     string `json:"user" desc:"the mailbox user the token is for"`
	Verified bool   `json:"verified" desc:"true when the credentials were checked with an IMAP login"`
	Access   string `json:"access" desc:"the access level the token allows under this gateway: read, organize or full"`
	Send     bool   `json:"send" desc:"whether the token may send mail (the gateway must have sending on too)"`
	Agent    string `json:"agent,omitempty" desc:"the agent name the token is bound to, when it has one"`
	Approval string `json:"approval,omitempty" desc:"what a person approves first for calls with the token (the gateway's APPROVAL and the token's together): send, destructive or all"`
	Expires  string `json:"expires,omitempty" desc:"when the token stops working (RFC 3339), when it was made from a sign-in or a token that expires; absent: it lasts until the key or the password changes"`
	KeyID    string `json:"key_id" desc:"identifier of the server key that sealed the token (8 hex characters)"`
	Usage    string `json:"usage" desc:"how to use the token"`
}

const tokenUsage = "Pass this token as the `credentials` argument of any mailbox tool, or configure your MCP client to send it as the x-mailbox-token header instead of x-imap-user and x-imap-pass. Treat it like a password: it grants access to the mailbox through this gateway until the server's ENCRYPTION_KEY changes or the password does."

var encryptCredentials = Def[encryptArgs, EncryptResult]{
	Name:  "imap_encrypt_credentials",
	Title: "Encrypt mailbox credentials",
	Description: "Seal mailbox credentials into an encrypted token (AES-256-GCM, readable only by this server) that can be passed as the `credentials` argument of the other tools, or sent as the x-mailbox-token header, instead of sending the password with every request. " +
		"By default the credentials are first checked with an IMAP login. Without user and password, the caller's own credentials are sealed (the x-mailbox-token header, the x-imap-user and x-imap-pass headers, or the sign-in's access token), and never with more than they allow: their access level, sending, agent and expiry carry over, and a token can only be narrower. " +
		"With agent, the token acts as that agent of the mailbox (its own folder for waiting, peeking and checking, and its name on agent messages).",
	ReadOnly: true, Idempotent: true, OpenWorld: true,
	OwnCredentials: true,
	Example:        map[string]any{"user": "alice@demo.test", "password": "demo-alice"},
	Run: func(ctx context.Context, c *Call, a encryptArgs) (EncryptResult, error) {
		creds, err := sealable(ctx, c, a)
		if err != nil {
			return EncryptResult{}, err
		}
		if err := c.admit(ctx, creds); err != nil {
			return EncryptResult{}, err
		}
		want := credentials.Narrowing{Send: a.Send, Agent: a.Agent}
		if want.Approval, err = access.ParseApproval(a.Approval); err != nil {
			return EncryptResult{}, badArg("approval must be off, send, destructive or all (got %q)", a.Approval)
		}
		if a.Access != "" {
			l, err := access.Parse(a.Access)
			if err != nil {
				return EncryptResult{}, badArg("access must be read, organize or full (got %q)", a.Access)
			}
			if l > c.operatorLevel() {
				return EncryptResult{}, mailerr.New(mailerr.Forbidden, fmt.Sprintf("access %s is more than this gateway allows (%s, set by the operator with MAILBOX_ACCESS); no token was made", l, c.operatorLevel()))
			}
			want.Level = l
		}
		// Never more than the caller holds: a sign-in's or a token's scope,
		// agent and expiry carry over to what is made from them.
		if creds, err = creds.Derive(want); err != nil {
			return EncryptResult{}, mailerr.Wrap(mailerr.Forbidden, err, err.Error())
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
		r := EncryptResult{Token: token, User: creds.User, Verified: verify, KeyID: c.Sealer.KeyID(), Usage: tokenUsage,
			Access: creds.Scope.Effective(c.operatorLevel()).String(), Send: !creds.Scope.NoSend, Agent: creds.Agent}
		if ap := c.Approval | creds.Scope.Approval; ap != 0 {
			r.Approval = ap.String()
		}
		if !creds.Expires.IsZero() {
			r.Expires = creds.Expires.UTC().Format(time.RFC3339)
		}
		return r, nil
	},
	Text: func(r EncryptResult) string {
		status := "not verified (verify=false)"
		if r.Verified {
			status = "verified with an IMAP login"
		}
		send := "may send mail"
		if !r.Send {
			send = "may not send mail"
		}
		if r.Agent != "" {
			send += ", agent " + r.Agent
		}
		if r.Expires != "" {
			send += ", expires " + r.Expires
		}
		if r.Approval != "" {
			send += ", a person approves " + r.Approval
		}
		return fmt.Sprintf("Credentials for %s %s.\nToken (access %s, %s): %s\n\n%s", line(r.User), status, r.Access, send, r.Token, r.Usage)
	},
}

// sealable is what imap_encrypt_credentials seals: the user and password
// given as arguments (whoever knows the password holds everything the
// operator allows), or else the caller's own credentials with their scope,
// agent binding and expiry: the x-mailbox-token header, or the
// x-imap-user/x-imap-pass headers, or a sign-in's bearer token.
func sealable(ctx context.Context, c *Call, a encryptArgs) (credentials.Credentials, error) {
	if a.User != "" {
		creds := credentials.New(a.User, a.Password)
		switch host := strings.TrimSpace(a.Host); {
		case host != "" && c.Hosts == nil:
			return creds, mailerr.New(mailerr.Forbidden, "this gateway serves one mail host: leave host out")
		case host != "":
			// The same check, and the same one sentence for every refusal,
			// as the x-imap-host header.
			if err := c.Hosts.Check(ctx, host); err != nil {
				return creds, err
			}
			creds.Host = c.Hosts.Canonical(host)
		default:
			// The caller's host; never a sign-in provider's own with a
			// password (Provider stays unset: that host refuses it).
			if caller, ok := credentials.FromContext(ctx); ok {
				creds.Host = caller.Host
			}
		}
		return creds, nil
	}
	if a.Host != "" {
		return credentials.Credentials{}, badArg("host goes with user and password: the caller's own credentials keep their host")
	}
	if tok, ok := credentials.TokenFromContext(ctx); ok && strings.TrimSpace(tok) != "" {
		creds, err := c.Sealer.Open(tok)
		if err != nil {
			return creds, mailerr.Wrap(mailerr.BadInput, err, err.Error()).About(mailerr.SubjectToken)
		}
		return creds, nil
	}
	if creds, ok := credentials.FromContext(ctx); ok {
		return creds, nil
	}
	return credentials.Credentials{}, badArg("user and password are required (or send the x-imap-user and x-imap-pass headers)")
}
