// Package tools defines the MCP tools. A tool is data: a Def with its
// argument type, result type, annotations, Run and Text, in a file of its
// own, listed once in the catalog. One generic adapter does, for every
// tool, what they all need: decode and check the arguments (plain
// sentences, unknown names refused), resolve credentials (token argument,
// token header, user/password headers), rate-limit, bound the whole call
// with one deadline, map errors to what the caller may see, and return
// structured content with a text fallback. This is the only package that
// names tools or tells the model what to call next; it never speaks IMAP
// or SMTP (it calls mailbox and outbox) and never imports go-imap or
// go-smtp.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/agents"
	"github.com/mailbox-mcp/mailbox-mcp/internal/approval"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/metrics"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/reqlog"
	"github.com/mailbox-mcp/mailbox-mcp/internal/unsubscribe"
)

// DefaultCallTimeout bounds one whole tool call when Deps.CallTimeout is 0.
const DefaultCallTimeout = 60 * time.Second

// Deps is what the tools need from the rest of the gateway.
type Deps struct {
	Sealer  *credentials.Sealer
	Mailbox *mailbox.Client
	// Agents runs the agent_ tools (nil: AGENTS=off, they are not listed).
	Agents *agents.Service
	// Outbox saves drafts and sends mail; without an SMTP server
	// (Outbox.CanSend false, or nil) the sending tools are not listed.
	Outbox *outbox.Outbox
	// Guard is the per-user rate limit (nil: none). The login back-off
	// lives where logins happen.
	Guard *guard.Guard
	Log   *slog.Logger
	// CallTimeout bounds one whole tool call: waiting for a connection,
	// dial, login, every command, SMTP and the Sent copy (TOOL_TIMEOUT).
	CallTimeout time.Duration
	// MaxRequestBytes is the HTTP body limit, stated in the descriptions of
	// tools that take attachments.
	MaxRequestBytes int64
	// Access is the operator's level (MAILBOX_ACCESS); 0 means read.
	Access access.Level
	// MaxInlineAttachment is the largest attachment returned inside a
	// result or a resource (MAX_ATTACHMENT_BYTES); larger ones come as a
	// download link. 0 means the default, 5 MiB.
	MaxInlineAttachment int64
	// Metrics counts calls by tool and outcome and times them (nil: none).
	Metrics *metrics.Metrics
	// Approval is what a person must approve first (APPROVAL); a token
	// can add to it. Approvals seals and checks the states and links that
	// carry a call while it waits (nil: approval is off, whatever the
	// policy says). ApprovalTTL is an approval link's lifetime.
	Approval    access.Approval
	Approvals   *approval.Approvals
	ApprovalTTL time.Duration
	// Unsubscribe makes mail_unsubscribe's one-click POSTs (nil: a
	// Poster with the defaults: public addresses only).
	Unsubscribe *unsubscribe.Poster
	// Hosts, when set, lets imap_encrypt_credentials name a mail host
	// (MAIL_HOSTS); nil: only the gateway's own.
	Hosts Hosts
}

// Hosts is what the tools ask of the served mail hosts (internal/hosts).
type Hosts interface {
	// Check says whether a caller may name host; its errors are mailerr
	// errors, one sentence for every refusal.
	Check(ctx context.Context, host string) error
	// Canonical is host as every per-account key names it ("" for the
	// gateway's own, however it is spelt).
	Canonical(host string) string
}

// operatorLevel is the most any caller may do here.
func (d *Deps) operatorLevel() access.Level {
	if d.Access == 0 {
		return access.Read
	}
	return d.Access
}

func (d *Deps) callTimeout() time.Duration {
	if d.CallTimeout > 0 {
		return d.CallTimeout
	}
	return DefaultCallTimeout
}

