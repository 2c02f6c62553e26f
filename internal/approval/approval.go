// Package approval owns what lets a person approve a tool call before it
// happens, without the gateway storing anything: the sealed state of a call
// waiting for the client's form (MCP requestState), the sealed link to the
// approval page for clients that cannot ask, the memory that lets each be
// used once per process, what a person is shown (Preview), and the page
// itself. It knows nothing about tools or mail: what an approved call does
// is an Executor's business.
package approval

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// StateTTL is how long a form the client shows its user stays answerable.
const StateTTL = 5 * time.Minute

// Preview is what a person is shown before approving: the action in a
// sentence, its facts as name and value (From, To, Subject; Folder,
// Messages), the first lines of the text, the attachments, and what will
// be deleted.
type Preview struct {
	Title       string
	Fields      []Field
	Text        string
	Attachments []File
	Items       []string // what will be deleted or moved, one line each
	Warning     string
}

// Field is one fact of a Preview.
type Field struct{ Name, Value string }

// File is one attachment of a Preview.
type File struct {
	Name string
	Size int64
}

// Message is the preview as plain text, for the client's form.
func (p Preview) Message() string {
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
		b.WriteString("\n\n")
		b.WriteString(p.Text)
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

// State is a call waiting for the person's answer in the client.
type State struct {
	Account string // the caller (credentials.Account)
	Tool    string
	Digest  string
	Nonce   string
	Expires time.Time
}

type statePayload struct {
	A   string `json:"a"`
	T   string `json:"t"`
	D   string `json:"d"`
	N   string `json:"n"`
	Exp int64  `json:"exp"`
}

// Errors a state or a link is refused with; their text is safe to show.
var (
	ErrStateInvalid = errors.New("the approval answer does not belong to this call (altered, made by another server, or for another user or other arguments): nothing was done; call the tool again to be asked again")
	ErrStateExpired = errors.New("the approval form has expired (it is valid for 5 minutes): nothing was done; call the tool again to be asked again")
	ErrStateUsed    = errors.New("this approval was already used: nothing more was done; call the tool again to be asked again")
	ErrLinkInvalid  = errors.New("this approval link is not valid here (altered, cut short, or made by another server)")
	ErrLinkExpired  = errors.New("this approval link has expired: nothing was done; ask the agent to try again")
	ErrLinkUsed     = errors.New("this approval link was already used")
	ErrBusy         = errors.New("the gateway is handling too many approvals to take another now; try again in a minute")
)

// Approvals seals and opens states and links, each used at most once in
// this process.
type Approvals struct {
	sealer *credentials.Sealer
	used   *onceSet
	now    func() time.Time
}

// New makes an Approvals. now may be nil (time.Now).
func New(sealer *credentials.Sealer, now func() time.Time) *Approvals {
	if now == nil {
		now = time.Now
	}
	return &Approvals{sealer: sealer, used: newOnceSet(100_000), now: now}
}

// NewState makes the requestState of a call of tool with args by account.
func (a *Approvals) NewState(account, tool string, args map[string]any) (string, error) {
	p := statePayload{A: account, T: tool, D: Digest(tool, args), N: nonce(), Exp: a.now().Add(StateTTL).Unix()}
	plain, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	defer clear(plain)
	return a.sealer.SealOAuth(credentials.KindApprovalState, plain)
}

// UseState checks a requestState the client sent back with its answer:
// made here, for this account, tool and exact arguments, not expired, and
// not used before in this process (it is used now).
func (a *Approvals) UseState(state, account, tool string, args map[string]any) error {
	plain, err := a.sealer.OpenOAuth(credentials.KindApprovalState, state)
	if err != nil {
		return ErrStateInvalid
	}
	defer clear(plain)
	var p statePayload
	if json.Unmarshal(plain, &p) != nil || p.N == "" || p.A != account || p.T != tool || p.D != Digest(tool, args) {
		return ErrStateInvalid
	}
	now := a.now()
	exp := time.Unix(p.Exp, 0)
	if !now.Before(exp) {
		return ErrStateExpired
	}
	return a.used.use("s"+p.N, exp, now, ErrStateUsed)
}

// Link is what an approval link carries: the call to make once a person
// approves it, with the caller's credentials sealed inside.
type Link struct {
	Creds credentials.Credentials
	Tool  string
	// Args are the call's arguments (a destructive call); a message to
	// send is held as a draft instead (Draft, MessageID).
	Args           json.RawMessage
	Draft          *DraftRef
	IdempotencyKey string
	Nonce          string
	Expires        time.Time
}

// DraftRef is the draft a held message waits in.
type DraftRef struct {
	Folder      string `json:"f"`
	UID         uint32 `json:"u"`
	UIDValidity uint32 `json:"v"`
	MessageID   string `json:"m"`
}

type linkPayload struct {
	C   string          `json:"c"` // the credentials, as a token
	T   string          `json:"t"`
	A   json.RawMessage `json:"a,omitempty"`
	D   *DraftRef       `json:"d,omitempty"`
	K   string          `json:"k,omitempty"`
	N   string          `json:"n"`
	Exp int64           `json:"exp"`
}

// NewLink seals l (its Nonce is made here) valid for ttl, never past the
// credentials' own expiry; it returns the link's token and its expiry.
func (a *Approvals) NewLink(l Link, ttl time.Duration) (string, time.Time, error) {
	exp := a.now().Add(ttl).Truncate(time.Second)
	if !l.Creds.Expires.IsZero() && l.Creds.Expires.Before(exp) {
		exp = l.Creds.Expires.Truncate(time.Second)
	}
	tok, err := a.sealer.Seal(l.Creds)
	if err != nil {
		return "", time.Time{}, err
	}
	plain, err := json.Marshal(linkPayload{C: tok, T: l.Tool, A: l.Args, D: l.Draft, K: l.IdempotencyKey, N: nonce(), Exp: exp.Unix()})
	if err != nil {
		return "", time.Time{}, err
	}
	defer clear(plain)
	s, err := a.sealer.SealOAuth(credentials.KindApprovalLink, plain)
	return s, exp, err
}

// OpenLink checks and opens a link without using it.
func (a *Approvals) OpenLink(token string) (Link, error) {
	plain, err := a.sealer.OpenOAuth(credentials.KindApprovalLink, token)
	if err != nil {
		return Link{}, ErrLinkInvalid
	}
	defer clear(plain)
	var p linkPayload
	if json.Unmarshal(plain, &p) != nil || p.N == "" || p.T == "" {
		return Link{}, ErrLinkInvalid
	}
	l := Link{Tool: p.T, Args: p.A, Draft: p.D, IdempotencyKey: p.K, Nonce: p.N, Expires: time.Unix(p.Exp, 0)}
	if !a.now().Before(l.Expires) {
		return Link{}, ErrLinkExpired
	}
	if a.used.seen("l"+p.N, a.now()) {
		return Link{}, ErrLinkUsed
	}
	c, err := a.sealer.OpenAt(p.C, a.now())
	if err != nil {
		if errors.Is(err, credentials.ErrExpired) {
			return Link{}, ErrLinkExpired
		}
		return Link{}, ErrLinkInvalid
	}
	l.Creds = c
	return l, nil
}

// UseLink marks l used; it fails if it was used before in this process.
func (a *Approvals) UseLink(l Link) error {
	return a.used.use("l"+l.Nonce, l.Expires, a.now(), ErrLinkUsed)
}

func nonce() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("approval: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// onceSet remembers used nonces until they expire. It fails closed: when
// full of live entries it refuses new ones (ErrBusy) rather than forget
// one, which would let a state or link be used twice.
type onceSet struct {
	mu        sync.Mutex
	max       int
	ids       map[string]int64
	nextSweep time.Time
}

func newOnceSet(max int) *onceSet { return &onceSet{max: max, ids: map[string]int64{}} }

func (o *onceSet) seen(id string, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	exp, ok := o.ids[id]
	return ok && now.Unix() < exp
}

func (o *onceSet) use(id string, exp, now time.Time, used error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e, ok := o.ids[id]; ok && now.Unix() < e {
		return used
	}
	if len(o.ids) >= o.max {
		if now.Before(o.nextSweep) {
			return ErrBusy
		}
		o.nextSweep = now.Add(time.Second)
		for k, e := range o.ids {
			if now.Unix() >= e {
				delete(o.ids, k)
			}
		}
		if len(o.ids) >= o.max {
			return ErrBusy
		}
	}
	o.ids[id] = exp.Unix()
	return nil
}
