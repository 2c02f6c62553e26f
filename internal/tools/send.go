package tools

import (
	"context"
	"encoding/base64"
	"fmt"
	"mime"
	"path"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
)

// AttachmentArg is one attachment of the sending tools.
type AttachmentArg struct {
	Filename      string `json:"filename" max:"1000" desc:"File name shown to the recipient, e.g. report.pdf."`
	ContentType   string `json:"content_type" max:"200" desc:"MIME type, e.g. application/pdf; empty: guessed from the file name."`
	ContentBase64 string `json:"content_base64" required:"true" desc:"The file's content, base64-encoded."`
}

type sendArgs struct {
	To             []string        `json:"to" max:"1000" desc:"Recipients, each \"Name <user@example.com>\" or \"user@example.com\"."`
	Cc             []string        `json:"cc" max:"1000" desc:"Carbon-copy recipients."`
	Bcc            []string        `json:"bcc" max:"1000" desc:"Blind-copy recipients: they receive the message, nobody else sees them."`
	Subject        string          `json:"subject" max:"2000" desc:"Subject line (any language)."`
	Text           string          `json:"text" desc:"Plain-text body."`
	HTML           string          `json:"html" desc:"Optional HTML body, sent alongside the text (when text is empty it is made from the HTML)."`
	Attachments    []AttachmentArg `json:"attachments" max:"100" desc:"Files to attach."`
	From           string          `json:"from" max:"1000" desc:"Sender, \"Name <user@example.com>\"; default: the logged-in user."`
	ReplyTo        []string        `json:"reply_to" max:"100" desc:"Addresses replies should go to (Reply-To), if not the sender."`
	Tags           []string        `json:"tags" max:"10" desc:"Short labels (lower-case letters, digits, . _ -; up to 32 characters each) carried in the X-Mailbox-Tags header, for agents that filter their inbox by tag."`
	IdempotencyKey string          `json:"idempotency_key" max:"200" desc:"Optional key (1-200 printable ASCII characters, e.g. a UUID) that makes the send happen at most once: a later call with the same key, from any gateway replica, sends nothing and returns the earlier message with duplicate=true."`
}

type replyArgs struct {
	Folder         string          `json:"folder" max:"1000" desc:"Folder of the message to answer (default INBOX)."`
	UID            uint32          `json:"uid" required:"true" min:"1" desc:"UID of the message to answer, from imap_list_emails or imap_search_emails."`
	Text           string          `json:"text" desc:"Plain-text body of the reply (the original is not quoted)."`
	HTML           string          `json:"html" desc:"Optional HTML body, sent alongside the text."`
	ReplyAll       bool            `json:"reply_all" desc:"Also reply to the original's To and Cc recipients (default false)."`
	Cc             []string        `json:"cc" max:"1000" desc:"Further carbon-copy recipients."`
	Bcc            []string        `json:"bcc" max:"1000" desc:"Blind-copy recipients."`
	Attachments    []AttachmentArg `json:"attachments" max:"100" desc:"Files to attach."`
	From           string          `json:"from" max:"1000" desc:"Sender, \"Name <user@example.com>\"; default: the logged-in user."`
	Tags           []string        `json:"tags" max:"10" desc:"Short labels carried in the X-Mailbox-Tags header (as for smtp_send_email)."`
	IdempotencyKey string          `json:"idempotency_key" max:"200" desc:"Optional key that makes the reply go out at most once (as for smtp_send_email)."`
}

// SendResult is the result of the sending tools.
type SendResult = outbox.Result

var sendEmail = Def[sendArgs, SendResult]{
	Name:  "smtp_send_email",
	Title: "Send email",
	Describe: func(d *Deps) string {
		return fmt.Sprintf("Send an email from the mailbox through its SMTP server, logged in with the same credentials. "+
			"Give at least one recipient in to, cc or bcc (at most %d in all). text is the plain-text body; html, when given, is sent as an alternative (multipart/alternative). "+
			"Bcc recipients get the message but are not named in what anyone receives; the copy saved in the Sent folder keeps the Bcc header so you can see who got one. "+
			"The result gives the Message-ID, the recipients the server accepted (and any it refused) and where the Sent copy was saved. "+
			"%s %s", d.Outbox.MaxRecipients(), idempotencyDescription, attachmentsDescription(d))
	},
	// Not read-only, not destructive (it adds, deletes nothing), not
	// idempotent (a second call sends a second message), open world.
	OpenWorld: true, Sends: true,
	Run: func(ctx context.Context, c *Call, a sendArgs) (SendResult, error) {
		m, err := a.message(c)
		if err != nil {
			return SendResult{}, err
		}
		res, err := c.Outbox.Send(ctx, c.Creds, m)
		return valueOf(res), err
	},
	Approve: sending("Send this email?", func(ctx context.Context, c *Call, a sendArgs) (*outbox.Planned, error) {
		m, err := a.message(c)
		if err != nil {
			return nil, err
		}
		return c.Outbox.PlanSend(ctx, c.Creds, m)
	}, false, func(a sendArgs) string { return a.IdempotencyKey }),
	Text: sendText,
	Example: map[string]any{"to": []any{"Bob <bob@demo.test>"}, "subject": "Quarterly report",
		"text":        "Hi Bob,\n\nthe report is attached.\n\nAlice",
		"attachments": []any{map[string]any{"filename": "report.txt", "content_base64": "UTMgcmV2ZW51ZTogdXAgMTIlCg=="}}},
}

