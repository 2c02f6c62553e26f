// Package outbox sends mail on the user's behalf: it composes the message
// (mailmsg), submits it with the user's own login (submission), files the
// copy in the Sent folder and, for a reply, works out who it goes to and
// the threading headers, and flags the original \Answered (mailbox). It is
// the mail workflow below MCP: it names no tool and knows no argument
// format. Drafts (draft.go), forwarding (forward.go) and sending at most
// once per idempotency key (idempotent.go) belong here too; saving a draft
// needs no SMTP server, so an Outbox exists without one (CanSend).
package outbox

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/invite"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
	"github.com/mailbox-mcp/mailbox-mcp/internal/submission"
)

// Defaults for zero Config fields.
const (
	DefaultMaxRecipients      = 100
	DefaultMaxAttachmentBytes = 768 << 10
)

// maxReferences caps the References of a reply: the thread's root and the
// most recent ids, as mail clients trim long threads.
const maxReferences = 20

// Config is the sending policy.
type Config struct {
	// SentFolder receives the copy of sent mail: "" finds it,
	// mailbox.NoSentFolder saves none.
	SentFolder string
	// MaxRecipients caps To+Cc+Bcc of one message.
	MaxRecipients int
	// MaxAttachmentBytes caps the decoded attachments of one message.
	MaxAttachmentBytes int64
	// FromPolicy says who a user may send as: FromLogin (the default)
	// allows the login's own address and AllowedFrom; FromAny leaves it to
	// the mail server.
	FromPolicy string
	// AllowedFrom lists further addresses ("alias@example.com") or domains
	// ("@example.com") anyone may send as under FromLogin.
	AllowedFrom []string
	// IdempotencySecret keys the Message-IDs derived from idempotency keys
	// (the server's ENCRYPTION_KEY): every replica with the same secret
	// derives the same one. Without it idempotency keys are refused.
	IdempotencySecret []byte
	// MaxSendTime is the longest one send may take (TOOL_TIMEOUT): a Sent
	// copy still marked as being sent a minute after that belongs to an
	// attempt that was interrupted. 0 means DefaultMaxSendTime.
	MaxSendTime time.Duration
}

// Sender policies.
const (
	FromLogin = "login"
	FromAny   = "any"
)

// Outbox sends mail for many users; it is safe for concurrent use.
type Outbox struct {
	cfg        Config
	mailbox    *mailbox.Client
	submission *submission.Client
	log        *slog.Logger
	flights    flights // sends with an idempotency key running here
}

