package mailmsg

// Reading a saved draft back into a Draft, so that sending it composes a
// fresh message with Compose's guarantees (7-bit, no Bcc header, checked
// addresses) instead of passing on whatever a mail client stored.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// ParsedDraft is a saved draft read back.
type ParsedDraft struct {
	Draft
	// MessageID is the draft's own Message-ID (without brackets), "" when
	// it has none: the message sent from it gets a new one.
	MessageID string
	// Warnings say what could not be carried over exactly.
	Warnings []string
}

// ParseDraft reads raw, a draft as a mail client (or the gateway itself)
// stores it: the addresses of From, To, Cc, Bcc and Reply-To, the subject,
// In-Reply-To and References, the tags, the first text/plain and
// text/html body parts, a text/calendar alternative with a method (a
// meeting answer) as the Calendar, and every other part as an attachment (decoded;
// the caller bounds raw, and so what it decodes to). Date and Message-ID are not
// carried: a sent message gets its own. A multipart/related HTML body
// loses its inline images' Content-IDs (they become attachments), which
// a warning says.
func ParseDraft(raw []byte) (*ParsedDraft, error) {
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil, mailerr.Wrap(mailerr.BadInput, err, "the draft cannot be read as a message")
	}
	if mr == nil {
		return nil, mailerr.Wrap(mailerr.BadInput, err, "the draft cannot be read as a message")
	}
	defer mr.Close()
	p := &ParsedDraft{}
	h := mr.Header
	lists := []struct {
		name string
		out  *[]Address
	}{{"To", &p.To}, {"Cc", &p.Cc}, {"Bcc", &p.Bcc}, {"Reply-To", &p.ReplyTo}}
	for _, l := range lists {
		if *l.out, err = draftAddresses(&h, l.name); err != nil {
			return nil, err
		}
	}
	from, err := draftAddresses(&h, "From")
	if err != nil {
		return nil, err
	}
	if len(from) > 0 {
		p.From = from[0]
	}
	if p.Subject, err = h.Subject(); err != nil {
		p.Subject = DecodeHeader(h.Get("Subject"))
	}
	p.Subject = strings.TrimSpace(p.Subject)
	if ids, _ := h.MsgIDList("In-Reply-To"); len(ids) > 0 && ValidMessageID(ids[0]) {
		p.InReplyTo = ids[0]
	}
	refs, _ := h.MsgIDList("References")
	for _, id := range refs {
		if ValidMessageID(id) {
			p.References = append(p.References, id)
		}
	}
	if id, err := h.MessageID(); err == nil {
		p.MessageID = id
	}
	p.Tags = ParseTags(h.Get(TagsHeader))
	if len(p.Tags) > MaxTags {
		p.Tags = p.Tags[:MaxTags]
	}
	if err := p.readParts(mr); err != nil {
		return nil, err
	}
	return p, nil
}

func draftAddresses(h *mail.Header, name string) ([]Address, error) {
	if strings.TrimSpace(h.Get(name)) == "" {
		return nil, nil
	}
	list, err := h.AddressList(name)
	if err != nil {
		return nil, mailerr.Wrap(mailerr.BadInput, err, fmt.Sprintf("the draft's %s header is not a list of valid email addresses", name))
	}
	out := make([]Address, 0, len(list))
	for _, a := range list {
		out = append(out, Address{Name: strings.TrimSpace(a.Name), Email: addrSpec(a.Address)})
	}
	return out, nil
}

// readParts takes the body and the attachments from the draft's parts.
func (p *ParsedDraft) readParts(mr *mail.Reader) error {
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
			return mailerr.Wrap(mailerr.BadInput, err, "the draft's body cannot be read")
		}
		if part == nil {
			return mailerr.Wrap(mailerr.BadInput, err, "the draft's body cannot be read")
		}
		unknownCharset := message.IsUnknownCharset(err)
		var hdr message.Header
		switch hh := part.Header.(type) {
		case *mail.InlineHeader:
			hdr = hh.Header
		case *mail.AttachmentHeader:
			hdr = hh.Header
		}
		ct, params, _ := hdr.ContentType()
		disp, _, _ := hdr.ContentDisposition()
		isFile := strings.EqualFold(disp, "attachment")
		cid := hdr.Get("Content-Id")
		name, _ := (&mail.AttachmentHeader{Header: hdr}).Filename()
		if name == "" {
			name = params["name"]
		}
		ct = strings.ToLower(ct)
		if ct == "" {
			ct = "text/plain"
		}
		body := io.Reader(part.Body)
		if !isFile && name == "" && (ct == "text/plain" && p.Text == "" || ct == "text/html" && p.HTML == "") {
			b, err := io.ReadAll(io.LimitReader(body, MaxPartBytes+1))
			if err != nil {
				return mailerr.Wrap(mailerr.BadInput, err, "the draft's body cannot be read")
			}
			if len(b) > MaxPartBytes {
				return mailerr.Newf(mailerr.TooLarge, "the draft's %s body is larger than %d MiB", ct, MaxPartBytes>>20)
			}
			if unknownCharset {
				p.Warnings = append(p.Warnings, "the draft's body names a character set the gateway does not know; some of its characters may come out wrong")
			}
			if ct == "text/plain" {
				p.Text = string(b)
			} else {
				p.HTML = string(b)
			}
			continue
		}
		if !isFile && name == "" && ct == "text/calendar" && p.Calendar == nil && params["method"] != "" {
			// A meeting answer's iCalendar alternative: carried as it is.
			b, err := io.ReadAll(io.LimitReader(body, MaxPartBytes+1))
			if err != nil || len(b) > MaxPartBytes {
				return mailerr.Wrap(mailerr.BadInput, err, "the draft's calendar part cannot be read")
			}
			p.Calendar = &Calendar{Method: params["method"], Data: b}
			continue
		}
		data, err := io.ReadAll(body)
		if err != nil {
			return mailerr.Wrap(mailerr.BadInput, err, "an attachment of the draft cannot be read")
		}
		switch {
		case strings.HasPrefix(ct, "text/") && !unknownCharset:
			ct += "; charset=utf-8" // go-message decoded it to UTF-8
		case strings.HasPrefix(ct, "text/"):
			ct = "application/octet-stream"
		}
		if cid != "" && !isFile {
			p.Warnings = append(p.Warnings, fmt.Sprintf("the inline part %s of the HTML body is sent as an attachment", quoteValue(SanitizeLine(firstNonEmpty(name, cid)))))
		}
		p.Attachments = append(p.Attachments, OutAttachment{Filename: SanitizeLine(name), ContentType: ct, Data: data})
	}
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