var replyEmail = Def[replyArgs, SendResult]{
	Name:  "smtp_reply_email",
	Title: "Reply to email",
	Describe: func(d *Deps) string {
		return fmt.Sprintf("Reply to a message of the mailbox. The reply goes to the original's Reply-To, else its sender; with reply_all also to its To and Cc (without your own address, without duplicates). "+
			"The subject gets exactly one \"Re: \", and In-Reply-To and References keep the conversation threaded. The original is read without marking it as read, and gets the Answered flag once the reply went out. "+
			"A copy is saved in the Sent folder. At most %d recipients in all. %s %s", d.Outbox.MaxRecipients(), idempotencyDescription, attachmentsDescription(d))
	},
	OpenWorld: true, Sends: true,
	Run: func(ctx context.Context, c *Call, a replyArgs) (SendResult, error) {
		r, err := a.reply(c)
		if err != nil {
			return SendResult{}, err
		}
		res, err := c.Outbox.Reply(ctx, c.Creds, r)
		return valueOf(res), err
	},
	Approve: sending("Send this reply?", func(ctx context.Context, c *Call, a replyArgs) (*outbox.Planned, error) {
		r, err := a.reply(c)
		if err != nil {
			return nil, err
		}
		return c.Outbox.PlanReply(ctx, c.Creds, r)
	}, false, func(a replyArgs) string { return a.IdempotencyKey }),
	Text:    sendText,
	Example: map[string]any{"folder": "INBOX", "uid": 0, "text": "Thanks, the parcel arrived today."},
}

func (a sendArgs) message(c *Call) (outbox.Message, error) {
	atts, err := decodeAttachments(c.Outbox.AttachmentLimit(), a.Attachments)
	return outbox.Message{From: a.From, To: a.To, Cc: a.Cc, Bcc: a.Bcc, ReplyTo: a.ReplyTo,
		Subject: a.Subject, Text: a.Text, HTML: a.HTML, Attachments: atts, Tags: a.Tags, IdempotencyKey: a.IdempotencyKey}, err
}

func (a replyArgs) reply(c *Call) (outbox.Reply, error) {
	atts, err := decodeAttachments(c.Outbox.AttachmentLimit(), a.Attachments)
	return outbox.Reply{Folder: a.Folder, UID: a.UID, All: a.ReplyAll, From: a.From,
		Cc: a.Cc, Bcc: a.Bcc, Text: a.Text, HTML: a.HTML, Attachments: atts, Tags: a.Tags, IdempotencyKey: a.IdempotencyKey}, err
}

// sending is the Approve of a tool that sends: the message is composed
// exactly as plan makes it (what the tool would send) and held as a draft
// (held: it is a draft already, held where it is); the person sees that
// draft, and that draft is what goes out.
func sending[A any](title string, plan func(ctx context.Context, c *Call, a A) (*outbox.Planned, error), held bool, key func(A) string) *Approve[A] {
	return &Approve[A]{Kind: access.ApproveSend, Key: key, Title: title, Send: plan, Held: held}
}

// idempotencyDescription tells every sending tool's reader about
// idempotency_key.
const idempotencyDescription = "Without idempotency_key every call sends a new message: do not repeat a call that succeeded. " +
	"With one, a repeated call (a retry after a timeout, on any gateway replica) sends nothing and returns the message sent the first time (duplicate=true); " +
	"this needs the Sent folder, where the copy is filed before sending and serves as the record. " +
	"A failed call says which of two things happened: \"nothing was sent\" (safe to send again), or, only when the whole message reached the server and its answer was lost, \"may have been sent\": " +
	"the Sent copy is then filed flagged for checking (\\Flagged, $MailboxMcpUnconfirmed); check with the recipients before sending again without a key, while a retry with the key sends nothing and says what is known."