// Def is one tool: what the model is told about it, and what it does. A
// tool file holds its argument type A, its result type R, one Def and the
// Run and Text functions; everything else (decoding and checking the
// arguments, credentials, rate limit, deadline, errors, logging, the
// result's two forms) is done once for all tools by the adapter below.
type Def[A, R any] struct {
	Name, Title string
	// Description is what the model reads; Describe, when set, makes it
	// from the configuration (for limits it states).
	Description string
	Describe    func(d *Deps) string
	// The four MCP annotations, all stated explicitly (mcp-go's defaults
	// would call every tool destructive).
	ReadOnly, Destructive, Idempotent, OpenWorld bool
	// Access is the level the tool needs (0: read). A tool whose need
	// depends on its arguments states the lower level here and calls
	// Call.Require for the rest.
	Access access.Level
	// Sends marks a tool that needs SMTP: listed only when sending is on.
	Sends bool
	// Agents marks an agent_ tool: listed only when AGENTS is on.
	Agents bool
	// OwnCredentials marks a tool that resolves credentials itself
	// (imap_encrypt_credentials): the adapter neither requires them nor
	// adds the credentials argument.
	OwnCredentials bool
	// Run does the work. A *mailerr.Error's message reaches the caller;
	// any other error is logged and answered with a generic sentence.
	Run func(ctx context.Context, c *Call, args A) (R, error)
	// Text renders the result for clients that read only text.
	Text func(R) string
	// Content, when set, adds content blocks after the text (an embedded
	// resource, a resource link) for MCP clients.
	Content func(R) []mcp.Content
	// Example is the arguments of the example call in docs/tools.md, made
	// for real against the demo mailbox (a "uid" is replaced by the UID of
	// the demo message the docs use).
	Example map[string]any
	// Timeout, when set, is the call's deadline instead of TOOL_TIMEOUT
	// (a long poll waits longer than any other call); TimeoutName is how
	// an answer names it when it runs out (e.g. "timeout_s plus 10 s").
	Timeout     func(d *Deps, args A) time.Duration
	TimeoutName string
	// Approve, when set, makes the tool ask a person first under the
	// APPROVAL policy (approve.go).
	Approve *Approve[A]
}

// Call is what Run gets besides its arguments: the dependencies and the
// caller's credentials (zero for a tool with OwnCredentials).
type Call struct {
	*Deps
	Creds credentials.Credentials
	// Progress reports that a long call is still under way; it does
	// nothing when the client did not ask.
	Progress ProgressFunc
	// Limit is the call's deadline, counted from its start.
	Limit time.Duration
	// Approved, in a call a person approved, holds the facts they were
	// shown (approval.Preview.Facts): Run changes nothing unless they
	// still hold. Nil in a call that needed no approval.
	Approved json.RawMessage
	tool     string
}

// Agent is the caller's agent name (the x-mailbox-agent header, ?agent= on
// the MCP URL, or the one sealed in the token), "" when it has none, and
// an error when the name given is not one.
func (c *Call) Agent() (string, error) {
	name := c.Creds.Agent
	if name == "" {
		return "", nil
	}
	if err := agents.CheckName(name); err != nil {
		return "", mailerr.New(mailerr.BadInput, "the caller's agent name (x-mailbox-agent header, ?agent= on the MCP URL, or the token's) is not valid: "+mailerr.Message(err))
	}
	return name, nil
}

// Require refuses the call unless the caller may make changes of level:
// for a tool whose need depends on an argument (what names it).
func (c *Call) Require(level access.Level, what string) error {
	return c.allows(c.tool+" with "+what, level, false, c.Creds.Scope)
}

// allows checks a need against the operator's level and the caller's token
// scope, with a sentence that names the level needed and who set the limit.
func (d *Deps) allows(what string, need access.Level, sends bool, scope access.Scope) error {
	if need == 0 {
		need = access.Read
	}
	operator := d.operatorLevel()
	switch {
	case need > operator:
		return mailerr.New(mailerr.Forbidden, fmt.Sprintf("%s needs the %s access level, and this gateway allows %s (the operator sets MAILBOX_ACCESS); nothing was changed", what, need, operator))
	case need > scope.Effective(operator):
		return mailerr.New(mailerr.Forbidden, fmt.Sprintf("%s needs the %s access level, and the credentials token or sign-in allows %s; nothing was changed", what, need, scope.Level)).About(mailerr.SubjectScope)
	case sends && scope.NoSend:
		return mailerr.New(mailerr.Forbidden, what+" sends mail, and the credentials token or sign-in does not allow sending; nothing was sent").About(mailerr.SubjectScope)
	}
	return nil
}

