// Package approval owns what lets a person approve a tool call before it
// happens, without the gateway storing anything: the sealed state of a call
// waiting for the client's form (MCP requestState), the sealed link to the
// approval page for clients that cannot ask, what each holds to so that
// what is done is what the person saw (Binding), the memory that lets each
// be used once and bounds how many one account may have waiting, what a
// person is shown (Preview), and the page itself, which shows nothing to
// anyone but the person signed in as the mailbox the link is for. It knows
// nothing about tools or mail: what an approved call does is an Executor's
// business, and how a password or a provider sign-in is checked is the
// SignIn's.
package approval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

// StateTTL is how long a form the client shows its user stays answerable.
const StateTTL = 5 * time.Minute

// DefaultMaxPending is how many approvals one account may have waiting
// (made, neither answered nor expired) when Options.MaxPending is 0.
const DefaultMaxPending = 20

// Preview is what a person is shown before approving: the action in a
// sentence, its facts as name and value (From, To, Subject; Folder,
// Messages), the text of a message (and its HTML version as a mail program
// shows it), the attachments, and what will be deleted. Facts is not
// shown: it is what the approval holds to (Binding.Facts).
type Preview struct {
	Title       string
	Fields      []Field
	Text        string
	HTML        string // the HTML version's visible text, when it says something the text does not
	HTMLOnly    bool   // the message was written as HTML alone: HTML is what the recipient reads
	Attachments []File
	Items       []string // what will be deleted or moved, one line each
	Warning     string
	Facts       json.RawMessage
}

// Field is one fact of a Preview.
type Field struct{ Name, Value string }

// File is one attachment of a Preview.
type File struct {
	Name string
	Size int64
}

// Message is the preview as plain text, for the client's form, with every
// invisible or direction-changing character shown as a visible escape.
func (p Preview) Message() string {
	p = p.Shown()
	var b strings.Builder
	b.WriteString(p.Title)
	b.WriteString("\n")
	for _, f := range p.Fields {
		fmt.Fprintf(&b, "\n%s: %s", f.Name, f.Value)
	}
	if len(p.Attachments) > 0 {
		b.WriteString("\nAttachments:")
		for _, a := range p.Attachments {
			fmt.Fprintf(&b, "\n  %s (%s)", a.Name, Size(a.Size))
		}
	}
	if p.Text != "" {
		if p.HTML != "" {
			b.WriteString("\n\nText version:")
		}
		b.WriteString("\n\n")
		b.WriteString(p.Text)
	}
	if p.HTML != "" {
		b.WriteString("\n\n")
		b.WriteString(p.HTMLLabel())
		b.WriteString(":\n\n")
		b.WriteString(p.HTML)
	}
	if len(p.Items) > 0 {
		b.WriteString("\n")
		for _, it := range p.Items {
			b.WriteString("\n- ")
			b.WriteString(it)
		}
	}
	if p.Warning != "" {
		b.WriteString("\n\n")
		b.WriteString(p.Warning)
	}
	return b.String()
}

// HTMLLabel names the HTML version for the person.
func (p Preview) HTMLLabel() string {
	if p.HTMLOnly {
		return "HTML version (as the recipient's mail program shows it)"
	}
	return "HTML version (what most mail programs show the recipient; it differs from the text version)"
}

// Shown is p with every string made safe to show a person: invisible and
// bidirectional control characters become visible escapes (Visible).
func (p Preview) Shown() Preview {
	p.Title, p.Text, p.HTML, p.Warning = Visible(p.Title), Visible(p.Text), Visible(p.HTML), Visible(p.Warning)
	fields := make([]Field, len(p.Fields))
	for i, f := range p.Fields {
		fields[i] = Field{Visible(f.Name), Visible(f.Value)}
	}
	p.Fields = fields
	files := make([]File, len(p.Attachments))
	for i, f := range p.Attachments {
		files[i] = File{Visible(f.Name), f.Size}
	}
	p.Attachments = files
	items := make([]string, len(p.Items))
	for i, it := range p.Items {
		items[i] = Visible(it)
	}
	p.Items = items
	return p
}

// Size formats a byte count for people.
func Size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// Digest names the exact arguments of a call: a retry must carry the same
// ones. Arguments are the decoded JSON object, so key order and spacing do
// not matter (encoding/json writes map keys sorted).
func Digest(tool string, args map[string]any) string {
	b, _ := json.Marshal(args)
	sum := sha256.Sum256(append([]byte(tool+"\x00"), b...))
	return hex.EncodeToString(sum[:])
}

// Binding is what an approval holds to, so that what is done is exactly
// what the person saw: a message to send, held as a draft (sent as it is,
// and only while it is unchanged), or the facts of what a destructive call
// will change (UIDVALIDITY, counts, UIDs, Message-IDs), which the call
// checks again before it changes anything. What the facts mean is the
// Executor's (and the tools') business.
type Binding struct {
	Draft *DraftRef       `json:"d,omitempty"`
	Facts json.RawMessage `json:"f,omitempty"`
	// Page, in a state, says the person answers on the approval page:
	// the client was given the link to open for them (URL-mode
	// elicitation). It is the link's ID (Minted.ID), valid until Expires
	// (unix seconds).
	Page    string `json:"p,omitempty"`
	Expires int64  `json:"e,omitempty"`
}

