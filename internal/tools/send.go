package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"mime"
	"path"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// DefaultMaxRecipients applies when Deps.MaxRecipients is zero.
const DefaultMaxRecipients = 100

// maxReferences caps the References of a reply: the thread's root and the
// most recent ids, as mail clients trim long threads.
const maxReferences = 20

// AttachmentArg is one attachment of smtp_send_email / smtp_reply_email.
type AttachmentArg struct {
	Filename      string `json:"filename"`
	ContentType   string `json:"content_type"`
	ContentBase64 string `json:"content_base64"`
}

type sendArgs struct {
	Credentials string          `json:"credentials"`
	From        string          `json:"from"`
	ReplyTo     []string        `json:"reply_to"`
	To          []string        `json:"to"`
	Cc          []string        `json:"cc"`
	Bcc         []string        `json:"bcc"`
	Subject     string          `json:"subject"`
	Text        string          `json:"text"`
	HTML        string          `json:"html"`
	Attachments []AttachmentArg `json:"attachments"`
}

type replyArgs struct {
	Credentials string          `json:"credentials"`
	Folder      string          `json:"folder"`
	UID         int64           `json:"uid"`
	ReplyAll    bool            `json:"reply_all"`
	From        string          `json:"from"`
	Cc          []string        `json:"cc"`
	Bcc         []string        `json:"bcc"`
	Text        string          `json:"text"`
	HTML        string          `json:"html"`
	Attachments []AttachmentArg `json:"attachments"`
}

// SendResult is the structured result of smtp_send_email and
// smtp_reply_email.
type SendResult struct {
	MessageID  string              `json:"message_id" jsonschema_description:"Message-ID of the sent message, without angle brackets"`
	From       string              `json:"from"`
	To         []string            `json:"to"`
	Cc         []string            `json:"cc,omitempty"`
	Bcc        []string            `json:"bcc,omitempty"`
	Subject    string              `json:"subject"`
	Accepted   []string            `json:"accepted" jsonschema_description:"recipients the mail server accepted the message for"`
	Rejected   []RejectedRecipient `json:"rejected,omitempty" jsonschema_description:"recipients the mail server refused; the message was not sent to them"`
	InReplyTo  string              `json:"in_reply_to,omitempty"`
	References []string            `json:"references,omitempty"`
	SentCopy   SentCopyResult      `json:"sent_copy" jsonschema_description:"whether a copy was saved in the Sent folder, where, or why not"`
	Original   *RepliedMessage     `json:"original,omitempty" jsonschema_description:"reply only: the message answered"`
	Warnings   []string            `json:"warnings,omitempty"`
}

// RejectedRecipient is a recipient the server refused.
type RejectedRecipient struct {
	Address string `json:"address"`
	Code    int    `json:"code" jsonschema_description:"SMTP reply code: 5xx permanent, 4xx temporary"`
	Reason  string `json:"reason"`
}

// SentCopyResult says where the copy of a sent message went.
type SentCopyResult struct {
	Saved  bool   `json:"saved"`
	Folder string `json:"folder,omitempty"`
	UID    uint32 `json:"uid,omitempty"`
	Reason string `json:"reason,omitempty" jsonschema_description:"why no copy was saved"`
}

// RepliedMessage is the message a reply answered.
type RepliedMessage struct {
	Folder        string `json:"folder"`
	UID           uint32 `json:"uid"`
	MessageID     string `json:"message_id,omitempty"`
	Answered      bool   `json:"answered" jsonschema_description:"true when the \\Answered flag was set on it"`
	AnsweredError string `json:"answered_error,omitempty"`
}

func (d Deps) maxRecipients() int {
	if d.MaxRecipients > 0 {
		return d.MaxRecipients
	}
	return DefaultMaxRecipients
}

// defaultMaxRequestBytes is MAX_REQUEST_BYTES' default, for Deps that do
// not say.
const defaultMaxRequestBytes = 1 << 20

func (d Deps) maxRequestBytes() int64 {
	if d.MaxRequestBytes > 0 {
		return d.MaxRequestBytes
	}
	return defaultMaxRequestBytes
}