// visible reports whether a caller with scope may call the tool, for
// tools/list.
func (t Tool) visible(d *Deps, scope access.Scope) bool {
	return t.own || d.allows(t.Def.Name, t.Access, t.Sends, scope) == nil
}

// Tool is a Def bound to its dependencies: the MCP definition and handler.
type Tool struct {
	Def     mcp.Tool
	Handler server.ToolHandlerFunc
	Access  access.Level
	Sends   bool
	Example map[string]any
	own     bool
	invoke  func(ctx context.Context, raw any, progress ProgressFunc, in *Input) Outcome
	// preview shows what an approval link's call will do (nil: the tool
	// never asks, or sends: its link holds the message as a draft, which
	// the page shows under sendTitle; heldInPlace: that draft is the
	// caller's own, and a rejection leaves it).
	preview     func(ctx context.Context, creds credentials.Credentials, raw map[string]any) (approval.Preview, error)
	sendTitle   string
	heldInPlace bool
}

// definition is what the catalog holds: a Def of any argument and result
// type.
type definition interface {
	enabled(d *Deps) bool
	bind(d *Deps) Tool
}

func (t Def[A, R]) enabled(d *Deps) bool {
	return (!t.Sends || d.Outbox.CanSend()) && (!t.Agents || d.Agents != nil)
}

func (t Def[A, R]) bind(d *Deps) Tool {
	invoke := func(ctx context.Context, raw any, progress ProgressFunc, in *Input) Outcome {
		return t.invoke(ctx, d, raw, progress, in)
	}
	tool := Tool{Def: t.spec(d), Access: t.Access, Example: t.Example, Sends: t.Sends, own: t.OwnCredentials, invoke: invoke,
		Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			o := invoke(ctx, req.Params.Arguments, mcpProgress(ctx, req), mcpInput(ctx, req))
			switch {
			case o.Failed:
				return mcp.NewToolResultError(o.Text), nil
			case o.Ask != nil:
				return o.Ask.toolResult(), nil
			}
			res := mcp.NewToolResultStructured(o.Structured, o.Text)
			res.Content = append(res.Content, o.Content...)
			return res, nil
		}}
	if ap := t.Approve; ap != nil {
		if ap.Send != nil {
			tool.sendTitle, tool.heldInPlace = ap.Title, ap.Held
		} else {
			tool.preview = t.previewLink(d)
		}
	}
	return tool
}

// Outcome is one call's result as the adapter made it, for any front end
// (MCP, the REST mirror): the structured result and its text, or the
// failure's kind and sentence.
type Outcome struct {
	Structured any
	Text       string
	// Content is the extra MCP content blocks (Def.Content).
	Content []mcp.Content
	Failed  bool
	Kind    mailerr.Kind
	// Ask, when set, is the form the client must show its user before the
	// call can go on (an MCP input_required result).
	Ask *Ask
	// Waiting says the call waits on the approval page (Structured holds
	// the Pending under "approval"): nothing has happened yet.
	Waiting bool
}

// outcome is the call's outcome for metrics: "ok" or the error kind.
func (o Outcome) outcome() string {
	if o.Failed {
		return o.Kind.String()
	}
	return "ok"
}

// Invoke calls the tool with raw arguments (a JSON object as decoded by
// encoding/json) through the same adapter as MCP. progress may be nil.
func (t Tool) Invoke(ctx context.Context, raw any, progress ProgressFunc) Outcome {
	return t.invoke(ctx, raw, progress, nil)
}

// ProgressFunc reports that a long call is still under way (MCP progress
// notifications); done and total are in the tool's own units.
type ProgressFunc func(done, total float64, message string)

// mcpProgress sends MCP progress notifications when the client asked for
// them with a progress token; otherwise it does nothing.
func mcpProgress(ctx context.Context, req mcp.CallToolRequest) ProgressFunc {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return nil
	}
	token := req.Params.Meta.ProgressToken
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return nil
	}
	return func(done, total float64, message string) {
		params := map[string]any{"progressToken": token, "progress": done}
		if total > 0 {
			params["total"] = total
		}
		if message != "" {
			params["message"] = message
		}
		_ = srv.SendNotificationToClient(ctx, "notifications/progress", params)
	}
}