// New makes an Outbox. sub may be nil: drafts can then be saved, but
// nothing can be sent.
func New(cfg Config, mb *mailbox.Client, sub *submission.Client, log *slog.Logger) *Outbox {
	if cfg.MaxRecipients <= 0 {
		cfg.MaxRecipients = DefaultMaxRecipients
	}
	if cfg.MaxAttachmentBytes <= 0 {
		cfg.MaxAttachmentBytes = DefaultMaxAttachmentBytes
	}
	if cfg.MaxSendTime <= 0 {
		cfg.MaxSendTime = DefaultMaxSendTime
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Outbox{cfg: cfg, mailbox: mb, submission: sub, log: log.With("component", "outbox")}
}

// CanSend reports whether o can send mail (it has an SMTP server); false
// for a nil Outbox.
func (o *Outbox) CanSend() bool { return o != nil && o.submission != nil }

// MaxRecipients is the cap on To+Cc+Bcc of one message (the default for a
// nil Outbox, so that descriptions can be written without one).
func (o *Outbox) MaxRecipients() int {
	if o == nil {
		return DefaultMaxRecipients
	}
	return o.cfg.MaxRecipients
}

// AttachmentLimit is the cap on the decoded attachments of one message
// (the default for a nil Outbox).
func (o *Outbox) AttachmentLimit() int64 {
	if o == nil {
		return DefaultMaxAttachmentBytes
	}
	return o.cfg.MaxAttachmentBytes
}

// Attachment is one file to attach, decoded.
type Attachment struct {
	Filename    string
	ContentType string // "" is guessed from the file name
	Data        []byte
}

// Message is a new message to send. Address fields hold one address or a
// comma-separated list each ("Name <a@example.com>, b@example.com").
type Message struct {
	From                 string // "" sends as the login name
	To, Cc, Bcc, ReplyTo []string
	Subject, Text, HTML  string
	Attachments          []Attachment
	Tags                 []string
	// IdempotencyKey, when set, makes the send happen at most once for
	// this user and key (idempotent.go).
	IdempotencyKey string
}

// Reply answers message UID of Folder.
type Reply struct {
	Folder string
	UID    uint32
	// All also answers the original's To and Cc.
	All         bool
	From        string
	Cc, Bcc     []string
	Text, HTML  string
	Attachments []Attachment
	Tags        []string
	// IdempotencyKey as for Message.
	IdempotencyKey string
}

// Result is the outcome of a send that reached the mail server.
type Result struct {
	MessageID  string              `json:"message_id" desc:"Message-ID of the sent message, without angle brackets"`
	Date       time.Time           `json:"date" desc:"the message's Date"`
	From       string              `json:"from" desc:"the sender"`
	To         []string            `json:"to" desc:"the To recipients"`
	Cc         []string            `json:"cc,omitempty" desc:"the Cc recipients"`
	Bcc        []string            `json:"bcc,omitempty" desc:"the Bcc recipients (not shown in the delivered copies)"`
	Subject    string              `json:"subject" desc:"the subject sent"`
	Accepted   []string            `json:"accepted" desc:"recipients the mail server accepted the message for"`
	Rejected   []RejectedRecipient `json:"rejected,omitempty" desc:"recipients the mail server refused; the message was not sent to them"`
	InReplyTo  string              `json:"in_reply_to,omitempty" desc:"reply only: the Message-ID answered"`
	References []string            `json:"references,omitempty" desc:"reply only: the thread's Message-IDs, oldest first"`
	SentCopy   SentCopy            `json:"sent_copy" desc:"whether a copy was saved in the Sent folder, where, or why not"`
	Original   *Replied            `json:"original,omitempty" desc:"reply only: the message answered"`
	Tags       []string            `json:"tags,omitempty" desc:"the tags the message carries (X-Mailbox-Tags)"`
	// Set by the sends that take them.
	Forwarded *ForwardedFrom `json:"forwarded,omitempty" desc:"forward only: the message forwarded"`
	Draft     *SentDraft     `json:"draft,omitempty" desc:"draft send only: the draft sent, and whether it was removed"`
	// IdempotencyKey and Duplicate: see idempotent.go.
	IdempotencyKey string   `json:"idempotency_key,omitempty" desc:"the idempotency_key given"`
	Duplicate      bool     `json:"duplicate,omitempty" desc:"true when a message had already been sent with this idempotency_key: this call sent nothing, and the fields describe that message (accepted is then unknown and empty)"`
	Warnings       []string `json:"warnings,omitempty" desc:"things that did not go as asked but did not stop the message"`
}

// RejectedRecipient is a recipient the server refused.
type RejectedRecipient struct {
	Address string `json:"address" desc:"the refused address"`
	Code    int    `json:"code" desc:"SMTP reply code: 5xx permanent, 4xx temporary"`
	Reason  string `json:"reason" desc:"the server's reason"`
}

// SentCopy says where the copy of a sent message went.
type SentCopy struct {
	Saved  bool   `json:"saved" desc:"true when a copy was saved"`
	Folder string `json:"folder,omitempty" desc:"the folder holding the copy"`
	UID    uint32 `json:"uid,omitempty" desc:"the copy's UID, when the server says"`
	Reason string `json:"reason,omitempty" desc:"why no copy was saved"`
}

// Replied is the message a reply answered.
type Replied struct {
	Folder        string `json:"folder" desc:"its folder"`
	UID           uint32 `json:"uid" desc:"its UID"`
	MessageID     string `json:"message_id,omitempty" desc:"its Message-ID"`
	Answered      bool   `json:"answered" desc:"true when the \\Answered flag was set on it"`
	AnsweredError string `json:"answered_error,omitempty" desc:"why the flag could not be set"`
}

// Send composes and sends m as creds' user, then files the Sent copy.
func (o *Outbox) Send(ctx context.Context, creds credentials.Credentials, m Message) (*Result, error) {
	if res, err := o.prior(ctx, creds, m.IdempotencyKey); res != nil || err != nil {
		return res, err
	}
	p, err := o.PlanSend(ctx, creds, m)
	if err != nil {
		return nil, err
	}
	return o.deliver(ctx, creds, p.d, m.IdempotencyKey)
}

// PlanSend composes m exactly as Send would send it, without sending.
func (o *Outbox) PlanSend(_ context.Context, creds credentials.Credentials, m Message) (*Planned, error) {
	d, err := o.draft(creds, m.From, m.Subject, m.Text, m.HTML, m.Attachments)
	if err != nil {
		return nil, err
	}
	if d.Tags, err = mailmsg.CheckTags(m.Tags); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		in   []string
		out  *[]mailmsg.Address
	}{{"to", m.To, &d.To}, {"cc", m.Cc, &d.Cc}, {"bcc", m.Bcc, &d.Bcc}, {"reply_to", m.ReplyTo, &d.ReplyTo}} {
		if *f.out, err = parseAddresses(f.name, f.in); err != nil {
			return nil, err
		}
	}
	return o.planned(d, nil)
}