// attachmentLimit is MaxAttachmentBytes, else 3/4 of the request limit
// (base64 makes 3 bytes 4 characters).
func (d Deps) attachmentLimit() int64 {
	if d.MaxAttachmentBytes > 0 {
		return d.MaxAttachmentBytes
	}
	return d.maxRequestBytes() / 4 * 3
}

// sizeText writes a byte count for people: "768 KiB (786432 bytes)".
func sizeText(n int64) string {
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

// attachmentsDescription states the effective attachment cap and why.
func (d Deps) attachmentsDescription() string {
	s := fmt.Sprintf("Files to attach: filename, content_type (guessed from the file name when empty) and content_base64 (the file's bytes, standard base64). At most %s in total, decoded.", sizeText(d.attachmentLimit()))
	return s + fmt.Sprintf(" Base64 makes a file 4/3 larger and the whole request (text, HTML and attachments together) may be at most %s, so that is the practical limit; the server operator can raise MAX_REQUEST_BYTES and MAX_ATTACHMENT_BYTES together.", sizeText(d.maxRequestBytes()))
}

func addressListOption(name, desc string) mcp.ToolOption {
	return mcp.WithArray(name, mcp.Description(desc), mcp.WithStringItems(mcp.MaxLength(2000)))
}

func attachmentsOption(d Deps) mcp.ToolOption {
	return mcp.WithArray("attachments", mcp.Description(d.attachmentsDescription()), mcp.Items(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"filename":       map[string]any{"type": "string", "description": "File name shown to the recipient, e.g. report.pdf", "maxLength": 1000},
			"content_type":   map[string]any{"type": "string", "description": "MIME type, e.g. application/pdf; empty: guessed from the file name", "maxLength": 200},
			"content_base64": map[string]any{"type": "string", "description": "The file's content, base64-encoded"},
		},
		"required": []string{"content_base64"},
	}))
}

func sendAnnotations(title string) mcp.ToolOption {
	// Not read-only, not destructive (it adds, deletes nothing), not
	// idempotent (a second call sends a second message), open world.
	return annotations(title, false, false, false, true)
}

// SendEmail is smtp_send_email.
func SendEmail(d Deps) Tool {
	def := mcp.NewTool("smtp_send_email",
		mcp.WithDescription(fmt.Sprintf("Send an email from the mailbox through its SMTP server, logged in with the same credentials. "+
			"Give at least one recipient in to, cc or bcc (at most %d in all). text is the plain-text body; html, when given, is sent as an alternative (multipart/alternative). "+
			"Bcc recipients get the message but are not named in what anyone receives; the copy saved in the Sent folder keeps the Bcc header so you can see who got one. "+
			"The result gives the Message-ID, the recipients the server accepted (and any it refused) and where the Sent copy was saved. "+
			"Every call sends a new message: do not repeat a call that succeeded. %s", d.maxRecipients(), d.attachmentsDescription())),
		credentialsArg(),
		addressListOption("to", `Recipients, each "Name <user@example.com>" or "user@example.com".`),
		addressListOption("cc", "Carbon-copy recipients."),
		addressListOption("bcc", "Blind-copy recipients: they receive the message, nobody else sees them."),
		mcp.WithString("subject", mcp.Description("Subject line (any language)."), mcp.MaxLength(2000)),
		mcp.WithString("text", mcp.Description("Plain-text body.")),
		mcp.WithString("html", mcp.Description("Optional HTML body, sent alongside the text (when text is empty it is made from the HTML).")),
		attachmentsOption(d),
		mcp.WithString("from", mcp.Description(`Sender, "Name <user@example.com>"; default: the logged-in user. The mail server may refuse addresses the account may not send as.`), mcp.MaxLength(1000)),
		addressListOption("reply_to", "Addresses replies should go to (Reply-To), if not the sender."),
		mcp.WithOutputSchema[SendResult](),
		sendAnnotations("Send email"),
	)
	return Tool{Def: def, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := bind[sendArgs](req)
		if err != nil {
			return d.fail(ctx, err), nil
		}
		creds, err := d.credentialsFor(ctx, args.Credentials)
		if err != nil {
			return d.fail(ctx, err), nil
		}
		draft, err := d.draft(creds, args.From, args.Subject, args.Text, args.HTML, args.Attachments)
		if err != nil {
			return d.fail(ctx, err), nil
		}
		for _, f := range []struct {
			name string
			in   []string
			out  *[]mailmsg.Address
		}{{"to", args.To, &draft.To}, {"cc", args.Cc, &draft.Cc}, {"bcc", args.Bcc, &draft.Bcc}, {"reply_to", args.ReplyTo, &draft.ReplyTo}} {
			if *f.out, err = parseAddresses(f.name, f.in); err != nil {
				return d.fail(ctx, err), nil
			}
		}
		res, err := d.deliver(ctx, creds, draft)
		if err != nil {
			return d.fail(ctx, err), nil
		}
		return ok(res, sendText(res)), nil
	}}
}

