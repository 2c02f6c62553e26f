package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/approval"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/download"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
)

// Approve is how a tool asks a person first (APPROVAL). Where the client
// can show a form (MCP elicitation), the call answers input_required with
// a sealed requestState and goes on when the client retries it with the
// person's yes; elsewhere it answers with a link to the approval page, and
// the page does the call when the person approves.
type Approve[A any] struct {
	// Kind is the approval the tool's calls need; When, if set, says which
	// calls need it (a trash only when permanent).
	Kind access.Approval
	When func(A) bool
	// Preview is what the person is shown: exactly what will happen.
	Preview func(ctx context.Context, c *Call, a A) (approval.Preview, error)
	// Hold keeps a message to send as a draft while the approval page
	// waits (sending tools); nil puts the call's arguments in the link.
	Hold func(ctx context.Context, c *Call, a A) (*approval.DraftRef, error)
	// Key is the call's idempotency key, carried to the send the page
	// makes, so that a retried call finds the message sent once.
	Key func(A) string
}

// Input is what a call brings for a tool that asks first: whether the
// client can show its user a form, and its answer to one.
type Input struct {
	CanElicit bool
	Responses mcp.InputResponses
	State     string
}

// Ask is the form a call waits on.
type Ask struct {
	Message string
	State   string
}

// askID names the one question in an input_required result.
const askID = "approve"

func (a *Ask) toolResult() *mcp.CallToolResult {
	return server.NewInputRequestBuilder(a.State).Elicit(askID, mcp.ElicitationParams{
		Message: a.Message,
		// Nothing to fill in: accept, decline or cancel is the answer.
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
	}).ToolResult()
}

// mcpInput reads an MCP call's approval input: the client's answer, and
// whether it can show a form (the 2026-07-28 request's capabilities, or
// for earlier protocols the capability its initialize declared, carried by
// the session id the HTTP layer gave it).
func mcpInput(ctx context.Context, req mcp.CallToolRequest) *Input {
	in := &Input{Responses: req.Params.InputResponses, State: req.Params.RequestState}
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		in.CanElicit = formElicitation(info.ClientCapabilities)
	} else {
		in.CanElicit = approval.CanElicit(ctx)
	}
	return in
}

// formElicitation reports whether caps include form elicitation (an empty
// elicitation capability means form, as before modes existed).
func formElicitation(caps *mcp.ClientCapabilities) bool {
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	e := caps.Elicitation
	return e.Form != nil || e.URL == nil
}

// Pending is the result of a call waiting on the approval page.
type Pending struct {
	Status       string    `json:"status" desc:"approval_required"`
	URL          string    `json:"url" desc:"the approval page: show this link to the person and stop; it works once"`
	Expires      time.Time `json:"expires" desc:"when the link stops working"`
	DraftsFolder string    `json:"drafts_folder,omitempty" desc:"a message to send waits in this folder as a draft until the person approves it (it is then sent and filed in Sent) or rejects it (it is then removed)"`
	DraftUID     uint32    `json:"draft_uid,omitempty" desc:"the waiting draft's UID"`
	Message      string    `json:"message" desc:"what to tell the person"`
}

// approvedKey marks a call the approval page makes after the person said
// yes: it does not ask again. Unexported, so nothing else can set it.
type approvedKey struct{}

// policy is what the caller's calls need approved: the operator's and
// the token's together.
func (c *Call) policy() access.Approval {
	if c.Approvals == nil {
		return 0
	}
	return c.Approval | c.Creds.Scope.Approval
}

