package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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

// Approve is how a tool asks a person first (APPROVAL), and what the
// approval holds to, so that what is done is exactly what they saw:
//   - where the client can show its user a form (MCP elicitation), the
//     call answers input_required with a sealed requestState and goes on
//     when the client retries it with the person's yes;
//   - where the client can open a URL for its user (URL-mode
//     elicitation), it is given the approval page's link, which the model
//     never sees;
//   - elsewhere the result carries the link.
//
// The approval page shows nothing, and takes no answer, but to the person
// signed in as the mailbox (internal/approval). A message to send is held
// as a draft before anyone is asked, in every flow, and that draft, while
// unchanged, is what goes out. A destructive call's preview reads the
// facts it shows (Preview.Facts), the state or link carries them, and Run
// gets them back (Call.Approved) and changes nothing if they changed.
type Approve[A any] struct {
	// Kind is the approval the tool's calls need; When, if set, says which
	// calls need it (a trash only when permanent).
	Kind access.Approval
	When func(A) bool
	// Preview is what the person is shown of a call that is not a send:
	// exactly what will happen, with the facts that Run will hold to.
	Preview func(ctx context.Context, c *Call, a A) (approval.Preview, error)
	// Send, for a tool that sends, composes the message exactly as it
	// would go out; Title is the question above it. The message is held
	// as a draft (Held: it is a draft already, held where it is).
	Send  func(ctx context.Context, c *Call, a A) (*outbox.Planned, error)
	Title string
	Held  bool
	// Key is the call's idempotency key, carried to the send, so that a
	// retried call finds the message sent once.
	Key func(A) string
}

// Input is what a call brings for a tool that asks first: what the
// client can show its user, and its answer to a form.
type Input struct {
	Modes     approval.Modes
	Responses mcp.InputResponses
	State     string
}

// Ask is what a call waits on: a form (Message), or a URL the client
// opens for the person (URL, with ID naming it).
type Ask struct {
	Message string
	State   string
	URL, ID string
}

// askID names the one question in an input_required result.
const askID = "approve"

func (a *Ask) toolResult() *mcp.CallToolResult {
	params := mcp.ElicitationParams{
		Message: a.Message,
		// Nothing to fill in: accept, decline or cancel is the answer.
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
	}
	if a.URL != "" {
		params = mcp.ElicitationParams{Mode: mcp.ElicitationModeURL, Message: a.Message, ElicitationID: a.ID, URL: a.URL}
	}
	return server.NewInputRequestBuilder(a.State).Elicit(askID, params).ToolResult()
}

// mcpInput reads an MCP call's approval input: the client's answer, and
// what it can show its user (the 2026-07-28 request's capabilities, or
// for earlier protocols what its initialize declared, carried by the
// session id the HTTP layer gave it).
func mcpInput(ctx context.Context, req mcp.CallToolRequest) *Input {
	in := &Input{Responses: req.Params.InputResponses, State: req.Params.RequestState}
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		in.Modes = elicitModes(info.ClientCapabilities)
	} else {
		in.Modes = approval.ElicitModes(ctx)
	}
	return in
}

// elicitModes is what caps say the client can show its user (an empty
// elicitation capability means a form, as before modes existed).
func elicitModes(caps *mcp.ClientCapabilities) approval.Modes {
	if caps == nil || caps.Elicitation == nil {
		return approval.Modes{}
	}
	e := caps.Elicitation
	return approval.Modes{Form: e.Form != nil || e.URL == nil, URL: e.URL != nil}
}

// Pending is the result of a call waiting on the approval page.
type Pending struct {
	Status       string    `json:"status" desc:"approval_required"`
	URL          string    `json:"url,omitempty" desc:"the approval page: show this link to the person and stop; it works once, and only for the person who signs in as the mailbox. Absent when the client was given it to open for the person"`
	Expires      time.Time `json:"expires" desc:"when the approval stops being possible"`
	DraftsFolder string    `json:"drafts_folder,omitempty" desc:"a message to send waits in this folder as a draft until the person approves it (it is then sent and filed in Sent) or rejects it (it is then removed)"`
	DraftUID     uint32    `json:"draft_uid,omitempty" desc:"the waiting draft's UID"`
	Message      string    `json:"message" desc:"what to tell the person"`
}