// ReplyEmail is smtp_reply_email.
func ReplyEmail(d Deps) Tool {
	def := mcp.NewTool("smtp_reply_email",
		mcp.WithDescription(fmt.Sprintf("Reply to a message of the mailbox. The reply goes to the original's Reply-To, else its sender; with reply_all also to its To and Cc (without your own address, without duplicates). "+
			"The subject gets exactly one \"Re: \", and In-Reply-To and References keep the conversation threaded. The original is read without marking it as read, and gets the Answered flag once the reply went out. "+
			"A copy is saved in the Sent folder. At most %d recipients in all. Every call sends a new message: do not repeat a call that succeeded. %s", d.maxRecipients(), d.attachmentsDescription())),
		credentialsArg(),
		mcp.WithString("folder", mcp.Description("Folder of the message to answer (default INBOX)."), mcp.MaxLength(1000)),
		mcp.WithNumber("uid", mcp.Required(), mcp.Description("UID of the message to answer, from imap_list_emails or imap_search_emails."), mcp.Min(1)),
		mcp.WithString("text", mcp.Description("Plain-text body of the reply (the original is not quoted).")),
		mcp.WithString("html", mcp.Description("Optional HTML body, sent alongside the text.")),
		mcp.WithBoolean("reply_all", mcp.Description("Also reply to the original's To and Cc recipients (default false).")),
		addressListOption("cc", "Further carbon-copy recipients."),
		addressListOption("bcc", "Blind-copy recipients."),
		attachmentsOption(d),
		mcp.WithString("from", mcp.Description(`Sender, "Name <user@example.com>"; default: the logged-in user.`), mcp.MaxLength(1000)),
		mcp.WithOutputSchema[SendResult](),
		sendAnnotations("Reply to email"),
	)
	return Tool{Def: def, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := bind[replyArgs](req)
		if err != nil {
			return d.fail(ctx, err), nil
		}
		creds, err := d.messageCaller(ctx, args.UID, args.Credentials)
		if err != nil {
			return d.fail(ctx, err), nil
		}
		draft, err := d.draft(creds, args.From, "", args.Text, args.HTML, args.Attachments)
		if err != nil {
			return d.fail(ctx, err), nil
		}
		extraCc, err := parseAddresses("cc", args.Cc)
		if err != nil {
			return d.fail(ctx, err), nil
		}
		if draft.Bcc, err = parseAddresses("bcc", args.Bcc); err != nil {
			return d.fail(ctx, err), nil
		}
		orig, err := d.Mailbox.ReplyInfo(ctx, creds, args.Folder, uint32(args.UID))
		if err != nil {
			return d.fail(ctx, err), nil
		}
		var warnings []string
		draft.To, draft.Cc, warnings = replyRecipients(orig, selfAddresses(creds, draft.From), args.ReplyAll, extraCc)
		draft.Subject = mailmsg.ReplySubject(orig.Subject)
		draft.InReplyTo = orig.MessageID
		draft.References = replyReferences(orig)
		if len(draft.To) == 0 && len(draft.Cc) == 0 && len(draft.Bcc) == 0 {
			return d.fail(ctx, badInput("the original message names nobody to reply to (no valid Reply-To, From or recipients); use smtp_send_email with explicit recipients")), nil
		}

		res, err := d.deliver(ctx, creds, draft)
		if err != nil {
			return d.fail(ctx, err), nil
		}
		res.Warnings = append(warnings, res.Warnings...)
		res.Original = &RepliedMessage{Folder: orig.Folder, UID: orig.UID, MessageID: orig.MessageID}
		// The reply went out: flag the original even if the caller has gone.
		if err := d.Mailbox.MarkAnswered(context.WithoutCancel(ctx), creds, orig.Folder, orig.UID, orig.UIDValidity); err != nil {
			d.Log.WarnContext(ctx, "could not flag the original as answered", "err", err)
			res.Original.AnsweredError = mailerr.Message(err)
		} else {
			res.Original.Answered = true
		}
		return ok(res, sendText(res)), nil
	}}
}