// approve asks a person first when the policy covers this call: it returns
// the outcome to answer with and true, or false when the call may go on
// (not covered, or approved).
func (t Def[A, R]) approve(ctx context.Context, c *Call, a A, raw any, in *Input) (Outcome, bool) {
	ap := t.Approve
	if !c.policy().Covers(ap.Kind) || (ap.When != nil && !ap.When(a)) || ctx.Value(approvedKey{}) != nil {
		return Outcome{}, false
	}
	obj := callArgs(raw)
	account := c.Creds.AccountKey()
	if in != nil && in.State != "" {
		// The client's answer, with the state it was given.
		if err := c.Approvals.UseState(in.State, account, t.Name, obj); err != nil {
			return c.fail(ctx, mailerr.Wrap(mailerr.Forbidden, err, err.Error())), true
		}
		res := server.ElicitationResponse(in.Responses, askID)
		if res == nil || res.Action != mcp.ElicitationResponseActionAccept {
			action := "did not answer"
			if res != nil && res.Action == mcp.ElicitationResponseActionDecline {
				action = "declined"
			} else if res != nil {
				action = "cancelled"
			}
			return c.fail(ctx, mailerr.Newf(mailerr.Forbidden, "the person %s: %s", action, nothingDone(ap.Kind))), true
		}
		return Outcome{}, false
	}
	if in != nil && in.CanElicit {
		pv, err := ap.Preview(ctx, c, a)
		if err != nil {
			return c.fail(ctx, err), true
		}
		state, err := c.Approvals.NewState(account, t.Name, obj)
		if err != nil {
			return c.fail(ctx, err), true
		}
		return Outcome{Ask: &Ask{Message: pv.Message(), State: state}}, true
	}
	// No form in this client: the approval page.
	link := approval.Link{Creds: c.Creds, Tool: t.Name}
	p := Pending{Status: "approval_required"}
	if ap.Hold != nil {
		ref, err := ap.Hold(ctx, c, a)
		if err != nil {
			return c.fail(ctx, err), true
		}
		link.Draft, p.DraftsFolder, p.DraftUID = ref, ref.Folder, ref.UID
		if ap.Key != nil {
			link.IdempotencyKey = ap.Key(a)
		}
	} else {
		b, err := json.Marshal(obj)
		if err != nil {
			return c.fail(ctx, err), true
		}
		link.Args = b
	}
	tok, exp, err := c.Approvals.NewLink(link, c.ApprovalTTL)
	if err != nil {
		return c.fail(ctx, err), true
	}
	p.URL = strings.TrimRight(download.BaseFrom(ctx), "/") + approval.Prefix + tok
	p.Expires = exp
	p.Message = "A person must approve this before it happens. Show them this link (it opens a page on the mail gateway that shows exactly what will happen, with Approve and Reject), then stop: do not call the tool again for this. "
	if p.DraftUID != 0 {
		p.Message += fmt.Sprintf("The message waits as draft UID %d in %s; once approved it is sent and filed in Sent, once rejected it is removed (look at the Sent folder, or imap_peek_inbox on it, to learn which).", p.DraftUID, p.DraftsFolder)
	}
	return Outcome{Structured: map[string]any{"approval": p}, Text: pendingText(p), Waiting: true}, true
}

func pendingText(p Pending) string {
	return fmt.Sprintf("Waiting for approval: nothing has happened yet.\nApproval page (works once, until %s): %s\n%s\n", p.Expires.UTC().Format(time.RFC1123), p.URL, p.Message)
}

func nothingDone(k access.Approval) string {
	if k == access.ApproveSend {
		return "nothing was sent"
	}
	return "nothing was changed"
}

// callArgs is a call's arguments as an object (what the state's digest
// and a link carry).
func callArgs(raw any) map[string]any {
	if obj, ok := raw.(map[string]any); ok {
		return obj
	}
	return map[string]any{}
}

// describe says in the tool's description when it asks first.
func (ap *Approve[A]) describe(d *Deps) string {
	if !d.Approval.Covers(ap.Kind) || d.Approvals == nil {
		return ""
	}
	what := "A person approves every call before it happens"
	if ap.When != nil {
		what = "A person approves it first"
	}
	return " " + what + " (the operator's APPROVAL policy): a client that can ask its user shows them exactly what will happen; otherwise the result carries `approval` with a link to an approval page: show the person that link and stop."
}

// previewLink shows what an approval link's call will do, decoding its
// arguments as the tool does.
func (t Def[A, R]) previewLink(d *Deps) func(ctx context.Context, creds credentials.Credentials, raw map[string]any) (approval.Preview, error) {
	return func(ctx context.Context, creds credentials.Credentials, raw map[string]any) (approval.Preview, error) {
		a, err := decodeArgs[A](raw)
		if err != nil {
			return approval.Preview{}, err
		}
		return t.Approve.Preview(ctx, &Call{Deps: d, Creds: creds, tool: t.Name, Progress: func(float64, float64, string) {}}, a)
	}
}

// Approver does what approval links stand for, for the approval page: it
// sends a held draft exactly, or makes the call the link carries (with
// the person's yes, so it does not ask again), or drops them.
func Approver(d *Deps, tools []Tool) approval.Executor {
	byName := make(map[string]Tool, len(tools))
	for _, t := range tools {
		byName[t.Def.Name] = t
	}
	return &approver{d: d, tools: byName}
}

type approver struct {
	d     *Deps
	tools map[string]Tool
}

func (x *approver) tool(l approval.Link) (Tool, error) {
	t, ok := x.tools[l.Tool]
	if !ok || t.preview == nil {
		return Tool{}, mailerr.New(mailerr.BadInput, "this gateway does not offer what the link asks for any more")
	}
	return t, nil
}