// credentialsDescription is the credentials argument every mailbox tool
// takes.
const credentialsDescription = "Optional credentials token from imap_encrypt_credentials. Without it, the token in the x-mailbox-token header, or else the x-imap-user and x-imap-pass headers, are used."

func (t Def[A, R]) spec(d *Deps) mcp.Tool {
	in := schemaOf(reflect.TypeFor[A](), true)
	if !t.OwnCredentials {
		in.Properties["credentials"] = &schema{Type: "string", Description: credentialsDescription, MaxLength: intPtr(ptr(8192.0))}
		in.order = append(in.order, "credentials")
	}
	out := schemaOf(reflect.TypeFor[R](), false)
	desc := t.Description
	if t.Describe != nil {
		desc = t.Describe(d)
	}
	if t.Approve != nil {
		// The result is either R, or only "approval" while a person has
		// not answered yet.
		out.Required = nil
		out.Properties["approval"] = schemaOf(reflect.TypeFor[Pending](), false)
		out.Properties["approval"].Description = "present instead of the other fields when the call waits for a person's approval on the approval page"
		out.order = append(out.order, "approval")
		desc += t.Approve.describe(d)
	}
	tool := mcp.NewTool(t.Name, mcp.WithDescription(desc), mcp.WithToolAnnotation(mcp.ToolAnnotation{
		Title: t.Title, ReadOnlyHint: ptr(t.ReadOnly), DestructiveHint: ptr(t.Destructive),
		IdempotentHint: ptr(t.Idempotent), OpenWorldHint: ptr(t.OpenWorld),
	}))
	tool.Title = t.Title
	tool.InputSchema = mcp.ToolInputSchema{} // mcp-go refuses a tool with both
	tool.RawInputSchema = in.raw()
	tool.RawOutputSchema = out.raw()
	return tool
}

func ptr[T any](v T) *T { return &v }

// limitKey carries a call's deadline (a callLimit), for the sentence
// saying it passed.
type limitKey struct{}

// callLimit is a call's deadline and what sets it.
type callLimit struct {
	d    time.Duration
	name string // "TOOL_TIMEOUT", or the tool's own (Def.TimeoutName)
}

// errCallTimeout is the cause of a call's context when TOOL_TIMEOUT ends
// it, to tell that apart from the mail layers' own per-operation timeouts.
var errCallTimeout = errors.New("tool call timeout")