// approvedKey marks a call the approval page makes after the person said
// yes, with the facts they approved: it does not ask again. Unexported,
// so nothing else can set it.
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
// (not covered, or approved: then c.Approved holds the approved facts).
func (t Def[A, R]) approve(ctx context.Context, c *Call, a A, raw any, in *Input) (Outcome, bool) {
	ap := t.Approve
	if !c.policy().Covers(ap.Kind) || (ap.When != nil && !ap.When(a)) || ctx.Value(approvedKey{}) != nil {
		return Outcome{}, false
	}
	obj := callArgs(raw)
	if in != nil && in.State != "" {
		return t.answered(ctx, c, a, obj, in)
	}
	// Nothing is made for credentials the mail server has not accepted:
	// the login the call itself would make (a pooled connection that made
	// it will do). Anonymous callers, and made-up users, get no link and
	// no state, and take no room in the memory that keeps them single-use.
	if err := c.Mailbox.Verify(ctx, c.Creds); err != nil {
		return c.fail(ctx, err), true
	}
	// A mailbox with as many approvals waiting as it may is refused
	// before a draft is held for another.
	if err := c.Approvals.Room(ctx, c.Creds.AccountKey()); err != nil {
		return c.fail(ctx, approvalError(err)), true
	}
	var modes approval.Modes
	if in != nil {
		modes = in.Modes
	}
	if modes.Form {
		return t.askForm(ctx, c, a, obj)
	}
	return t.askOnPage(ctx, c, a, obj, modes.URL)
}

// askForm asks with a form in the client: the person sees the preview
// there, and the state holds what it showed.
func (t Def[A, R]) askForm(ctx context.Context, c *Call, a A, obj map[string]any) (Outcome, bool) {
	pv, b, err := t.previewAndHold(ctx, c, a)
	if err != nil {
		return c.fail(ctx, err), true
	}
	state, err := c.Approvals.NewState(ctx, approval.CallerOf(c.Creds), t.Name, obj, b)
	if err != nil {
		t.release(ctx, c, b)
		return c.fail(ctx, approvalError(err)), true
	}
	return Outcome{Ask: &Ask{Message: pv.Message(), State: state}}, true
}

// previewAndHold previews the call and makes what the approval holds to: a
// message held as a draft, or the preview's facts.
func (t Def[A, R]) previewAndHold(ctx context.Context, c *Call, a A) (approval.Preview, approval.Binding, error) {
	ap := t.Approve
	if ap.Send == nil {
		pv, err := ap.Preview(ctx, c, a)
		return pv, approval.Binding{Facts: pv.Facts}, err
	}
	p, err := ap.Send(ctx, c, a)
	if err != nil {
		return approval.Preview{}, approval.Binding{}, err
	}
	ref, err := t.hold(ctx, c, p)
	if err != nil {
		return approval.Preview{}, approval.Binding{}, err
	}
	return messagePreview(ap.Title, p.Summary()), approval.Binding{Draft: ref}, nil
}

// hold keeps planned p as a draft until the person answers (a draft send
// keeps its own draft).
func (t Def[A, R]) hold(ctx context.Context, c *Call, p *outbox.Planned) (*approval.DraftRef, error) {
	if t.Approve.Held {
		ref, id := p.Draft()
		return &approval.DraftRef{Folder: ref.Folder, UID: ref.UID, UIDValidity: ref.UIDValidity, MessageID: id}, nil
	}
	h, err := c.Outbox.Hold(ctx, c.Creds, p)
	if err != nil {
		return nil, err
	}
	return &approval.DraftRef{Folder: h.Folder, UID: h.UID, UIDValidity: h.UIDValidity, MessageID: h.MessageID}, nil
}

