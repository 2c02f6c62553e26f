package outbox

import (
	"context"
	"fmt"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Forward sends message UID of Folder on to new recipients.
type Forward struct {
	Folder      string
	UID         uint32
	From        string // "" is the login name
	To, Cc, Bcc []string
	// Text is the sender's own words, above the forwarded message.
	Text string
	// IncludeAttachments carries the original's attachments.
	IncludeAttachments bool
	Tags               []string
	IdempotencyKey     string
}

// ForwardedFrom is the message a forward carried.
type ForwardedFrom struct {
	Folder      string `json:"folder" desc:"its folder"`
	UID         uint32 `json:"uid" desc:"its UID"`
	MessageID   string `json:"message_id,omitempty" desc:"its Message-ID"`
	Attachments int    `json:"attachments" desc:"how many of its attachments were carried"`
}

// Forward sends f: subject "Fwd: " and the original's (one "Fwd: "
// only), the text above a block quoting the original's From, Date,
// Subject, To and Cc, then the original's text (HTML converted as a read
// converts it), and its attachments when asked (all of them within the
// attachment limit, or the forward is refused). References names the
// original, as mail clients thread a forward. The original is read without
// changing it.
func (o *Outbox) Forward(ctx context.Context, creds credentials.Credentials, f Forward) (*Result, error) {
	if res, err := o.prior(ctx, creds, f.IdempotencyKey); res != nil || err != nil {
		return res, err
	}
	p, err := o.PlanForward(ctx, creds, f)
	if err != nil {
		return nil, err
	}
	res, err := o.deliver(ctx, creds, p.d, f.IdempotencyKey)
	if err != nil || res.Duplicate {
		return res, err
	}
	res.Warnings = append(p.Warnings, res.Warnings...)
	res.Forwarded = p.forwarded
	return res, nil
}

// PlanForward composes f exactly as Forward would send it (reading the
// original without changing it), without sending.
func (o *Outbox) PlanForward(ctx context.Context, creds credentials.Credentials, f Forward) (*Planned, error) {
	var d mailmsg.Draft
	var err error
	if d.From, err = o.sender(creds, f.From); err != nil {
		return nil, err
	}
	if d.Tags, err = mailmsg.CheckTags(f.Tags); err != nil {
		return nil, err
	}
	for _, x := range []struct {
		name string
		in   []string
		out  *[]mailmsg.Address
	}{{"to", f.To, &d.To}, {"cc", f.Cc, &d.Cc}, {"bcc", f.Bcc, &d.Bcc}} {
		if *x.out, err = parseAddresses(x.name, x.in); err != nil {
			return nil, err
		}
	}
	if len(d.Recipients()) == 0 {
		return nil, mailerr.New(mailerr.BadInput, "no recipients: give at least one address in to, cc or bcc")
	}
	limit := int64(-1)
	if f.IncludeAttachments {
		limit = o.cfg.MaxAttachmentBytes
	}
	src, err := o.mailbox.ReadForForward(ctx, creds, f.Folder, f.UID, limit)
	if err != nil {
		return nil, err
	}
	m := src.Message
	if src.FilesTooLarge {
		return nil, mailerr.Newf(mailerr.TooLarge, "the original's attachments take about %s, more than the limit of %s for one message; forward it with include_attachments=false to send its text without them; nothing was sent",
			SizeText(src.FilesSize), SizeText(o.cfg.MaxAttachmentBytes))
	}
	var warnings []string
	if m.Truncated {
		warnings = append(warnings, fmt.Sprintf("the original's text is longer than %d characters; the forward carries the first %d", mailbox.MaxMaxChars, mailbox.MaxMaxChars))
	}
	warnings = append(warnings, m.Warnings...)
	d.Subject = mailmsg.ForwardSubject(m.Subject)
	d.Text = mailmsg.ForwardedBody(f.Text, mailmsg.Forwarded{
		From: mailAddresses(m.From), To: mailAddresses(m.To), Cc: mailAddresses(m.Cc), Date: m.Date, Subject: m.Subject,
	}, m.Text)
	if mailmsg.ValidMessageID(m.MessageID) {
		d.References = []string{m.MessageID}
	}
	for _, file := range src.Files {
		d.Attachments = append(d.Attachments, mailmsg.OutAttachment{Filename: file.Filename, ContentType: file.ContentType, Data: file.Data})
	}
	p, err := o.planned(d, warnings)
	if p != nil {
		p.forwarded = &ForwardedFrom{Folder: m.Folder, UID: m.UID, MessageID: m.MessageID, Attachments: len(src.Files)}
	}
	return p, err
}

func mailAddresses(as []mailbox.Address) []mailmsg.Address {
	out := make([]mailmsg.Address, 0, len(as))
	for _, a := range as {
		out = append(out, mailmsg.Address{Name: a.Name, Email: a.Email})
	}
	return out
}