// invoke is the one handler of every tool.
func (t Def[A, R]) invoke(ctx context.Context, d *Deps, raw any, progress ProgressFunc, in *Input) (out Outcome) {
	rec := reqlog.FromContext(ctx)
	rec.SetTool(t.Name)
	// Runs last, after the panic recovery below has set out.
	defer func(start time.Time) { d.Metrics.ToolCall(t.Name, out.outcome(), time.Since(start)) }(time.Now())
	// One bad message must never take the gateway down; the stack goes to
	// the log, the caller gets a sentence.
	defer func() {
		if v := recover(); v != nil {
			d.Log.ErrorContext(ctx, "panic in tool", "tool", t.Name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			rec.SetOutcome("panic")
			out = Outcome{Failed: true, Kind: mailerr.Internal, Text: mailerr.Message(errors.New("panic"))}
		}
	}()
	token, raw, err := t.takeToken(raw)
	if err != nil {
		return d.fail(ctx, err)
	}
	var creds credentials.Credentials
	if !t.OwnCredentials {
		// Who is calling and what they may do come first: a call beyond
		// the caller's level is refused as such, whatever its arguments.
		if creds, err = d.credentialsFor(ctx, token); err != nil {
			return d.fail(ctx, err)
		}
		if err := d.allows(t.Name, t.Access, t.Sends, creds.Scope); err != nil {
			return d.fail(ctx, err)
		}
	}
	args, err := decodeArgs[A](raw)
	if err != nil {
		return d.fail(ctx, err)
	}
	limit, limitName := d.callTimeout(), "TOOL_TIMEOUT"
	if t.Timeout != nil {
		limit, limitName = t.Timeout(d, args), t.TimeoutName
	}
	ctx, cancel := context.WithTimeoutCause(context.WithValue(ctx, limitKey{}, callLimit{limit, limitName}), limit, errCallTimeout)
	defer cancel()
	call := &Call{Deps: d, Creds: creds, Progress: progress, Limit: limit, tool: t.Name}
	if facts, ok := ctx.Value(approvedKey{}).(json.RawMessage); ok {
		call.Approved = facts
	}
	if call.Progress == nil {
		call.Progress = func(float64, float64, string) {}
	}
	if t.Approve != nil {
		// A person approves first, when the policy asks: the call stops
		// here with a form for the client or a link, and goes on only
		// with their yes.
		if o, stop := t.approve(ctx, call, args, raw, in); stop {
			return o
		}
	}
	r, err := t.Run(ctx, call, args)
	if err != nil {
		return d.fail(ctx, err)
	}
	if d.Agents != nil && creds.Agent != "" {
		// The directory's "last activity" of the caller's agent (written
		// at most once a minute; after a successful call, so only a
		// real login leaves a trace).
		d.Agents.Touch(ctx, creds, creds.Agent)
	}
	rec.SetOutcome("ok")
	out = Outcome{Structured: r, Text: t.Text(r)}
	if t.Content != nil {
		out.Content = t.Content(r)
	}
	return out
}

// takeToken removes the credentials argument, which the adapter handles,
// from the arguments of a mailbox tool.
func (t Def[A, R]) takeToken(raw any) (string, any, error) {
	obj, ok := raw.(map[string]any)
	if t.OwnCredentials || !ok {
		return "", raw, nil
	}
	v, present := obj["credentials"]
	if !present {
		return "", raw, nil
	}
	rest := make(map[string]any, len(obj)-1)
	for k, x := range obj {
		if k != "credentials" {
			rest[k] = x
		}
	}
	switch tok := v.(type) {
	case nil:
		return "", rest, nil
	case string:
		return tok, rest, nil
	}
	return "", nil, badArg("credentials must be a string: the token from imap_encrypt_credentials (got %s)", describeValue(v))
}

// credentialsFor resolves the caller's mailbox credentials: the token
// argument wins, then the x-mailbox-token header, then the x-imap-user and
// x-imap-pass headers. A bad token is an error even when headers are
// present, so a mistake never silently acts on another mailbox. The
// per-user rate limit applies to whoever it is.
func (d *Deps) credentialsFor(ctx context.Context, token string) (credentials.Credentials, error) {
	var creds credentials.Credentials
	if strings.TrimSpace(token) == "" {
		token, _ = credentials.TokenFromContext(ctx)
	}
	switch c, ok := credentials.FromContext(ctx); {
	case strings.TrimSpace(token) != "":
		var err error
		if creds, err = d.Sealer.Open(token); err != nil {
			return creds, mailerr.Wrap(mailerr.BadInput, err, err.Error()).About(mailerr.SubjectToken)
		}
	case ok:
		creds = c
	default:
		return creds, mailerr.New(mailerr.NoCredentials,
			"no mailbox credentials: send the x-imap-user and x-imap-pass headers (or a token from imap_encrypt_credentials in the x-mailbox-token header), or pass the token as the credentials argument")
	}
	if err := joinAgent(ctx, &creds); err != nil {
		return creds, err
	}
	return creds, d.admit(ctx, creds)
}

// joinAgent sets creds.Agent from the request (x-mailbox-agent or
// ?agent=, checked by the HTTP layer). A token made for an agent binds it:
// the request may repeat that name, never name another, so a token handed
// to one agent cannot act as a second.
func joinAgent(ctx context.Context, creds *credentials.Credentials) error {
	named, ok := credentials.AgentFromContext(ctx)
	switch {
	case !ok:
	case creds.Agent == "":
		creds.Agent = named
	case creds.Agent != named:
		return mailerr.New(mailerr.BadInput, "the credentials token was made for agent "+creds.Agent+
			", and the request names another (x-mailbox-agent header or ?agent=): a token made for an agent acts only as that agent; drop the header, or use a token made for that agent").About(mailerr.SubjectToken)
	}
	return nil
}

// admit records the caller and applies the per-user rate limit.
func (d *Deps) admit(ctx context.Context, creds credentials.Credentials) error {
	reqlog.FromContext(ctx).SetUser(creds.User)
	return d.Guard.AllowCall(ctx, creds.AccountKey())
}

// fail turns an error into the tool result the caller sees, and records
// the outcome (and for connection failures their class) for the request's
// log line. Unclassified errors get generic text: the cause goes to the
// log only.
func (d *Deps) fail(ctx context.Context, err error) Outcome {
	kind := mailerr.KindOf(err)
	rec := reqlog.FromContext(ctx)
	rec.SetOutcome(kind.String())
	rec.SetCause(mailerr.Cause(err))
	switch kind {
	case mailerr.Internal:
		d.Log.ErrorContext(ctx, "tool failed", "err", err)
	case mailerr.Busy, mailerr.Timeout, mailerr.Unavailable, mailerr.Temporary:
		d.Log.DebugContext(ctx, "tool error", "kind", kind.String(), "err", err)
	default:
		// The caller's own mistakes and the server's refusals: the
		// sentence (which the caller has) may quote the arguments, a
		// folder name, a subject or mail text, none of which belongs in
		// the log.
		d.Log.DebugContext(ctx, "tool error", "kind", kind.String())
	}
	return Outcome{Failed: true, Kind: kind, Text: d.advise(ctx, err)}
}

// advise is the sentence for err: the mail layers' facts, the call's own
// deadline named when it was what ran out, and what to do next where a
// tool helps.
func (d *Deps) advise(ctx context.Context, err error) string {
	msg := mailerr.Message(err)
	kind := mailerr.KindOf(err)
	if (kind == mailerr.Timeout || kind == mailerr.Busy) && errors.Is(context.Cause(ctx), errCallTimeout) {
		limit, ok := ctx.Value(limitKey{}).(callLimit)
		if !ok {
			limit = callLimit{d.callTimeout(), "TOOL_TIMEOUT"}
		}
		if limit.name == "TOOL_TIMEOUT" {
			msg = fmt.Sprintf("the call did not finish within the gateway's limit of %s for one call (TOOL_TIMEOUT)", limit.d)
		} else {
			msg = fmt.Sprintf("the call did not finish within its limit of %s (%s)", limit.d, limit.name)
		}
		if step := mailerr.StepOf(err); step != "" {
			msg += "; it ran out while " + step
		}
		// The first clause said the same ("did not answer in time while
		// ..."); what the layers added after it (whether a message went
		// out, where its copy is) is kept.
		if _, rest, ok := strings.Cut(mailerr.Message(err), "; "); ok {
			msg += "; " + rest
		}
		return msg
	}
	// The one place that advises trying again: never where the message may
	// have gone out (a retry could deliver it twice; the layer below says
	// what is safe), nor where the sentence already says when to retry.
	if !strings.Contains(msg, "may have been sent") && !advisesRetry(msg) {
		switch kind {
		case mailerr.Unavailable, mailerr.Busy, mailerr.Temporary:
			msg += "; try again later"
		case mailerr.Timeout:
			msg += "; try again"
		}
	}
	switch mailerr.SubjectOf(err) {
	case mailerr.SubjectFolder:
		msg += "; call imap_list_folders to see the folders"
	case mailerr.SubjectMessage:
		msg += "; list the folder again with imap_list_emails or imap_search_emails"
	case mailerr.SubjectToken:
		msg += "; make a new token with imap_encrypt_credentials"
	case mailerr.SubjectCursor:
		msg += "; start again without a cursor"
	case mailerr.SubjectScope:
		msg += "; imap_encrypt_credentials with the user and password makes a token with a wider scope, up to what the operator allows (a sign-in is widened by signing in again)"
	}
	return msg
}

// advisesRetry says whether a sentence from below already says when to
// try again ("retry in a few seconds", "try again shortly", "call again
// with the same idempotency_key").
func advisesRetry(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "try again") || strings.Contains(m, "retry") || strings.Contains(m, "call again")
}