// release removes a draft held for an approval that was not made or was
// refused (never a draft the caller saved: a draft send's own).
func (t Def[A, R]) release(ctx context.Context, c *Call, b approval.Binding) {
	if b.Draft == nil || t.Approve.Held {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.Outbox.Discard(ctx, c.Creds, draftRef(b.Draft)); err != nil {
		c.Log.WarnContext(ctx, "could not remove a held draft", "err", err)
	}
}

// askOnPage makes the approval page's link: in the result for the model
// to show, or, where the client can open URLs for its user (url), given
// to the client alone, with a state for its answer.
func (t Def[A, R]) askOnPage(ctx context.Context, c *Call, a A, obj map[string]any, url bool) (Outcome, bool) {
	link := approval.Link{Creds: c.Creds, Tool: t.Name}
	p := Pending{Status: "approval_required"}
	if t.Approve.Send != nil {
		pl, err := t.Approve.Send(ctx, c, a)
		if err != nil {
			return c.fail(ctx, err), true
		}
		if link.Binding.Draft, err = t.hold(ctx, c, pl); err != nil {
			return c.fail(ctx, err), true
		}
		p.DraftsFolder, p.DraftUID = link.Binding.Draft.Folder, link.Binding.Draft.UID
		if t.Approve.Key != nil {
			link.IdempotencyKey = t.Approve.Key(a)
		}
	} else {
		pv, err := t.Approve.Preview(ctx, c, a)
		if err != nil {
			return c.fail(ctx, err), true
		}
		if link.Args, err = json.Marshal(obj); err != nil {
			return c.fail(ctx, err), true
		}
		link.Binding.Facts = pv.Facts
	}
	m, err := c.Approvals.NewLink(ctx, link, c.ApprovalTTL)
	if err != nil {
		t.release(ctx, c, link.Binding)
		return c.fail(ctx, approvalError(err)), true
	}
	p.URL = strings.TrimRight(download.BaseFrom(ctx), "/") + approval.Prefix + m.Token
	p.Expires = m.Expires
	if url {
		// The client opens the page for the person; its answer tells only
		// whether they went there. The link goes to nobody else.
		state, err := c.Approvals.NewState(ctx, approval.CallerOf(c.Creds), t.Name, obj, approval.Binding{Draft: link.Binding.Draft, Page: m.ID, Expires: m.Expires.Unix()})
		if err != nil {
			c.Approvals.DropLink(context.WithoutCancel(ctx), approval.CallerOf(c.Creds), m.ID, m.Expires)
			t.release(ctx, c, link.Binding)
			return c.fail(ctx, approvalError(err)), true
		}
		return Outcome{Ask: &Ask{Message: "Your agent asks for your approval. Open the approval page, sign in as your mailbox, and see exactly what will happen before you approve or reject it.",
			URL: p.URL, ID: m.ID, State: state}}, true
	}
	p.Message = "A person must approve this before it happens. Show them this link (it opens a page on the mail gateway where they sign in as the mailbox and see exactly what will happen, with Approve and Reject), then stop: do not call the tool again for this, and do not open the link yourself. "
	p.Message += heldNote(p)
	return Outcome{Structured: map[string]any{"approval": p}, Text: pendingText(p), Waiting: true}, true
}

func heldNote(p Pending) string {
	if p.DraftUID == 0 {
		return ""
	}
	return fmt.Sprintf("The message waits as draft UID %d in %s; once approved it is sent and filed in Sent, once rejected it is removed (look at the Sent folder, or imap_peek_inbox on it, to learn which).", p.DraftUID, p.DraftsFolder)
}

// answered takes the client's answer to a form or a URL: with the state
// it was given, for this caller and these exact arguments, once.
func (t Def[A, R]) answered(ctx context.Context, c *Call, a A, obj map[string]any, in *Input) (Outcome, bool) {
	ap := t.Approve
	b, err := c.Approvals.UseState(context.WithoutCancel(ctx), in.State, approval.CallerOf(c.Creds), t.Name, obj)
	if err != nil {
		if kind := mailerr.KindOf(approvalError(err)); kind != mailerr.Internal {
			return c.fail(ctx, approvalError(err)), true
		}
		return c.fail(ctx, mailerr.Wrap(mailerr.Forbidden, err, err.Error())), true
	}
	res := server.ElicitationResponse(in.Responses, askID)
	accepted := res != nil && res.Action == mcp.ElicitationResponseActionAccept
	action := "did not answer"
	if res != nil && res.Action == mcp.ElicitationResponseActionDecline {
		action = "declined"
	} else if res != nil && !accepted {
		action = "cancelled"
	}
	switch {
	case b.Page != "":
		if !accepted {
			// They would not open the page: the link is done with.
			c.Approvals.DropLink(context.WithoutCancel(ctx), approval.CallerOf(c.Creds), b.Page, time.Unix(b.Expires, 0))
			t.release(ctx, c, b)
			return c.fail(ctx, mailerr.Newf(mailerr.Forbidden, "the person %s to open the approval page: %s", action, nothingDone(ap.Kind))), true
		}
		p := Pending{Status: "approval_required", Expires: time.Unix(b.Expires, 0)}
		if b.Draft != nil {
			p.DraftsFolder, p.DraftUID = b.Draft.Folder, b.Draft.UID
		}
		p.Message = "The approval page was opened for the person: what they decide there is done there, and nothing more happens through this call. Do not call the tool again for this. " + heldNote(p)
		return Outcome{Structured: map[string]any{"approval": p}, Text: "Waiting for the person's answer on the approval page.\n" + p.Message + "\n", Waiting: true}, true
	case !accepted:
		t.release(ctx, c, b)
		return c.fail(ctx, mailerr.Newf(mailerr.Forbidden, "the person %s: %s", action, nothingDone(ap.Kind))), true
	case b.Draft != nil:
		key := ""
		if ap.Key != nil {
			key = ap.Key(a)
		}
		r, err := sendHeld(ctx, c.Deps, c.Creds, b.Draft, key)
		if err != nil {
			return c.fail(ctx, err), true
		}
		return Outcome{Structured: *r, Text: sendText(*r)}, true
	}
	c.Approved = b.Facts
	return Outcome{}, false
}

// approvedFacts decodes the facts a person approved (c.Approved) into a
// T: nil when the call needed no approval.
func approvedFacts[T any](c *Call) (*T, error) {
	if len(c.Approved) == 0 {
		return nil, nil
	}
	var f T
	if err := json.Unmarshal(c.Approved, &f); err != nil {
		return nil, mailerr.New(mailerr.BadInput, "the approval does not say what the person was shown: nothing was done; ask again")
	}
	return &f, nil
}

// factsOf is facts as a Preview carries them.
func factsOf(facts any) json.RawMessage {
	b, _ := json.Marshal(facts)
	return b
}

// sendHeld sends a held draft exactly as it was approved: while it is the
// very message that was held (same folder, UIDVALIDITY and Message-ID),
// at most once across replicas (with key, or one named after the held
// message), whatever clicks or retries twice.
func sendHeld(ctx context.Context, d *Deps, creds credentials.Credentials, ref *approval.DraftRef, key string) (*outbox.Result, error) {
	if _, err := heldPlan(ctx, d, creds, ref); err != nil {
		return nil, err
	}
	if key == "" {
		sum := sha256.Sum256([]byte(ref.MessageID))
		key = "approval-" + hex.EncodeToString(sum[:16])
	}
	return d.Outbox.SendDraft(ctx, creds, outbox.DraftSend{UID: ref.UID, IdempotencyKey: key, MessageID: ref.MessageID})
}

// heldPlan reads a held draft as it would be sent, while it is the very
// message that was held (same UIDVALIDITY and Message-ID).
func heldPlan(ctx context.Context, d *Deps, creds credentials.Credentials, ref *approval.DraftRef) (*outbox.Planned, error) {
	p, err := d.Outbox.PlanDraft(ctx, creds, ref.UID)
	if err != nil {
		return nil, err
	}
	if got, id := p.Draft(); got.UIDValidity != ref.UIDValidity || id != ref.MessageID {
		return nil, mailerr.Newf(mailerr.NotFound, "the draft that waited for approval (UID %d) was changed or replaced: nothing was sent", ref.UID)
	}
	return p, nil
}

func draftRef(r *approval.DraftRef) mailbox.DraftRef {
	return mailbox.DraftRef{Folder: r.Folder, UID: r.UID, UIDValidity: r.UIDValidity}
}

// approvalError is a refusal of the approval memory as a sentence.
func approvalError(err error) error {
	var pending *approval.PendingError
	var later *approval.UnavailableError
	switch {
	case errors.As(err, &pending):
		return mailerr.Wrap(mailerr.RateLimited, err, err.Error())
	case errors.As(err, &later):
		// Nothing was made or used: the memory that keeps approvals
		// single-use is full or does not answer (503 over REST).
		return mailerr.Wrap(mailerr.Busy, err, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return mailerr.Wrap(mailerr.Timeout, err, "the call ended before its approval was recorded; nothing was done")
	}
	return err
}

func pendingText(p Pending) string {
	return fmt.Sprintf("Waiting for approval: nothing has happened yet.\nApproval page (for the person only; works once, until %s): %s\n%s\n", p.Expires.UTC().Format(time.RFC1123), p.URL, p.Message)
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
	return " " + what + " (the operator's APPROVAL policy): a client that can ask its user shows them exactly what will happen; otherwise the result carries `approval` with a link to an approval page, where only the person who signs in as the mailbox can see and answer it: show the person that link and stop."
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
// the person's yes and the facts they saw, so it does not ask again and
// changes nothing if they changed), or drops them.
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
	if !ok || (t.preview == nil && t.sendTitle == "") {
		return Tool{}, mailerr.New(mailerr.BadInput, "this gateway does not offer what the link asks for any more")
	}
	return t, nil
}

func (x *approver) Preview(ctx context.Context, l approval.Link) (approval.Preview, error) {
	ctx, cancel := context.WithTimeout(ctx, x.d.callTimeout())
	defer cancel()
	t, err := x.tool(l)
	if err != nil {
		return approval.Preview{}, err
	}
	if l.Binding.Draft != nil {
		p, err := heldPlan(ctx, x.d, l.Creds, l.Binding.Draft)
		if err != nil {
			return approval.Preview{}, err
		}
		return messagePreview(t.sendTitle, p.Summary()), nil
	}
	if t.preview == nil {
		return approval.Preview{}, mailerr.New(mailerr.BadInput, "this approval link holds no message to send")
	}
	var args map[string]any
	if err := json.Unmarshal(l.Args, &args); err != nil {
		return approval.Preview{}, mailerr.New(mailerr.BadInput, "the link's call cannot be read")
	}
	pv, err := t.preview(ctx, l.Creds, args)
	if err != nil {
		return approval.Preview{}, err
	}
	if !sameFacts(pv.Facts, l.Binding.Facts) {
		return approval.Preview{}, mailerr.New(mailerr.BadInput, "what it would change is not what the agent asked about any more (the folder or its messages changed since); nothing was done, and the agent must ask again")
	}
	return pv, nil
}

// sameFacts compares two facts as JSON values.
func sameFacts(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return false
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

func (x *approver) Approve(ctx context.Context, l approval.Link) (string, error) {
	t, err := x.tool(l)
	if err != nil {
		return "", err
	}
	if l.Binding.Draft != nil {
		ctx, cancel := context.WithTimeout(ctx, x.d.callTimeout())
		defer cancel()
		res, err := sendHeld(ctx, x.d, l.Creds, l.Binding.Draft, l.IdempotencyKey)
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(sendText(*res)), nil
	}
	if len(l.Binding.Facts) == 0 {
		return "", mailerr.New(mailerr.BadInput, "this approval link does not say what the person was shown (it was made by an older gateway): nothing was done; ask again")
	}
	var args map[string]any
	if err := json.Unmarshal(l.Args, &args); err != nil {
		return "", mailerr.New(mailerr.BadInput, "the link's call cannot be read")
	}
	ctx = context.WithValue(credentials.NewContext(ctx, l.Creds), approvedKey{}, l.Binding.Facts)
	o := t.invoke(ctx, args, nil, nil)
	if o.Failed {
		return "", mailerr.New(o.Kind, o.Text)
	}
	return strings.TrimSpace(o.Text), nil
}

func (x *approver) Reject(ctx context.Context, l approval.Link) (string, error) {
	if l.Binding.Draft == nil {
		return "Rejected: nothing was changed.", nil
	}
	t, err := x.tool(l)
	if err != nil {
		return "", err
	}
	if t.heldInPlace {
		return "Rejected: nothing was sent; the draft stays in " + l.Binding.Draft.Folder + ".", nil
	}
	ctx, cancel := context.WithTimeout(ctx, x.d.callTimeout())
	defer cancel()
	if err := x.d.Outbox.Discard(ctx, l.Creds, draftRef(l.Binding.Draft)); err != nil {
		return "", err
	}
	return "Rejected: nothing was sent, and the draft was removed.", nil
}

// messagePreview shows a message to send as the recipients will get it:
// every recipient, the subject, the text, the HTML version as their mail
// program shows it (when it says anything the text does not), each file.
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
	p.Text = firstLines(s.Text, previewLines, previewChars)
	switch {
	case s.HTML == "":
	case s.Text == "":
		p.HTML, p.HTMLOnly = firstLines(s.HTML, previewLines, previewChars), true
	case sameWords(s.Text, s.HTML):
		// Both versions say the same: shown once.
	default:
		p.HTML = firstLines(s.HTML, previewLines, previewChars)
	}
	for _, a := range s.Attachments {
		p.Attachments = append(p.Attachments, approval.File{Name: a.Name, Size: a.Size})
	}
	return p
}

// How much of a message's text a preview shows: all of nearly every
// message; a longer one is cut with a mark that says so.
const (
	previewLines = 400
	previewChars = 40_000
)

// sameWords reports whether two texts say the same words in the same
// order (spacing, line breaks and the converter's link notes aside).
func sameWords(a, b string) bool {
	return strings.Join(strings.Fields(a), " ") == strings.Join(strings.Fields(b), " ")
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