// draft starts a Draft from what send and reply share: sender, body and
// attachments, all checked.
func (d Deps) draft(creds credentials.Credentials, from, subject, text, html string, atts []AttachmentArg) (mailmsg.Draft, error) {
	var dr mailmsg.Draft
	var err error
	if strings.TrimSpace(from) != "" {
		if dr.From, err = mailmsg.ParseAddress("from", from); err != nil {
			return dr, err
		}
	} else if dr.From, err = mailmsg.ParseAddress("from", creds.User); err != nil {
		return dr, badInput("from: the login name %q is not an email address, so the sender cannot be derived from it; pass from", mailmsg.SanitizeLine(creds.User))
	}
	if strings.TrimSpace(text) == "" && strings.TrimSpace(html) == "" {
		return dr, badInput("text (or html) is required: the message body")
	}
	dr.Subject, dr.Text, dr.HTML = subject, text, html
	if dr.Attachments, err = d.decodeAttachments(atts); err != nil {
		return dr, err
	}
	return dr, nil
}

func parseAddresses(field string, in []string) ([]mailmsg.Address, error) {
	var out []mailmsg.Address
	for _, s := range in {
		if strings.TrimSpace(s) == "" {
			return nil, badInput("%s: an empty address was given", field)
		}
		list, err := mailmsg.ParseAddressList(field, s)
		if err != nil {
			return nil, err
		}
		out = append(out, list...)
	}
	return out, nil
}