// DraftRef is the draft a held message waits in.
type DraftRef struct {
	Folder      string `json:"f"`
	UID         uint32 `json:"u"`
	UIDValidity uint32 `json:"v"`
	MessageID   string `json:"m"`
}

// Caller is who a state or a link is for: the canonical account
// (credentials.AccountKey) and the agent within it ("" for none). An
// approval made for one caller is refused to any other: another user, the
// same user as another agent, or the same user with no agent named.
type Caller struct{ Account, Agent string }

// CallerOf is the caller creds stand for.
func CallerOf(creds credentials.Credentials) Caller {
	return Caller{Account: creds.AccountKey(), Agent: creds.Agent}
}

// State is a call waiting for the person's answer in the client.
type statePayload struct {
	A   string  `json:"a"`
	G   string  `json:"g,omitempty"`
	T   string  `json:"t"`
	D   string  `json:"d"`
	B   Binding `json:"b"`
	N   string  `json:"n"`
	Exp int64   `json:"exp"`
}

// Errors a state or a link is refused with; their text is safe to show.
var (
	ErrStateInvalid = errors.New("the approval answer does not belong to this call (altered, made by another server, or for another user, agent or other arguments): nothing was done; call the tool again to be asked again")
	ErrStateExpired = errors.New("the approval form has expired (it is valid for 5 minutes): nothing was done; call the tool again to be asked again")
	ErrStateUsed    = errors.New("this approval was already used: nothing more was done; call the tool again to be asked again")
	ErrLinkInvalid  = errors.New("this approval link is not valid here (altered, cut short, or made by another server)")
	ErrLinkExpired  = errors.New("this approval link has expired: nothing was done; ask the agent to try again")
	ErrLinkUsed     = errors.New("this approval link was already used")
)

// PendingError says an account has as many approvals waiting as it may.
type PendingError struct{ Max int }

func (e *PendingError) Error() string {
	return fmt.Sprintf("this mailbox already has %d approvals waiting for a person's answer (at most %d at a time, APPROVAL_MAX_PENDING): nothing was done; let the person answer or reject them, or wait until they expire, then try again", e.Max, e.Max)
}

