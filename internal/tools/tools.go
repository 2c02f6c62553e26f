// Package tools defines the MCP tools: for each, its definition (arguments,
// annotations, output schema) and its handler. Handlers validate arguments,
// resolve the caller's credentials and call the mail layers (mailbox,
// submission); they never speak IMAP or SMTP themselves and never import
// go-imap or go-smtp.
package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/reqlog"
	"github.com/mailbox-mcp/mailbox-mcp/internal/submission"
)

// Deps is what the tools need from the rest of the gateway.
type Deps struct {
	Sealer  *credentials.Sealer
	Mailbox *mailbox.Client
	Log     *slog.Logger
	// Guard is the per-user rate limit (nil: none). The login back-off
	// lives in the mailbox layer, where logins happen.
	Guard *guard.Guard
	// SMTPEnabled registers the smtp_ tools; they also need Submission.
	SMTPEnabled bool
	// Submission sends mail for the smtp_ tools.
	Submission *submission.Client
	// SentFolder is where sent mail is copied: "" finds the Sent folder,
	// mailbox.NoSentFolder saves no copy.
	SentFolder string
	// MaxRecipients caps To+Cc+Bcc of one sent message (0: 100).
	MaxRecipients int
	// MaxAttachmentBytes caps the decoded attachments of one sent message
	// (0: 3/4 of MaxRequestBytes); MaxRequestBytes is the HTTP body limit,
	// stated in the tool descriptions.
	MaxAttachmentBytes, MaxRequestBytes int64
}

// Tool is one tool's definition and handler.
type Tool struct {
	Def     mcp.Tool
	Handler server.ToolHandlerFunc
}

// All returns every tool the configuration enables, in a stable order.
func All(d Deps) []Tool {
	tools := []Tool{
		EncryptCredentials(d),
		ListFolders(d),
		ListEmails(d),
		SearchEmails(d),
		ReadEmail(d),
	}
	if d.SMTPEnabled && d.Submission != nil {
		tools = append(tools, SendEmail(d), ReplyEmail(d))
	}
	return tools
}

// Register adds tools to s after checking each one's annotations: all four
// hints must be set, and a tool that is not read-only must say so (mcp-go's
// defaults would silently call every tool destructive).
func Register(s *server.MCPServer, tools []Tool) error {
	for _, t := range tools {
		if err := checkAnnotations(t.Def); err != nil {
			return err
		}
		s.AddTool(t.Def, t.Handler)
	}
	return nil
}

func checkAnnotations(t mcp.Tool) error {
	a := t.Annotations
	if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
		return fmt.Errorf("tool %s: all four annotations must be set", t.Name)
	}
	if *a.ReadOnlyHint && *a.DestructiveHint {
		return fmt.Errorf("tool %s: a read-only tool cannot be destructive", t.Name)
	}
	if t.OutputSchema.Type == "" && t.RawOutputSchema == nil {
		return fmt.Errorf("tool %s: an output schema is required", t.Name)
	}
	return nil
}

// annotations sets all four hints explicitly.
func annotations(title string, readOnly, destructive, idempotent, openWorld bool) mcp.ToolOption {
	return mcp.WithToolAnnotation(mcp.ToolAnnotation{
		Title: title, ReadOnlyHint: &readOnly, DestructiveHint: &destructive,
		IdempotentHint: &idempotent, OpenWorldHint: &openWorld,
	})
}

// credentialsArg is the optional token argument every mailbox tool takes.
func credentialsArg() mcp.ToolOption {
	return mcp.WithString("credentials", mcp.Description(
		"Optional credentials token from imap_encrypt_credentials. Without it the x-imap-user and x-imap-pass headers of the connection are used."))
}

// credentialsFor resolves the caller's mailbox credentials: an explicit
// token argument wins; otherwise the request's headers. A bad token is an
// error even when headers are present, so a mistake never silently acts on
// another mailbox.
func (d Deps) credentialsFor(ctx context.Context, token string) (credentials.Credentials, error) {
	if strings.TrimSpace(token) != "" {
		c, err := d.Sealer.Open(token)
		if err != nil {
			return credentials.Credentials{}, mailerr.Wrap(mailerr.BadInput, err, err.Error())
		}
		return c, d.admit(ctx, c)
	}
	if c, ok := credentials.FromContext(ctx); ok {
		return c, d.admit(ctx, c)
	}
	return credentials.Credentials{}, mailerr.New(mailerr.NoCredentials,
		"no mailbox credentials: send the x-imap-user and x-imap-pass headers, or pass a token from imap_encrypt_credentials as the credentials argument")
}

// admit applies the per-user rate limit to a call about to use creds.
func (d Deps) admit(ctx context.Context, creds credentials.Credentials) error {
	reqlog.FromContext(ctx).SetUser(creds.User)
	return d.Guard.AllowCall(creds.User)
}

// fail turns an error into a tool result the user can act on, and records
// the outcome for the request log. Unclassified errors get generic text: the
// cause goes to the log only.
func (d Deps) fail(ctx context.Context, err error) *mcp.CallToolResult {
	kind := mailerr.KindOf(err)
	reqlog.FromContext(ctx).SetOutcome(kind.String())
	if kind == mailerr.Internal {
		d.Log.ErrorContext(ctx, "tool failed", "err", err)
	} else {
		d.Log.DebugContext(ctx, "tool error", "kind", kind.String(), "err", err)
	}
	return mcp.NewToolResultError(mailerr.Message(err))
}

// ok returns structured content with a readable text fallback.
func ok(structured any, text string) *mcp.CallToolResult {
	return mcp.NewToolResultStructured(structured, text)
}

// badInput is a convenience for argument errors.
func badInput(format string, args ...any) error {
	return mailerr.Newf(mailerr.BadInput, format, args...)
}

// bind decodes the arguments into T, with a clear error for wrong types.
func bind[T any](req mcp.CallToolRequest) (T, error) {
	var v T
	if err := req.BindArguments(&v); err != nil {
		var msg string
		if errors.Is(err, errNoArgs) {
			msg = "arguments must be a JSON object"
		} else {
			msg = "invalid arguments: " + err.Error()
		}
		return v, mailerr.Wrap(mailerr.BadInput, err, msg)
	}
	return v, nil
}

var errNoArgs = errors.New("no arguments")

// Middleware records each call's tool name and outcome for the request log,
// and turns a panic in a handler into a generic error with the stack in the
// log: one bad message must never take the gateway down.
func Middleware(log *slog.Logger) server.ToolHandlerMiddleware {
	return func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
			rec := reqlog.FromContext(ctx)
			rec.SetTool(req.Params.Name)
			defer func() {
				if v := recover(); v != nil {
					log.ErrorContext(ctx, "panic in tool handler", "tool", req.Params.Name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
					rec.SetOutcome("panic")
					res, err = nil, errors.New("internal error")
				}
			}()
			res, err = next(ctx, req)
			switch {
			case err != nil:
				rec.SetOutcome("internal")
			case res != nil && res.IsError:
				rec.SetOutcome("error")
			default:
				rec.SetOutcome("ok")
			}
			return res, err
		}
	}
}

// messageCaller checks a uid argument and resolves the caller of a tool that
// acts on one message.
func (d Deps) messageCaller(ctx context.Context, uid int64, token string) (credentials.Credentials, error) {
	if uid <= 0 || uid > 1<<32-1 {
		return credentials.Credentials{}, badInput("uid must be a positive message UID (from imap_list_emails or imap_search_emails)")
	}
	return d.credentialsFor(ctx, token)
}