// catalog is every tool the gateway has, in the order tools/list shows
// them. Adding a tool is one file and one line here.
var catalog = []definition{
	encryptCredentials,
	listFolders,
	listEmails,
	searchEmails,
	readEmail,
	getAttachment,
	getThread,
	peekInbox,
	waitForEmail,
	checkInbox,
	setFlags,
	moveEmails,
	trashEmails,
	createFolder,
	renameFolder,
	deleteFolder,
	sendEmail,
	replyEmail,
	respondInvite,
	forwardEmail,
	saveDraft,
	sendDraft,
	mailUnsubscribe,
	agentSend,
	agentList,
	agentSetStatus,
	agentCreateConversation,
	agentListConversations,
	agentLeaveConversation,
	agentHistory,
	agentSetState,
	agentGetState,
	agentPrune,
}

// All returns every tool the configuration enables, in catalog order.
func All(d *Deps) []Tool {
	var out []Tool
	for _, def := range catalog {
		if def.enabled(d) {
			out = append(out, def.bind(d))
		}
	}
	return out
}

// Offered is the part of tools the operator's level allows: what the REST
// mirror documents. (MCP registers every tool, so that a call above the
// level is refused with a sentence naming it, and ListFilter hides them.)
func Offered(d *Deps, tools []Tool) []Tool {
	var out []Tool
	for _, t := range tools {
		if t.visible(d, access.Scope{}) {
			out = append(out, t)
		}
	}
	return out
}

