package outbox

// Drafts: a message composed as a send would be, stored in the Drafts
// folder instead of sent (no SMTP server needed), and later sent from
// there through the same checks and bookkeeping as any send.

import (
	"context"
	"strconv"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Draft is a message to save as a draft. Unlike a send, every field may be
// empty but the sender.
type Draft struct {
	From                string // "" is the login name
	To, Cc, Bcc         []string
	Subject, Text, HTML string
	Attachments         []Attachment
	Tags                []string
	// InReplyToUID, when not 0, threads the draft as a reply to that
	// message of InReplyToFolder: In-Reply-To and References as a reply
	// has them, "Re: " and the original's subject when Subject is empty,
	// and the original's sender as To when no recipient is given.
	InReplyToFolder string
	InReplyToUID    uint32
	// ReplaceUID, when not 0, is an earlier draft this one replaces.
	ReplaceUID uint32
}

// SavedDraft is the outcome of SaveDraft.
type SavedDraft struct {
	Folder      string    `json:"folder" desc:"the Drafts folder"`
	UID         uint32    `json:"uid" desc:"the draft's UID (0 when the server does not say)"`
	UIDValidity uint32    `json:"uid_validity" desc:"the Drafts folder's UIDVALIDITY"`
	MessageID   string    `json:"message_id" desc:"the draft's Message-ID, without angle brackets"`
	Date        time.Time `json:"date" desc:"the draft's Date"`
	From        string    `json:"from" desc:"the sender"`
	To          []string  `json:"to" desc:"the To recipients"`
	Cc          []string  `json:"cc,omitempty" desc:"the Cc recipients"`
	Bcc         []string  `json:"bcc,omitempty" desc:"the Bcc recipients (kept in the draft; never sent as a header)"`
	Subject     string    `json:"subject" desc:"the subject"`
	Attachments int       `json:"attachments" desc:"how many files are attached"`
	InReplyTo   string    `json:"in_reply_to,omitempty" desc:"threaded draft: the Message-ID it answers"`
	References  []string  `json:"references,omitempty" desc:"threaded draft: the thread's Message-IDs, oldest first"`
	// Replaced is the UID of the draft this one replaced.
	Replaced uint32   `json:"replaced_uid,omitempty" desc:"the UID of the earlier draft that was removed"`
	Warnings []string `json:"warnings,omitempty" desc:"things that did not go as asked but did not stop the draft"`
}

// SaveDraft composes m and appends it to the Drafts folder with \Draft
// and \Seen. The draft keeps its Bcc header (it is the user's own copy;
// a send never writes one). With ReplaceUID the earlier draft is removed
// once the new one is stored; it must be a draft in the Drafts folder, or
// nothing is saved.
func (o *Outbox) SaveDraft(ctx context.Context, creds credentials.Credentials, m Draft) (*SavedDraft, error) {
	var d mailmsg.Draft
	var err error
	if d.From, err = o.sender(creds, m.From); err != nil {
		return nil, err
	}
	if d.Attachments, err = o.attachments(m.Attachments); err != nil {
		return nil, err
	}
	if d.Tags, err = mailmsg.CheckTags(m.Tags); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		in   []string
		out  *[]mailmsg.Address
	}{{"to", m.To, &d.To}, {"cc", m.Cc, &d.Cc}, {"bcc", m.Bcc, &d.Bcc}} {
		if *f.out, err = parseAddresses(f.name, f.in); err != nil {
			return nil, err
		}
	}
	d.Subject, d.Text, d.HTML = m.Subject, m.Text, m.HTML
	var warnings []string
	if m.InReplyToUID != 0 {
		orig, err := o.mailbox.ReplyInfo(ctx, creds, m.InReplyToFolder, m.InReplyToUID)
		if err != nil {
			return nil, err
		}
		d.InReplyTo, d.References = orig.MessageID, replyReferences(orig)
		if d.InReplyTo == "" {
			warnings = append(warnings, "the original message has no Message-ID, so the draft cannot be threaded to it")
		}
		if d.Subject == "" {
			d.Subject = mailmsg.ReplySubject(orig.Subject)
		}
		if len(d.To) == 0 && len(d.Cc) == 0 && len(d.Bcc) == 0 {
			var w []string
			d.To, _, w = replyRecipients(orig, selfAddresses(creds, d.From), false, nil)
			warnings = append(warnings, w...)
		}
	}
	if n := len(d.Recipients()); n > o.cfg.MaxRecipients {
		return nil, mailerr.Newf(mailerr.BadInput, "too many recipients: %d, at most %d (To, Cc and Bcc together)", n, o.cfg.MaxRecipients)
	}
	d.Date = time.Now().Truncate(time.Second)
	d.SentCopy = true // the user's own copy: with its Bcc header
	raw, id, err := mailmsg.Compose(d)
	if err != nil {
		return nil, err
	}
	saved, err := o.mailbox.SaveDraft(ctx, creds, mailbox.SaveDraftOptions{Raw: raw, MessageID: id, Date: d.Date, ReplaceUID: m.ReplaceUID})
	if err != nil {
		return nil, err
	}
	out := &SavedDraft{
		Folder: saved.Folder, UID: saved.UID, UIDValidity: saved.UIDValidity, MessageID: id,
		Date: d.Date, From: display(d.From), Subject: d.Subject,
		To: addrStrings(d.To), Cc: addrStrings(d.Cc), Bcc: addrStrings(d.Bcc), Attachments: len(d.Attachments),
		InReplyTo: d.InReplyTo, References: d.References, Replaced: saved.Replaced, Warnings: warnings,
	}
	if out.To == nil {
		out.To = []string{}
	}
	if m.ReplaceUID != 0 && saved.Replaced == 0 {
		out.Warnings = append(out.Warnings, "the new draft was saved, but the earlier draft (UID "+uidText(m.ReplaceUID)+") is still there: "+saved.ReplaceError)
	}
	return out, nil
}

