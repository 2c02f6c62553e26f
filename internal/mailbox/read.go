package mailbox

import (
	"context"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Read limits.
const (
	DefaultMaxChars = 100_000
	MaxMaxChars     = 1_000_000
	// maxTextPartBytes caps what is fetched of one text part: a body larger
	// than this is cut (with a warning) rather than pulled into memory.
	maxTextPartBytes = 4 << 20
	// minTextPartBytes is what is fetched of a large text part at least; more
	// (up to maxTextPartBytes) only when offset+max_chars asks for more. A
	// part is decoded in a few full copies, so fetching 4 MB for the default
	// 100,000 characters raised the peak RSS by over 20 MB on a 25 MB text
	// body (cmd/mailbox-bench); 1 MB holds 1,000,000 ASCII characters.
	minTextPartBytes = 1 << 20
	maxTextParts     = 8
)

// ReadOptions select what of a message body to return.
type ReadOptions struct {
	Folder   string
	UID      uint32
	MaxChars int // default 100,000
	Offset   int // in characters, to continue a truncated body
}

// Attachment describes one attachment; its content is not fetched.
type Attachment struct {
	PartID      string `json:"part_id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"` // encoded size on the server, bytes
	Inline      bool   `json:"inline,omitempty"`
}

// Message is one message, read.
type Message struct {
	Folder      string       `json:"folder"`
	UID         uint32       `json:"uid"`
	From        []Address    `json:"from,omitempty"`
	To          []Address    `json:"to,omitempty"`
	Cc          []Address    `json:"cc,omitempty"`
	ReplyTo     []Address    `json:"reply_to,omitempty"`
	Subject     string       `json:"subject"`
	Date        time.Time    `json:"date"`
	MessageID   string       `json:"message_id,omitempty"`
	InReplyTo   []string     `json:"in_reply_to,omitempty"`
	References  []string     `json:"references,omitempty"`
	Flags       Flags        `json:"flags"`
	Size        int64        `json:"size"`
	Text        string       `json:"text"`
	TextFrom    string       `json:"text_from,omitempty"` // "text/plain", "text/html" (converted), or "" when there is no text
	TotalChars  int          `json:"total_chars"`
	Offset      int          `json:"offset"`
	Truncated   bool         `json:"truncated"`
	NextOffset  int          `json:"next_offset,omitempty"`
	Attachments []Attachment `json:"attachments"`
	Warnings    []string     `json:"warnings,omitempty"`
}

// Read reads one message without changing it: EXAMINE and BODY.PEEK, so
// \Seen is never set. Only the text parts are fetched, so a message with a
// 25 MB attachment costs no more memory than its text.
func (c *Client) Read(ctx context.Context, creds credentials.Credentials, o ReadOptions) (*Message, error) {
	folder := normFolder(o.Folder)
	if o.UID == 0 {
		return nil, mailerr.New(mailerr.BadInput, "uid must be a positive message UID (from imap_list_emails or imap_search_emails)")
	}
	maxChars := o.MaxChars
	switch {
	case maxChars == 0:
		maxChars = DefaultMaxChars
	case maxChars < 0 || maxChars > MaxMaxChars:
		return nil, mailerr.Newf(mailerr.BadInput, "max_chars must be between 1 and %d", MaxMaxChars)
	}
	if o.Offset < 0 {
		return nil, mailerr.New(mailerr.BadInput, "offset must not be negative")
	}
	var msg *Message
	err := c.do(ctx, creds, true, func(ctx context.Context, conn *Conn) error {
		if _, err := conn.examine(folder); err != nil {
			return err
		}
		m, bs, err := fetchHeaderAndStructure(conn.client(), folder, o.UID)
		if err != nil {
			return err
		}
		texts, atts := classifyParts(bs)
		m.Attachments = atts
		body, warnings, err := fetchTexts(conn.client(), folder, o.UID, texts, textPartCap(o.Offset, maxChars), &m.TextFrom)
		if err != nil {
			return err
		}
		m.Warnings = append(m.Warnings, warnings...)
		m.TotalChars = utf8.RuneCountInString(body)
		m.Offset = o.Offset
		m.Text, m.Truncated, m.NextOffset = mailmsg.Truncate(body, o.Offset, maxChars)
		if len(m.Text) < len(body)/2 {
			// Let the whole body be collected before the answer is encoded:
			// the window alone is what the caller gets.
			m.Text = strings.Clone(m.Text)
		}
		if !m.Truncated {
			m.NextOffset = 0
		}
		msg = m
		return nil
	})
	return msg, err
}

func fetchHeaderAndStructure(cl *imapclient.Client, folder string, uid uint32) (*Message, imap.BodyStructure, error) {
	refs := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"References"}, Peek: true}
	cmd := cl.Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{
		UID: true, Flags: true, Envelope: true, RFC822Size: true, InternalDate: true,
		BodyStructure: &imap.FetchItemBodyStructure{Extended: true}, BodySection: []*imap.FetchItemBodySection{refs},
	})
	bufs, err := cmd.Collect()
	if err != nil {
		return nil, nil, imapError(err, folder)
	}
	for _, b := range bufs {
		if uint32(b.UID) != uid {
			continue
		}
		m := &Message{Folder: folder, UID: uid, Flags: flagsOf(b.Flags), Size: b.RFC822Size, Date: b.InternalDate, Attachments: []Attachment{}}
		if env := b.Envelope; env != nil {
			m.From, m.To, m.Cc, m.ReplyTo = addressesOf(env.From), addressesOf(env.To), addressesOf(env.Cc), addressesOf(env.ReplyTo)
			m.Subject = mailmsg.SanitizeLine(env.Subject)
			if !env.Date.IsZero() {
				m.Date = env.Date
			}
			m.MessageID = mailmsg.SanitizeLine(env.MessageID)
			for _, id := range env.InReplyTo {
				m.InReplyTo = append(m.InReplyTo, mailmsg.SanitizeLine(id))
			}
		}
		m.References = parseMsgIDs(string(b.FindBodySection(refs)))
		if b.BodyStructure == nil {
			return nil, nil, mailerr.New(mailerr.Internal, "the mail server sent no body structure")
		}
		return m, b.BodyStructure, nil
	}
	return nil, nil, mailerr.Newf(mailerr.NotFound, "no message with UID %d in folder %q (it may have been moved or deleted); list the folder again", uid, folder)
}