// Reply sends r: to the original's Reply-To (else its sender), with All
// also to its To and Cc (never the user, never twice), subject with one
// "Re: ", In-Reply-To and References threading it; then files the Sent
// copy and flags the original \Answered. The original is read without
// changing it.
func (o *Outbox) Reply(ctx context.Context, creds credentials.Credentials, r Reply) (*Result, error) {
	if res, err := o.prior(ctx, creds, r.IdempotencyKey); res != nil || err != nil {
		return res, err
	}
	p, err := o.PlanReply(ctx, creds, r)
	if err != nil {
		return nil, err
	}
	return o.sendAnswer(ctx, creds, p, r.IdempotencyKey)
}

// sendAnswer sends p, a planned answer to p.original (a reply, a meeting
// answer), files the Sent copy and flags the original \Answered.
func (o *Outbox) sendAnswer(ctx context.Context, creds credentials.Credentials, p *Planned, key string) (*Result, error) {
	res, err := o.deliver(ctx, creds, p.d, key)
	if err != nil || res.Duplicate {
		return res, err // a duplicate's original was flagged by the send that went out
	}
	orig := p.original
	res.Warnings = append(p.Warnings, res.Warnings...)
	res.Original = &Replied{Folder: orig.Folder, UID: orig.UID, MessageID: orig.MessageID}
	// The reply went out: flag the original even if the caller has gone,
	// within the call's deadline.
	actx, cancel := detached(ctx)
	defer cancel()
	if err := o.mailbox.MarkAnswered(actx, creds, orig.Folder, orig.UID, orig.UIDValidity); err != nil {
		o.log.WarnContext(ctx, "could not flag the original as answered", "err", err)
		res.Original.AnsweredError = mailerr.Message(err)
	} else {
		res.Original.Answered = true
	}
	return res, nil
}

// PlanReply composes r exactly as Reply would send it (reading the
// original without changing it), without sending.
func (o *Outbox) PlanReply(ctx context.Context, creds credentials.Credentials, r Reply) (*Planned, error) {
	d, err := o.draft(creds, r.From, "", r.Text, r.HTML, r.Attachments)
	if err != nil {
		return nil, err
	}
	if d.Tags, err = mailmsg.CheckTags(r.Tags); err != nil {
		return nil, err
	}
	extraCc, err := parseAddresses("cc", r.Cc)
	if err != nil {
		return nil, err
	}
	if d.Bcc, err = parseAddresses("bcc", r.Bcc); err != nil {
		return nil, err
	}
	orig, err := o.mailbox.ReplyInfo(ctx, creds, r.Folder, r.UID)
	if err != nil {
		return nil, err
	}
	var warnings []string
	d.To, d.Cc, warnings = replyRecipients(orig, selfAddresses(creds, d.From), r.All, extraCc)
	d.Subject = mailmsg.ReplySubject(orig.Subject)
	d.InReplyTo = orig.MessageID
	d.References = replyReferences(orig)
	if len(d.To) == 0 && len(d.Cc) == 0 && len(d.Bcc) == 0 {
		return nil, mailerr.New(mailerr.BadInput, "the original message names nobody to reply to (no valid Reply-To, From or recipients); send a new message with explicit recipients instead")
	}
	p, err := o.planned(d, warnings)
	if p != nil {
		p.original = orig
	}
	return p, err
}