func (x *approver) Preview(ctx context.Context, l approval.Link) (approval.Preview, error) {
	ctx, cancel := context.WithTimeout(ctx, x.d.callTimeout())
	defer cancel()
	if l.Draft != nil {
		p, err := x.heldDraft(ctx, l)
		if err != nil {
			return approval.Preview{}, err
		}
		return messagePreview("Send this email?", p.Summary()), nil
	}
	t, err := x.tool(l)
	if err != nil {
		return approval.Preview{}, err
	}
	var args map[string]any
	if err := json.Unmarshal(l.Args, &args); err != nil {
		return approval.Preview{}, mailerr.New(mailerr.BadInput, "the link's call cannot be read")
	}
	return t.preview(ctx, l.Creds, args)
}

// heldDraft is the draft a link holds, checked to be the very message
// that was held (not replaced or changed since).
func (x *approver) heldDraft(ctx context.Context, l approval.Link) (*outbox.Planned, error) {
	p, err := x.d.Outbox.PlanDraft(ctx, l.Creds, l.Draft.UID)
	if err != nil {
		return nil, err
	}
	if ref, id := p.Draft(); ref.UIDValidity != l.Draft.UIDValidity || id != l.Draft.MessageID {
		return nil, mailerr.Newf(mailerr.NotFound, "the draft that waited for approval (UID %d) was changed or replaced", l.Draft.UID)
	}
	return p, nil
}

func (x *approver) Approve(ctx context.Context, l approval.Link) (string, error) {
	if l.Draft != nil {
		ctx, cancel := context.WithTimeout(ctx, x.d.callTimeout())
		defer cancel()
		if _, err := x.heldDraft(ctx, l); err != nil {
			return "", err
		}
		key := l.IdempotencyKey
		if key == "" {
			// Sent at most once across replicas, whatever clicks twice.
			key = "approval-" + l.Nonce
		}
		res, err := x.d.Outbox.SendDraft(ctx, l.Creds, outbox.DraftSend{UID: l.Draft.UID, IdempotencyKey: key, MessageID: l.Draft.MessageID})
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(sendText(*res)), nil
	}
	t, err := x.tool(l)
	if err != nil {
		return "", err
	}
	var args map[string]any
	if err := json.Unmarshal(l.Args, &args); err != nil {
		return "", mailerr.New(mailerr.BadInput, "the link's call cannot be read")
	}
	ctx = context.WithValue(credentials.NewContext(ctx, l.Creds), approvedKey{}, true)
	o := t.invoke(ctx, args, nil, nil)
	if o.Failed {
		return "", mailerr.New(o.Kind, o.Text)
	}
	return strings.TrimSpace(o.Text), nil
}

func (x *approver) Reject(ctx context.Context, l approval.Link) (string, error) {
	if l.Draft == nil {
		return "Rejected: nothing was changed.", nil
	}
	ctx, cancel := context.WithTimeout(ctx, x.d.callTimeout())
	defer cancel()
	err := x.d.Outbox.Discard(ctx, l.Creds, mailbox.DraftRef{Folder: l.Draft.Folder, UID: l.Draft.UID, UIDValidity: l.Draft.UIDValidity})
	if err != nil {
		return "", err
	}
	return "Rejected: nothing was sent, and the draft was removed.", nil
}

// messagePreview shows a message to send as the recipients will get it:
// every recipient, the subject, the first lines of the text, each file.
func messagePreview(title string, s outbox.Summary) approval.Preview {
	p := approval.Preview{Title: title}
	if s.Title != "" {
		p.Title = s.Title + "?" // what the message does: a meeting answer
	}
	add := func(name string, v ...string) {
		if len(v) > 0 && strings.Join(v, "") != "" {
			p.Fields = append(p.Fields, approval.Field{Name: name, Value: strings.Join(v, ", ")})
		}
	}
	add("From", s.From)
	add("To", s.To...)
	add("Cc", s.Cc...)
	add("Bcc", s.Bcc...)
	add("Reply-To", s.ReplyTo...)
	add("Subject", s.Subject)
	p.Text = firstLines(s.Text, 25, 3000)
	for _, a := range s.Attachments {
		p.Attachments = append(p.Attachments, approval.File{Name: a.Name, Size: a.Size})
	}
	return p
}

// firstLines is the start of text: at most n lines and max characters.
func firstLines(text string, n, max int) string {
	lines := strings.SplitAfterN(strings.ReplaceAll(text, "\r\n", "\n"), "\n", n+1)
	more := len(lines) > n
	if more {
		lines = lines[:n]
	}
	out := strings.Join(lines, "")
	if r := []rune(out); len(r) > max {
		out, more = string(r[:max]), true
	}
	out = strings.TrimRight(out, "\n")
	if more {
		out += "\n[…]"
	}
	return out
}