// parseMsgIDs extracts the ids (without brackets) from a References header.
func parseMsgIDs(h string) []string {
	_, v, ok := strings.Cut(h, ":")
	if !ok {
		return nil
	}
	var ids []string
	for {
		i := strings.IndexByte(v, '<')
		if i < 0 {
			break
		}
		j := strings.IndexByte(v[i:], '>')
		if j < 0 {
			break
		}
		if id := strings.TrimSpace(v[i+1 : i+j]); id != "" {
			ids = append(ids, mailmsg.SanitizeLine(id))
		}
		v = v[i+j+1:]
	}
	return ids
}

// textPart is one body part to fetch and decode.
type textPart struct {
	path []int
	part mailmsg.Part
	size uint32
}

// classifyParts picks the text to show (text/plain preferred in each
// multipart/alternative, HTML otherwise; every inline text part of a mixed
// message in order) and lists the attachments.
func classifyParts(bs imap.BodyStructure) ([]textPart, []Attachment) {
	var texts []textPart
	atts := []Attachment{}
	var walk func(path []int, b imap.BodyStructure)
	walk = func(path []int, b imap.BodyStructure) {
		switch p := b.(type) {
		case *imap.BodyStructureMultiPart:
			if strings.EqualFold(p.Subtype, "alternative") {
				if best := pickAlternative(p); best >= 0 {
					walk(append(slicesClone(path), best+1), p.Children[best])
				}
				return
			}
			for i, ch := range p.Children {
				walk(append(slicesClone(path), i+1), ch)
			}
		case *imap.BodyStructureSinglePart:
			if len(path) == 0 {
				path = []int{1}
			}
			disp := p.Disposition()
			isAttachment := disp != nil && strings.EqualFold(disp.Value, "attachment")
			mt := p.MediaType()
			if !isAttachment && (mt == "text/plain" || mt == "text/html") && len(texts) < maxTextParts {
				texts = append(texts, textPart{path: path, size: p.Size,
					part: mailmsg.Part{MediaType: mt, Charset: p.Params["charset"], Encoding: strings.ToLower(p.Encoding)}})
				return
			}
			if strings.HasPrefix(mt, "multipart/") {
				return
			}
			name := filename(p)
			if name == "" && !isAttachment && (strings.HasPrefix(mt, "text/") || p.ID != "") {
				return // an unnamed inline part (calendar text, cid: image of the HTML)
			}
			atts = append(atts, Attachment{PartID: partID(path), Filename: name, ContentType: mt, Size: int64(p.Size),
				Inline: disp != nil && strings.EqualFold(disp.Value, "inline")})
		}
	}
	walk(nil, bs)
	return texts, atts
}