// Planned is a message composed exactly as it would be sent, not sent:
// what a person checks before approving it.
type Planned struct {
	d        mailmsg.Draft
	Warnings []string
	original *mailbox.Original // a reply's
	// forwarded is a forward's original
	forwarded *ForwardedFrom
	// draft is the draft a draft send takes its message from, with its
	// Message-ID
	draft          *mailbox.LoadedDraft
	draftMessageID string
}

// planned checks what every send checks before the SMTP server is asked
// (sending on, recipients), so that a person is never asked to approve
// what would be refused anyway.
func (o *Outbox) planned(d mailmsg.Draft, warnings []string) (*Planned, error) {
	if !o.CanSend() {
		return nil, mailerr.New(mailerr.Forbidden, "sending is turned off on this gateway (no SMTP server is configured); nothing was sent")
	}
	switch n := len(d.Recipients()); {
	case n == 0:
		return nil, mailerr.New(mailerr.BadInput, "no recipients: give at least one address in to, cc or bcc")
	case n > o.cfg.MaxRecipients:
		return nil, mailerr.Newf(mailerr.BadInput, "too many recipients: %d, at most %d (To, Cc and Bcc together)", n, o.cfg.MaxRecipients)
	}
	return &Planned{d: d, Warnings: warnings}, nil
}

// Draft is the draft a planned draft send takes its message from, and
// the draft's Message-ID (zero for other sends).
func (p *Planned) Draft() (mailbox.DraftRef, string) {
	if p.draft == nil {
		return mailbox.DraftRef{}, ""
	}
	return p.draft.DraftRef, p.draftMessageID
}

// Summary is a planned message as a person reads it before it goes.
type Summary struct {
	// Title, when set, is what the message does in words, for a message
	// that is more than a message: a meeting answer.
	Title         string
	From          string
	To, Cc, Bcc   []string
	ReplyTo       []string
	Subject, Text string
	// HTML is the HTML version as a mail program shows it (the visible
	// text, hidden text dropped), "" when the message has none; Text is
	// then "" when the message has only that version.
	HTML            string
	Attachments     []AttachmentInfo
	InReplyTo       string // a reply's: the Message-ID answered
	ForwardOf       string // a forward's: the original's subject
	DraftUID        uint32 // a draft send's: the draft
	DraftRemoveNote string
}

// AttachmentInfo names one file of a planned message.
type AttachmentInfo struct {
	Name string
	Size int64
}

// Summary describes p for a person: every recipient, the subject, the
// text and the HTML version as the recipient's mail program shows it, and
// each file.
func (p *Planned) Summary() Summary {
	d := p.d
	s := Summary{From: display(d.From), To: addrStrings(d.To), Cc: addrStrings(d.Cc), Bcc: addrStrings(d.Bcc),
		ReplyTo: addrStrings(d.ReplyTo), Subject: d.Subject, Text: d.Text, InReplyTo: d.InReplyTo}
	if strings.TrimSpace(s.Text) == "" {
		s.Text = ""
	}
	if d.HTML != "" {
		s.HTML = mailmsg.HTMLToText(d.HTML)
	}
	for _, a := range d.Attachments {
		s.Attachments = append(s.Attachments, AttachmentInfo{Name: a.Filename, Size: int64(len(a.Data))})
	}
	if p.draft != nil {
		s.DraftUID = p.draft.UID
	}
	if d.Calendar != nil && strings.EqualFold(d.Calendar.Method, "REPLY") {
		s.Title = invite.Title(d.Calendar.Data)
	}
	return s
}

// HeldKeyword marks a draft held for a person's approval: it is sent from
// the approval page, not by mistake from a mail client.
const HeldKeyword = "$MailboxAwaitingApproval"

// Held is where a message waiting for approval is kept.
type Held struct {
	mailbox.DraftRef
	MessageID string
}