func (d Deps) decodeAttachments(in []AttachmentArg) ([]mailmsg.OutAttachment, error) {
	limit := d.attachmentLimit()
	var total int64
	out := make([]mailmsg.OutAttachment, 0, len(in))
	for i, a := range in {
		name := fmt.Sprintf("attachment %d", i+1)
		if a.Filename != "" {
			name += fmt.Sprintf(" (%s)", mailmsg.SanitizeLine(a.Filename))
		}
		// Refuse before decoding what cannot fit.
		if est := int64(len(a.ContentBase64)) / 4 * 3; total+est > limit+3 {
			return nil, mailerr.Newf(mailerr.TooLarge, "%s: the attachments exceed the limit of %s in total; send large files as a link instead", name, sizeText(limit))
		}
		data, err := decodeBase64(a.ContentBase64)
		if err != nil {
			return nil, badInput("%s: content_base64 is not valid base64 (%v)", name, err)
		}
		total += int64(len(data))
		if total > limit {
			return nil, mailerr.Newf(mailerr.TooLarge, "%s: the attachments exceed the limit of %s in total; send large files as a link instead", name, sizeText(limit))
		}
		ct := strings.TrimSpace(a.ContentType)
		if ct == "" {
			ct = mime.TypeByExtension(strings.ToLower(path.Ext(a.Filename)))
		}
		out = append(out, mailmsg.OutAttachment{Filename: a.Filename, ContentType: ct, Data: data})
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

// deliver composes draft, sends it, and saves the Sent copy. An error means
// nothing was sent; once the server accepted the message, everything that
// goes wrong afterwards is reported in the result instead.
func (d Deps) deliver(ctx context.Context, creds credentials.Credentials, draft mailmsg.Draft) (*SendResult, error) {
	if d.Submission == nil {
		return nil, mailerr.New(mailerr.Internal, "sending mail is not configured on this gateway")
	}
	rcpts := draft.Recipients()
	switch {
	case len(rcpts) == 0:
		return nil, badInput("no recipients: give at least one address in to, cc or bcc")
	case len(rcpts) > d.maxRecipients():
		return nil, badInput("too many recipients: %d, at most %d (To, Cc and Bcc together)", len(rcpts), d.maxRecipients())
	}
	draft.Date = time.Now().Truncate(time.Second)
	raw, id, err := mailmsg.Compose(draft)
	if err != nil {
		return nil, err
	}
	sent, err := d.Submission.Send(ctx, creds, draft.From.Email, rcpts, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	res := &SendResult{
		MessageID: id, From: display(draft.From), Subject: draft.Subject,
		To: addrStrings(draft.To), Cc: addrStrings(draft.Cc), Bcc: addrStrings(draft.Bcc),
		Accepted: sent.Accepted, InReplyTo: draft.InReplyTo, References: draft.References,
	}
	if res.To == nil {
		res.To = []string{}
	}
	for _, r := range sent.Rejected {
		res.Rejected = append(res.Rejected, RejectedRecipient{Address: r.Address, Code: r.Code, Reason: r.Message})
	}
	res.SentCopy = d.saveSentCopy(ctx, creds, draft, id)
	return res, nil
}

// saveSentCopy appends the sender's copy (with Bcc, same Message-ID and
// Date) to the Sent folder. The message went out: this runs even if the
// caller has gone, and a failure is reported, not returned.
func (d Deps) saveSentCopy(ctx context.Context, creds credentials.Credentials, draft mailmsg.Draft, id string) SentCopyResult {
	if strings.EqualFold(d.SentFolder, mailbox.NoSentFolder) {
		return SentCopyResult{Reason: "saving a copy is turned off on this gateway (SENT_FOLDER=none), usually because the mail server files sent mail itself"}
	}
	draft.MessageID, draft.SentCopy = id, true
	raw, _, err := mailmsg.Compose(draft)
	if err != nil {
		d.Log.ErrorContext(ctx, "composing the Sent copy failed", "err", err)
		return SentCopyResult{Reason: "the copy could not be composed"}
	}
	saved, err := d.Mailbox.SaveSent(context.WithoutCancel(ctx), creds, d.SentFolder, raw, draft.Date)
	if err != nil {
		d.Log.WarnContext(ctx, "saving the Sent copy failed", "err", err)
		return SentCopyResult{Reason: "the message was sent, but no copy was saved: " + mailerr.Message(err)}
	}
	return SentCopyResult{Saved: true, Folder: saved.Folder, UID: saved.UID}
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

func sendText(r *SendResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Sent %q (Message-ID <%s>) from %s.\n", r.Subject, r.MessageID, r.From)
	fmt.Fprintf(&b, "To: %s\n", strings.Join(r.To, ", "))
	if len(r.Cc) > 0 {
		fmt.Fprintf(&b, "Cc: %s\n", strings.Join(r.Cc, ", "))
	}
	if len(r.Bcc) > 0 {
		fmt.Fprintf(&b, "Bcc: %s\n", strings.Join(r.Bcc, ", "))
	}
	fmt.Fprintf(&b, "Accepted by the mail server for: %s\n", strings.Join(r.Accepted, ", "))
	for _, x := range r.Rejected {
		kind := "permanently"
		if x.Code/100 == 4 {
			kind = "temporarily (retry later)"
		}
		fmt.Fprintf(&b, "NOT sent to %s: refused %s (%d %s)\n", x.Address, kind, x.Code, x.Reason)
	}
	if r.Original != nil {
		if r.Original.Answered {
			fmt.Fprintf(&b, "The original (uid %d in %s) is now flagged as answered.\n", r.Original.UID, r.Original.Folder)
		} else {
			fmt.Fprintf(&b, "The original (uid %d in %s) could not be flagged as answered: %s\n", r.Original.UID, r.Original.Folder, r.Original.AnsweredError)
		}
	}
	if r.SentCopy.Saved {
		fmt.Fprintf(&b, "A copy was saved in %s", r.SentCopy.Folder)
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