// DraftSend is a draft to send.
type DraftSend struct {
	UID            uint32 // in the Drafts folder
	IdempotencyKey string
	// MessageID, when set, is the Message-ID the draft must have: the one
	// a person approved (a draft changed since is not sent).
	MessageID string
}

// SentDraft is what became of the draft a send took its message from.
type SentDraft struct {
	Folder      string `json:"folder" desc:"the Drafts folder"`
	UID         uint32 `json:"uid" desc:"the draft's UID"`
	Removed     bool   `json:"removed" desc:"true when the draft was removed after sending"`
	RemoveError string `json:"remove_error,omitempty" desc:"why the draft could not be removed"`
}

// draftSlack is what a draft may hold beyond its attachments' base64
// (4/3 of their size): header, text and HTML.
const draftSlack = 4 << 20

// SendDraft sends draft s.UID of the Drafts folder: recipients from its
// To, Cc and Bcc (Bcc never sent as a header), its subject, body, threading
// and attachments, composed afresh with the same checks as any send (the
// sender policy included). Once the message went out the draft is removed
// (UID EXPUNGE of exactly it) and, for a reply draft, the original found
// by its Message-ID in INBOX is flagged \Answered.
func (o *Outbox) SendDraft(ctx context.Context, creds credentials.Credentials, s DraftSend) (*Result, error) {
	if res, err := o.prior(ctx, creds, s.IdempotencyKey); res != nil || err != nil {
		return res, err
	}
	p, err := o.PlanDraft(ctx, creds, s.UID)
	if err != nil {
		return nil, err
	}
	if s.MessageID != "" && p.draftMessageID != s.MessageID {
		return nil, mailerr.Newf(mailerr.NotFound, "draft UID %d is not the message that was approved (it was changed or replaced); nothing was sent", s.UID).About(mailerr.SubjectMessage)
	}
	d := p.d
	d.MessageID, d.SentCopy, d.Date = "", false, time.Time{}
	res, err := o.deliver(ctx, creds, d, s.IdempotencyKey)
	if err != nil || res.Duplicate {
		return res, err
	}
	loaded := p.draft
	res.Warnings = append(p.Warnings, res.Warnings...)
	// The message went out: tidy up even if the caller has gone.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	res.Draft = &SentDraft{Folder: loaded.Folder, UID: loaded.UID}
	if err := o.mailbox.DeleteDraft(actx, creds, loaded.DraftRef); err != nil {
		o.log.WarnContext(ctx, "could not remove the sent draft", "err", err)
		res.Draft.RemoveError = mailerr.Message(err)
	} else {
		res.Draft.Removed = true
	}
	if d.InReplyTo != "" {
		res.Original = o.markAnsweredByID(actx, creds, "INBOX", d.InReplyTo)
	}
	return res, nil
}

// PlanDraft reads draft uid of the Drafts folder and composes it exactly
// as SendDraft would send it, with the same checks, without sending.
func (o *Outbox) PlanDraft(ctx context.Context, creds credentials.Credentials, uid uint32) (*Planned, error) {
	if !o.CanSend() {
		return nil, mailerr.New(mailerr.Forbidden, "sending is turned off on this gateway (no SMTP server is configured); nothing was sent")
	}
	loaded, err := o.mailbox.LoadDraft(ctx, creds, uid, o.cfg.MaxAttachmentBytes/3*4+draftSlack)
	if err != nil {
		return nil, err
	}
	p, err := mailmsg.ParseDraft(loaded.Raw)
	if err != nil {
		return nil, mailerr.Wrap(mailerr.KindOf(err), err, mailerr.Message(err)+"; nothing was sent")
	}
	d := p.Draft
	from := ""
	if p.From.Email != "" {
		from = p.From.String()
	}
	if d.From, err = o.sender(creds, from); err != nil {
		return nil, err
	}
	if err := needBody(d.Text, d.HTML); err != nil {
		return nil, mailerr.Newf(mailerr.BadInput, "draft UID %d has no text: a message needs a body; nothing was sent", uid)
	}
	var total int64
	for _, a := range d.Attachments {
		total += int64(len(a.Data))
	}
	if total > o.cfg.MaxAttachmentBytes {
		return nil, mailerr.Newf(mailerr.TooLarge, "the draft's attachments take %s, more than the limit of %s for one message; nothing was sent", SizeText(total), SizeText(o.cfg.MaxAttachmentBytes))
	}
	if d.Tags, err = mailmsg.CheckTags(d.Tags); err != nil {
		return nil, err
	}
	planned, err := o.planned(d, p.Warnings)
	if planned != nil {
		planned.draft, planned.draftMessageID = loaded, p.MessageID
	}
	return planned, err
}

// markAnsweredByID flags the message with Message-ID id in folder
// \Answered, when there is exactly one; nil when there is none to flag.
func (o *Outbox) markAnsweredByID(ctx context.Context, creds credentials.Credentials, folder, id string) *Replied {
	loc, err := o.mailbox.FindMessageID(ctx, creds, folder, id)
	if err != nil || loc == nil {
		if err != nil {
			o.log.WarnContext(ctx, "could not look for the original of a reply draft", "err", err)
		}
		return nil
	}
	r := &Replied{Folder: folder, UID: loc.UID, MessageID: id}
	if err := o.mailbox.MarkAnswered(ctx, creds, folder, loc.UID, loc.UIDValidity); err != nil {
		r.AnsweredError = mailerr.Message(err)
	} else {
		r.Answered = true
	}
	return r
}

func uidText(uid uint32) string { return strconv.FormatUint(uint64(uid), 10) }