// Hold saves p in the Drafts folder (\Draft, \Seen and HeldKeyword), to be
// sent by SendDraft once a person approves it, or removed if they reject
// it. The draft keeps the Bcc header, as every draft does.
func (o *Outbox) Hold(ctx context.Context, creds credentials.Credentials, p *Planned) (*Held, error) {
	d := p.d
	d.Date = time.Now().Truncate(time.Second)
	d.SentCopy = true
	d.MessageID = ""
	raw, id, err := mailmsg.Compose(d)
	if err != nil {
		return nil, err
	}
	saved, err := o.mailbox.SaveDraft(ctx, creds, mailbox.SaveDraftOptions{Raw: raw, MessageID: id, Date: d.Date, Keywords: []string{HeldKeyword}})
	if err != nil {
		return nil, err
	}
	return &Held{DraftRef: saved.DraftRef, MessageID: id}, nil
}

// Discard removes a held draft (its approval was refused).
func (o *Outbox) Discard(ctx context.Context, creds credentials.Credentials, ref mailbox.DraftRef) error {
	return o.mailbox.DeleteDraft(ctx, creds, ref)
}

// detached is ctx without its cancellation (the caller may have gone; the
// message is out, so the bookkeeping must finish) but with its deadline.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	c := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(c, dl)
	}
	return context.WithCancel(c)
}

// draft starts a Draft from what send and reply share: sender, body and
// attachments, all checked.
func (o *Outbox) draft(creds credentials.Credentials, from, subject, text, html string, atts []Attachment) (mailmsg.Draft, error) {
	var d mailmsg.Draft
	var err error
	if d.From, err = o.sender(creds, from); err != nil {
		return d, err
	}
	if err := needBody(text, html); err != nil {
		return d, err
	}
	d.Subject, d.Text, d.HTML = subject, text, html
	d.Attachments, err = o.attachments(atts)
	return d, err
}

// sender is the From address: from, else the login name, allowed by the
// sender policy.
func (o *Outbox) sender(creds credentials.Credentials, from string) (mailmsg.Address, error) {
	var a mailmsg.Address
	var err error
	if strings.TrimSpace(from) != "" {
		if a, err = mailmsg.ParseAddress("from", from); err != nil {
			return a, err
		}
	} else if a, err = mailmsg.ParseAddress("from", creds.User); err != nil {
		return a, mailerr.Newf(mailerr.BadInput, "from: the login name %q is not an email address, so the sender cannot be derived from it; give the sender address", mailmsg.SanitizeLine(creds.User))
	}
	return a, o.mayUseSender(creds, a)
}

func needBody(text, html string) error {
	if strings.TrimSpace(text) == "" && strings.TrimSpace(html) == "" {
		return mailerr.New(mailerr.BadInput, "text (or html) is required: the message body")
	}
	return nil
}

// attachments checks the total size of atts against the limit.
func (o *Outbox) attachments(atts []Attachment) ([]mailmsg.OutAttachment, error) {
	var out []mailmsg.OutAttachment
	var total int64
	for _, a := range atts {
		total += int64(len(a.Data))
		if total > o.cfg.MaxAttachmentBytes {
			return nil, mailerr.Newf(mailerr.TooLarge, "the attachments exceed the limit of %s in total; send large files as a link instead", SizeText(o.cfg.MaxAttachmentBytes))
		}
		out = append(out, mailmsg.OutAttachment{Filename: a.Filename, ContentType: a.ContentType, Data: a.Data})
	}
	return out, nil
}

// mayUseSender applies the sender policy: under FromLogin the address
// (not the display name) must be the login's, or one of AllowedFrom. A
// permissive mail server would otherwise let any user send as anyone.
func (o *Outbox) mayUseSender(creds credentials.Credentials, from mailmsg.Address) error {
	if o.cfg.FromPolicy == FromAny {
		return nil
	}
	addr := strings.ToLower(from.Email)
	if addr == strings.ToLower(strings.TrimSpace(creds.User)) {
		return nil
	}
	_, domain, _ := strings.Cut(addr, "@")
	for _, a := range o.cfg.AllowedFrom {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == addr || strings.HasPrefix(a, "@") && a[1:] == domain {
			return nil
		}
	}
	return mailerr.Newf(mailerr.Forbidden, "from: this gateway does not let you send as %s: its sender policy (SMTP_FROM_POLICY=login) allows only the login's own address %s (any display name) and the addresses the operator lists in SMTP_ALLOWED_FROM",
		mailmsg.SanitizeLine(from.Email), mailmsg.SanitizeLine(creds.User))
}