// ListFilter is the hook that shows a request only the tools it may call:
// those within the operator's level and the scope of the token in the
// x-mailbox-token header or of the sign-in (a token passed as an argument
// is seen only by the call it is passed to). An unreadable header token shows the
// operator's list: its calls fail with the token's own error.
func ListFilter(d *Deps, tools []Tool) server.OnAfterListToolsFunc {
	byName := make(map[string]Tool, len(tools))
	for _, t := range tools {
		byName[t.Def.Name] = t
	}
	return func(ctx context.Context, _ any, _ *mcp.ListToolsRequest, result *mcp.ListToolsResult) {
		var scope access.Scope
		if tok, ok := credentials.TokenFromContext(ctx); ok {
			if c, err := d.Sealer.Open(tok); err == nil {
				scope = c.Scope
			}
		} else if c, ok := credentials.FromContext(ctx); ok {
			scope = c.Scope // a sign-in's (bearer) scope; zero for headers
		}
		kept := result.Tools[:0]
		for _, spec := range result.Tools {
			if t, ok := byName[spec.Name]; !ok || t.visible(d, scope) {
				kept = append(kept, spec)
			}
		}
		result.Tools = kept
	}
}

var toolName = regexp.MustCompile(`^[a-z]+(_[a-z]+)+$`)

// Register adds tools to s after checking each one's contract: a name of
// the form area_verb, a description, all four annotations set and
// consistent, a described input schema and an output schema.
func Register(s *server.MCPServer, tools []Tool) error {
	for _, t := range tools {
		if err := checkContract(t.Def); err != nil {
			return err
		}
		s.AddTool(t.Def, t.Handler)
	}
	return nil
}

func checkContract(t mcp.Tool) error {
	a := t.Annotations
	switch {
	case !toolName.MatchString(t.Name):
		return fmt.Errorf("tool %q: the name must be lower-case words joined by _", t.Name)
	case strings.TrimSpace(t.Description) == "":
		return fmt.Errorf("tool %s: a description is required", t.Name)
	case a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil:
		return fmt.Errorf("tool %s: all four annotations must be set", t.Name)
	case *a.ReadOnlyHint && *a.DestructiveHint:
		return fmt.Errorf("tool %s: a read-only tool cannot be destructive", t.Name)
	case t.RawOutputSchema == nil:
		return fmt.Errorf("tool %s: an output schema is required", t.Name)
	case t.RawInputSchema == nil:
		return fmt.Errorf("tool %s: an input schema is required", t.Name)
	}
	in, err := decodeSchema(t.RawInputSchema)
	if err != nil {
		return fmt.Errorf("tool %s: input schema: %v", t.Name, err)
	}
	for name, p := range in.Properties {
		if strings.TrimSpace(p.Description) == "" {
			return fmt.Errorf("tool %s: argument %s has no description", t.Name, name)
		}
	}
	return nil
}