// Options configure Approvals.
type Options struct {
	// MaxPending is how many approvals one account may have waiting at a
	// time (0: DefaultMaxPending).
	MaxPending int
	// Memory keeps which approvals wait and which were used (nil: a
	// memory of this process's own; Redis makes it one for every
	// replica).
	Memory memory.Store
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Approvals seals and opens states and links, each used at most once (in
// every replica that shares its memory), and no more than MaxPending
// waiting per account.
type Approvals struct {
	sealer *credentials.Sealer
	ledger *ledger
	now    func() time.Time
}

// New makes an Approvals.
func New(sealer *credentials.Sealer, opts Options) *Approvals {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.Memory == nil {
		opts.Memory = memory.NewLocal(opts.Now)
	}
	return &Approvals{sealer: sealer, ledger: newLedger(opts.Memory, opts.MaxPending), now: opts.Now}
}

// NewState makes the requestState of a call of tool with args by who,
// holding b. It counts as waiting for who until it is used or expires.
// Make one only once who's credentials have been proven with a login.
func (a *Approvals) NewState(ctx context.Context, who Caller, tool string, args map[string]any, b Binding) (string, error) {
	now := a.now()
	p := statePayload{A: who.Account, G: who.Agent, T: tool, D: Digest(tool, args), B: b, N: nonce(), Exp: now.Add(StateTTL).Unix()}
	if err := a.ledger.wait(ctx, who.Account, "s"+p.N, time.Unix(p.Exp, 0)); err != nil {
		return "", err
	}
	plain, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	defer clear(plain)
	return a.sealer.SealOAuth(credentials.KindApprovalState, plain)
}

// UseState checks a requestState the client sent back with its answer:
// made here, for this caller (account and agent), tool and exact
// arguments, not expired, and not used before (it is used now). It
// returns what the approval holds to.
func (a *Approvals) UseState(ctx context.Context, state string, who Caller, tool string, args map[string]any) (Binding, error) {
	plain, err := a.sealer.OpenOAuth(credentials.KindApprovalState, state)
	if err != nil {
		return Binding{}, ErrStateInvalid
	}
	defer clear(plain)
	var p statePayload
	if json.Unmarshal(plain, &p) != nil || p.N == "" || p.A == "" || p.A != who.Account || p.G != who.Agent || p.T != tool || p.D != Digest(tool, args) {
		return Binding{}, ErrStateInvalid
	}
	now := a.now()
	exp := time.Unix(p.Exp, 0)
	if !now.Before(exp) {
		return Binding{}, ErrStateExpired
	}
	if err := a.ledger.use(ctx, p.A, "s"+p.N, exp, ErrStateUsed); err != nil {
		return Binding{}, err
	}
	return p.B, nil
}

// Link is what an approval link carries: the call to make once a person
// approves it, with the caller's credentials (agent included) sealed
// inside, and what it holds to.
type Link struct {
	Creds credentials.Credentials
	Tool  string
	// Args are the call's arguments (a destructive call); a message to
	// send is held as a draft instead (Binding.Draft).
	Args           json.RawMessage
	Binding        Binding
	IdempotencyKey string
	Nonce          string
	Expires        time.Time
}

// Caller is who the link is for.
func (l Link) Caller() Caller { return CallerOf(l.Creds) }

type linkPayload struct {
	C   string          `json:"c"` // the credentials, as a token
	T   string          `json:"t"`
	A   json.RawMessage `json:"a,omitempty"`
	B   Binding         `json:"b"`
	K   string          `json:"k,omitempty"`
	N   string          `json:"n"`
	Exp int64           `json:"exp"`
}

// Minted is a link just made: its token (the secret part of the URL), its
// ID (which names it without being it) and its expiry.
type Minted struct {
	Token, ID string
	Expires   time.Time
}

// NewLink seals l (its Nonce is made here) valid for ttl, never past the
// credentials' own expiry. It counts as waiting for its account until it
// is used or expires. Make one only once the credentials have been proven
// with a login.
func (a *Approvals) NewLink(ctx context.Context, l Link, ttl time.Duration) (Minted, error) {
	now := a.now()
	exp := now.Add(ttl).Truncate(time.Second)
	if !l.Creds.Expires.IsZero() && l.Creds.Expires.Before(exp) {
		exp = l.Creds.Expires.Truncate(time.Second)
	}
	tok, err := a.sealer.Seal(l.Creds)
	if err != nil {
		return Minted{}, err
	}
	p := linkPayload{C: tok, T: l.Tool, A: l.Args, B: l.Binding, K: l.IdempotencyKey, N: nonce(), Exp: exp.Unix()}
	plain, err := json.Marshal(p)
	if err != nil {
		return Minted{}, err
	}
	defer clear(plain)
	s, err := a.sealer.SealOAuth(credentials.KindApprovalLink, plain)
	if err != nil {
		return Minted{}, err
	}
	if err := a.ledger.wait(ctx, l.Creds.AccountKey(), "l"+p.N, exp); err != nil {
		return Minted{}, err
	}
	return Minted{Token: s, ID: p.N, Expires: exp}, nil
}

// OpenLink checks and opens a link without using it.
func (a *Approvals) OpenLink(ctx context.Context, token string) (Link, error) {
	plain, err := a.sealer.OpenOAuth(credentials.KindApprovalLink, token)
	if err != nil {
		return Link{}, ErrLinkInvalid
	}
	defer clear(plain)
	var p linkPayload
	if json.Unmarshal(plain, &p) != nil || p.N == "" || p.T == "" {
		return Link{}, ErrLinkInvalid
	}
	l := Link{Tool: p.T, Args: p.A, Binding: p.B, IdempotencyKey: p.K, Nonce: p.N, Expires: time.Unix(p.Exp, 0)}
	now := a.now()
	if !now.Before(l.Expires) {
		return Link{}, ErrLinkExpired
	}
	c, err := a.sealer.OpenAt(p.C, now)
	if err != nil {
		if errors.Is(err, credentials.ErrExpired) {
			return Link{}, ErrLinkExpired
		}
		return Link{}, ErrLinkInvalid
	}
	switch used, err := a.ledger.seen(ctx, c.AccountKey(), "l"+p.N); {
	case err != nil:
		return Link{}, err
	case used:
		return Link{}, ErrLinkUsed
	}
	l.Creds = c
	return l, nil
}

// UseLink marks l used; it fails if it was used before.
func (a *Approvals) UseLink(ctx context.Context, l Link) error {
	return a.ledger.use(ctx, l.Creds.AccountKey(), "l"+l.Nonce, l.Expires, ErrLinkUsed)
}

// DropLink ends link id (Minted.ID) of who unanswered: it is used now,
// and the page refuses it. For a person who would not open it. (Should
// the memory not answer, the link stays usable until it expires: only the
// person signed in as the mailbox can use it.)
func (a *Approvals) DropLink(ctx context.Context, who Caller, id string, exp time.Time) {
	_ = a.ledger.use(ctx, who.Account, "l"+id, exp, nil)
}

// Room says whether account may have another approval waiting now (a
// *PendingError when it may not, an *UnavailableError when that cannot be
// known now): asked before anything is held for one.
func (a *Approvals) Room(ctx context.Context, account string) error {
	n, err := a.ledger.pending(ctx, account)
	switch {
	case err != nil:
		return err
	case n >= a.ledger.maxPending:
		return &PendingError{Max: a.ledger.maxPending}
	}
	return nil
}

// Waiting reports how many approvals account has waiting (for tests and
// metrics; 0 when that cannot be known now).
func (a *Approvals) Waiting(ctx context.Context, account string) int {
	n, _ := a.ledger.pending(ctx, account)
	return n
}

func nonce() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("approval: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}