func parseAddresses(field string, in []string) ([]mailmsg.Address, error) {
	var out []mailmsg.Address
	for _, s := range in {
		if strings.TrimSpace(s) == "" {
			return nil, mailerr.Newf(mailerr.BadInput, "%s: an empty address was given", field)
		}
		list, err := mailmsg.ParseAddressList(field, s)
		if err != nil {
			return nil, err
		}
		out = append(out, list...)
	}
	return out, nil
}

// selfAddresses are the user's own addresses, lower case: the login name
// and the sender.
func selfAddresses(creds credentials.Credentials, from mailmsg.Address) map[string]bool {
	return map[string]bool{strings.ToLower(strings.TrimSpace(creds.User)): true, strings.ToLower(from.Email): true}
}

// replyRecipients works out who a reply goes to: Reply-To, else From; with
// all, also the original To and Cc; never the user's own address in Cc,
// never an address twice (compared case-insensitively). Replying to one's
// own message (from Sent) answers its recipients, as mail clients do.
// Addresses of the original that cannot be written back are skipped with a
// warning.
func replyRecipients(o *mailbox.Original, self map[string]bool, all bool, extraCc []mailmsg.Address) (to, cc []mailmsg.Address, warnings []string) {
	primary, others := o.ReplyTo, append(append([]mailbox.Address(nil), o.To...), o.Cc...)
	if len(primary) == 0 {
		primary = o.From
	}
	ownMessage := len(primary) > 0
	for _, a := range primary {
		if !self[strings.ToLower(a.Email)] {
			ownMessage = false
		}
	}
	if ownMessage && len(o.To) > 0 {
		primary, others = o.To, o.Cc
	}
	seen := map[string]bool{}
	add := func(list []mailmsg.Address, a mailbox.Address, skipSelf bool) []mailmsg.Address {
		k := strings.ToLower(a.Email)
		if seen[k] || skipSelf && self[k] {
			return list
		}
		ad, err := mailmsg.ParseAddress("", mailmsg.Address{Name: a.Name, Email: a.Email}.String())
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("skipped %q from the original: not a valid email address", a.Email))
			return list
		}
		seen[k] = true
		return append(list, ad)
	}
	for _, a := range primary {
		to = add(to, a, false)
	}
	if all {
		for _, a := range others {
			cc = add(cc, a, true)
		}
	}
	for _, a := range extraCc {
		cc = add(cc, mailbox.Address{Name: a.Name, Email: a.Email}, false)
	}
	return to, cc, warnings
}

// replyReferences is the original's References (or, lacking them, its one
// In-Reply-To) followed by its Message-ID, trimmed to the root and the most
// recent ids.
func replyReferences(o *mailbox.Original) []string {
	refs := append([]string(nil), o.References...)
	if len(refs) == 0 && len(o.InReplyTo) == 1 {
		refs = append(refs, o.InReplyTo[0])
	}
	if o.MessageID != "" {
		refs = append(refs, o.MessageID)
	}
	if len(refs) > maxReferences {
		refs = append(refs[:1], refs[len(refs)-maxReferences+1:]...)
	}
	return refs
}

// deliver composes d, sends it, and saves the Sent copy. An error means
// nothing was sent; once the server accepted the message, everything that
// goes wrong afterwards is reported in the result instead. With an
// idempotency key the Sent copy is filed first and decides whether this
// attempt sends at all (sendOnce).
func (o *Outbox) deliver(ctx context.Context, creds credentials.Credentials, d mailmsg.Draft, key string) (*Result, error) {
	if !o.CanSend() {
		return nil, mailerr.New(mailerr.Forbidden, "sending is turned off on this gateway (no SMTP server is configured); nothing was sent")
	}
	rcpts := d.Recipients()
	switch {
	case len(rcpts) == 0:
		return nil, mailerr.New(mailerr.BadInput, "no recipients: give at least one address in to, cc or bcc")
	case len(rcpts) > o.cfg.MaxRecipients:
		return nil, mailerr.Newf(mailerr.BadInput, "too many recipients: %d, at most %d (To, Cc and Bcc together)", len(rcpts), o.cfg.MaxRecipients)
	}
	d.Date = time.Now().Truncate(time.Second)
	if key != "" {
		return o.sendOnce(ctx, creds, d, rcpts, key)
	}
	raw, id, err := mailmsg.Compose(d)
	if err != nil {
		return nil, err
	}
	sent, err := o.submission.Send(ctx, creds, d.From.Email, rcpts, bytes.NewReader(raw))
	if err != nil {
		if mayHaveBeenSent(err) {
			return nil, o.unconfirmed(ctx, creds, d, id, err)
		}
		return nil, err
	}
	res := sentResult(d, id, sent)
	res.SentCopy = o.saveSentCopy(ctx, creds, d, id, false)
	return res, nil
}