// pickAlternative returns the index of text/plain, else text/html, else a
// nested multipart (e.g. multipart/related holding the HTML), else -1.
func pickAlternative(p *imap.BodyStructureMultiPart) int {
	best, rank := -1, 0
	for i, ch := range p.Children {
		r := 0
		switch ch.MediaType() {
		case "text/plain":
			r = 3
		case "text/html":
			r = 2
		default:
			if _, ok := ch.(*imap.BodyStructureMultiPart); ok {
				r = 1
			}
		}
		if r > rank {
			best, rank = i, r
		}
	}
	return best
}

func slicesClone(p []int) []int { return append([]int(nil), p...) }

func partID(path []int) string {
	s := make([]string, len(path))
	for i, n := range path {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ".")
}

// filename decodes a part's file name: RFC 2231 (filename*=) and RFC 2047.
func filename(p *imap.BodyStructureSinglePart) string {
	var params map[string]string
	if d := p.Disposition(); d != nil {
		params = d.Params
	}
	for _, src := range []map[string]string{params, p.Params} {
		for _, k := range []string{"filename*", "name*"} {
			if v := src[k]; v != "" {
				if _, ps, err := mime.ParseMediaType("x/x; " + k + "=" + v); err == nil {
					for _, x := range ps {
						return mailmsg.SanitizeLine(x)
					}
				}
			}
		}
		for _, k := range []string{"filename", "name"} {
			if v := src[k]; v != "" {
				return mailmsg.SanitizeLine(mailmsg.DecodeHeader(v))
			}
		}
	}
	return ""
}

// textPartCap is how much of one text part to fetch for a window of
// maxChars characters from offset: up to 4 bytes a character, at least
// minTextPartBytes, at most maxTextPartBytes.
func textPartCap(offset, maxChars int) uint32 {
	need := (int64(offset) + int64(maxChars)) * 4
	return uint32(min(max(need, minTextPartBytes), maxTextPartBytes))
}

// fetchTexts fetches the chosen text parts in one command and decodes them
// while they stream in.
func fetchTexts(cl *imapclient.Client, folder string, uid uint32, texts []textPart, partCap uint32, from *string) (string, []string, error) {
	if len(texts) == 0 {
		return "", nil, nil
	}
	var warnings []string
	sections := make([]*imap.FetchItemBodySection, len(texts))
	for i, t := range texts {
		sections[i] = &imap.FetchItemBodySection{Part: t.path, Peek: true}
		if t.size > partCap {
			sections[i].Partial = &imap.SectionPartial{Offset: 0, Size: int64(partCap)}
			warnings = append(warnings, fmt.Sprintf("part %s is %d bytes; only its first %d bytes were read", partID(t.path), t.size, partCap))
		}
	}
	cmd := cl.Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{UID: true, BodySection: sections})
	defer cmd.Close()
	decoded := make([]string, len(texts))
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		for item := msg.Next(); item != nil; item = msg.Next() {
			sec, ok := item.(imapclient.FetchItemDataBodySection)
			if !ok || sec.Literal == nil {
				continue
			}
			for i, want := range sections {
				if decoded[i] == "" && sec.MatchCommand(want) {
					var w []string
					decoded[i], w = mailmsg.DecodeText(io.LimitReader(sec.Literal, int64(partCap)+1), texts[i].part)
					warnings = append(warnings, w...)
					break
				}
			}
		}
	}
	if err := cmd.Close(); err != nil {
		return "", nil, imapError(err, folder)
	}
	var parts []string
	for i, d := range decoded {
		if strings.TrimSpace(d) == "" {
			continue
		}
		parts = append(parts, d)
		if *from == "" || texts[i].part.MediaType == "text/plain" {
			*from = texts[i].part.MediaType
		}
	}
	return strings.Join(parts, "\n\n"), warnings, nil
}