func valueOf[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// defaultMaxRequestBytes is MAX_REQUEST_BYTES' default, for Deps that do
// not say.
const defaultMaxRequestBytes = 1 << 20

// attachmentsDescription states the effective attachment cap and why.
func attachmentsDescription(d *Deps) string {
	req := d.MaxRequestBytes
	if req <= 0 {
		req = defaultMaxRequestBytes
	}
	return fmt.Sprintf("attachments: files, each with filename, content_type (guessed from the file name when empty) and content_base64 (the file's bytes, standard base64); at most %s in total, decoded. "+
		"Base64 makes a file 4/3 larger and the whole request (text, HTML and attachments together) may be at most %s, so that is the practical limit; the server operator can raise MAX_REQUEST_BYTES and MAX_ATTACHMENT_BYTES together.",
		outbox.SizeText(d.Outbox.AttachmentLimit()), outbox.SizeText(req))
}

// decodeAttachments decodes the base64 of each attachment, refusing before
// decoding what cannot fit in limit.
func decodeAttachments(limit int64, in []AttachmentArg) ([]outbox.Attachment, error) {
	var total int64
	out := make([]outbox.Attachment, 0, len(in))
	for i, a := range in {
		name := fmt.Sprintf("attachments[%d]", i)
		if a.Filename != "" {
			name += fmt.Sprintf(" (%s)", mailmsg.SanitizeLine(a.Filename))
		}
		if est := int64(len(a.ContentBase64)) / 4 * 3; total+est > limit+3 {
			return nil, mailerr.Newf(mailerr.TooLarge, "%s: the attachments exceed the limit of %s in total; send large files as a link instead", name, outbox.SizeText(limit))
		}
		data, err := decodeBase64(a.ContentBase64)
		if err != nil {
			return nil, badArg("%s: content_base64 must be base64 (%v)", name, err)
		}
		total += int64(len(data))
		if total > limit {
			return nil, mailerr.Newf(mailerr.TooLarge, "%s: the attachments exceed the limit of %s in total; send large files as a link instead", name, outbox.SizeText(limit))
		}
		ct := strings.TrimSpace(a.ContentType)
		if ct == "" {
			ct = mime.TypeByExtension(strings.ToLower(path.Ext(a.Filename)))
		}
		out = append(out, outbox.Attachment{Filename: a.Filename, ContentType: ct, Data: data})
	}
	return out, nil
}

// decodeBase64 accepts standard base64 with or without padding and line
// breaks, and the URL-safe alphabet.
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	if s == "" {
		return nil, fmt.Errorf("it is empty")
	}
	var firstErr error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b, err := enc.Strict().DecodeString(s)
		if err == nil {
			return b, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

func sendText(r SendResult) string {
	var b strings.Builder
	if r.Duplicate {
		fmt.Fprintf(&b, "Nothing sent: a message was already sent with idempotency_key %q on %s: %q (Message-ID <%s>) from %s.\n",
			r.IdempotencyKey, r.Date.Format(time.RFC1123Z), r.Subject, r.MessageID, r.From)
	} else {
		fmt.Fprintf(&b, "Sent %q (Message-ID <%s>) from %s.\n", r.Subject, r.MessageID, r.From)
	}
	fmt.Fprintf(&b, "To: %s\n", strings.Join(r.To, ", "))
	if len(r.Cc) > 0 {
		fmt.Fprintf(&b, "Cc: %s\n", strings.Join(r.Cc, ", "))
	}
	if len(r.Bcc) > 0 {
		fmt.Fprintf(&b, "Bcc: %s\n", strings.Join(r.Bcc, ", "))
	}
	if !r.Duplicate {
		fmt.Fprintf(&b, "Accepted by the mail server for: %s\n", strings.Join(r.Accepted, ", "))
	}
	for _, x := range r.Rejected {
		kind := "permanently"
		if x.Code/100 == 4 {
			kind = "temporarily (retry later)"
		}
		fmt.Fprintf(&b, "NOT sent to %s: refused %s (%d %s)\n", x.Address, kind, x.Code, x.Reason)
	}
	if f := r.Forwarded; f != nil {
		fmt.Fprintf(&b, "Forwarded uid %d of %s with %s.\n", f.UID, f.Folder, plural(f.Attachments, "attachment"))
	}
	if dr := r.Draft; dr != nil {
		if dr.Removed {
			fmt.Fprintf(&b, "The draft (uid %d in %s) was removed.\n", dr.UID, dr.Folder)
		} else {
			fmt.Fprintf(&b, "The draft (uid %d in %s) could not be removed: %s\n", dr.UID, dr.Folder, dr.RemoveError)
		}
	}
	if o := r.Original; o != nil {
		if o.Answered {
			fmt.Fprintf(&b, "The original (uid %d in %s) is now flagged as answered.\n", o.UID, o.Folder)
		} else {
			fmt.Fprintf(&b, "The original (uid %d in %s) could not be flagged as answered: %s\n", o.UID, o.Folder, o.AnsweredError)
		}
	}
	if r.SentCopy.Saved {
		if r.Duplicate {
			fmt.Fprintf(&b, "Its copy is in %s", r.SentCopy.Folder)
		} else {
			fmt.Fprintf(&b, "A copy was saved in %s", r.SentCopy.Folder)
		}
		if r.SentCopy.UID != 0 {
			fmt.Fprintf(&b, " (uid %d)", r.SentCopy.UID)
		}
		b.WriteString(".\n")
	} else {
		fmt.Fprintf(&b, "No copy in the Sent folder: %s\n", r.SentCopy.Reason)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "[warning: %s]\n", w)
	}
	return b.String()
}