// unconfirmed is the error of a send without a key whose whole message
// went out and whose answer was lost: its Sent copy is filed all the same,
// flagged for checking, so that what the error says of it is true, and a
// person sees it.
func (o *Outbox) unconfirmed(ctx context.Context, creds credentials.Credentials, d mailmsg.Draft, id string, err error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var fact string
	switch sc := o.saveSentCopy(cctx, creds, d, id, true); {
	case sc.Saved:
		fact = fmt.Sprintf("; its copy is UID %d in %s, flagged for checking (Message-ID <%s>)", sc.UID, sc.Folder, id)
	default:
		fact = "; " + sc.Reason
	}
	return withFact(err, fact+". Sending it again may deliver it twice: check with the recipients first (a send with an idempotency_key can be retried safely)")
}

// sentResult describes d, sent with Message-ID id.
func sentResult(d mailmsg.Draft, id string, sent *submission.Result) *Result {
	res := &Result{
		MessageID: id, Date: d.Date, From: display(d.From), Subject: d.Subject,
		To: addrStrings(d.To), Cc: addrStrings(d.Cc), Bcc: addrStrings(d.Bcc),
		Accepted: sent.Accepted, InReplyTo: d.InReplyTo, References: d.References, Tags: d.Tags,
	}
	if res.To == nil {
		res.To = []string{}
	}
	for _, r := range sent.Rejected {
		res.Rejected = append(res.Rejected, RejectedRecipient{Address: r.Address, Code: r.Code, Reason: r.Message})
	}
	return res
}

// saveSentCopy appends the sender's copy (with Bcc, same Message-ID and
// Date) to the Sent folder; unconfirmed flags it for checking. The message
// went out (or may have): this runs even if the caller has gone (within
// the call's deadline), and a failure is reported, not returned.
func (o *Outbox) saveSentCopy(ctx context.Context, creds credentials.Credentials, d mailmsg.Draft, id string, unconfirmed bool) SentCopy {
	if strings.EqualFold(o.cfg.SentFolder, mailbox.NoSentFolder) {
		return SentCopy{Reason: "saving a copy is turned off on this gateway (SENT_FOLDER=none), usually because the mail server files sent mail itself"}
	}
	d.MessageID, d.SentCopy = id, true
	raw, _, err := mailmsg.Compose(d)
	if err != nil {
		o.log.ErrorContext(ctx, "composing the Sent copy failed", "err", err)
		return SentCopy{Reason: "the copy could not be composed"}
	}
	sctx, cancel := detached(ctx)
	defer cancel()
	saved, err := o.mailbox.SaveSent(sctx, creds, o.cfg.SentFolder, raw, d.Date, unconfirmed)
	if err != nil {
		o.log.WarnContext(ctx, "saving the Sent copy failed", "err", err)
		if unconfirmed {
			return SentCopy{Reason: "no copy could be saved in the Sent folder: " + mailerr.Message(err)}
		}
		return SentCopy{Reason: "the message was sent, but no copy was saved: " + mailerr.Message(err)}
	}
	return SentCopy{Saved: true, Folder: saved.Folder, UID: saved.UID}
}

func addrStrings(as []mailmsg.Address) []string {
	var out []string
	for _, a := range as {
		out = append(out, display(a))
	}
	return out
}

// display writes an address for people (not for a header field).
func display(a mailmsg.Address) string {
	if a.Name == "" {
		return a.Email
	}
	return a.Name + " <" + a.Email + ">"
}

// SizeText writes a byte count for people: "768 KiB", "1.5 MiB (1572864 bytes)".
func SizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/(1<<10), n)
	}
	return fmt.Sprintf("%d bytes", n)
}
