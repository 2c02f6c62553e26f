package mailbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
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
	// IncludeHidden also returns the text of the HTML elements that mail
	// clients hide (Message.HiddenText).
	IncludeHidden bool
}

// Attachment describes one attachment; its content is not fetched.
type Attachment struct {
	PartID      string `json:"part_id" desc:"IMAP part number of the attachment, e.g. 2 or 1.2"`
	Filename    string `json:"filename" desc:"file name as the sender gave it, without directories; empty when there is none"`
	ContentType string `json:"content_type" desc:"media type, e.g. application/pdf"`
	// Size is BINARY.SIZE where binarySized allows, else estimatedSize.
	Size   int64 `json:"size" desc:"decoded size in bytes: exact when the mail server reports it (BINARY), else estimated from the encoded size (base64 within about 1%; quoted-printable an upper bound)"`
	Inline bool  `json:"inline,omitempty" desc:"shown in the body by mail clients (an image of the HTML body) rather than as a separate file"`
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
	// HiddenElements counts the HTML elements with text that were left out
	// of Text because mail clients do not show them; HiddenText is their
	// text (one line each, at most MaxChars characters), when asked for.
	HiddenElements  int    `json:"hidden_elements,omitempty" desc:"how many HTML elements with text were left out of text because mail clients do not show them"`
	HiddenText      string `json:"hidden_text,omitempty" desc:"with include_hidden: the text of those elements, one line each"`
	HiddenTruncated bool   `json:"hidden_truncated,omitempty" desc:"hidden_text was cut at max_chars characters"`
}

// Read reads one message without changing it: EXAMINE and BODY.PEEK, so
// \Seen is never set. Only the text parts are fetched, so a message with a
// 25 MB attachment costs no more memory than its text.
func (c *Client) Read(ctx context.Context, creds credentials.Credentials, o ReadOptions) (*Message, error) {
	folder, err := c.folderArg(ctx, creds, o.Folder)
	if err != nil {
		return nil, err
	}
	if o.UID == 0 {
		return nil, badUID()
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
	// The FETCH of the header, structure and first bytes goes with the
	// EXAMINE (behind the LOGIN on a new connection): most messages are
	// read in that one flight.
	var first *imapclient.FetchCommand
	open := &opening{folder: folder, send: func(conn *Conn, _ imap.CapSet) {
		first = startHeaderAndStructure(conn.client(), o.UID, true)
	}}
	err = c.doOpen(ctx, creds, open, "reading the message", true, func(ctx context.Context, conn *Conn) error {
		defer first.Close()
		if _, err := conn.examine(folder); err != nil {
			return err
		}
		m, err := readStarted(conn.client(), first, folder, o.UID, o.Offset, maxChars, o.IncludeHidden)
		if conn.mayNotSeeYet(err, o.UID) {
			if err = conn.catchUp(folder); err == nil {
				m, err = readMessageHidden(conn.client(), folder, o.UID, o.Offset, maxChars, o.IncludeHidden)
			}
		}
		if err != nil {
			return err
		}
		msg = m
		return nil
	})
	return msg, err
}

// readMessage reads message uid of the selected folder as Read returns it:
// headers, attachment list, and the text from offset, at most maxChars
// characters. One round trip for most messages: the FETCH of the header
// and structure also asks for the first guessBytes of part 1, the text of
// a single-part message and of most multiparts; when the structure shows
// the text is elsewhere or longer, a second FETCH gets it as before.
// (Two FETCHes of one message pipelined would not do: Dovecot may answer
// them interleaved, and go-imap cannot tell whose answer is whose.)
func readMessage(cl *imapclient.Client, folder string, uid uint32, offset, maxChars int) (*Message, error) {
	return readMessageHidden(cl, folder, uid, offset, maxChars, false)
}

// readMessageHidden is readMessage that, with keepHidden, also returns the
// text of hidden HTML elements.
func readMessageHidden(cl *imapclient.Client, folder string, uid uint32, offset, maxChars int, keepHidden bool) (*Message, error) {
	return readStarted(cl, startHeaderAndStructure(cl, uid, true), folder, uid, offset, maxChars, keepHidden)
}

// readStarted is readMessageHidden once first, its startHeaderAndStructure
// with the guess, is sent.
func readStarted(cl *imapclient.Client, first *imapclient.FetchCommand, folder string, uid uint32, offset, maxChars int, keepHidden bool) (*Message, error) {
	m, bs, guess, err := collectHeaderAndStructure(first, folder, uid)
	if err != nil {
		return nil, err
	}
	return readRest(cl, m, bs, guess, uid, offset, maxChars, keepHidden)
}

// readRest is readStarted once the answer to its first FETCH is read (m,
// bs and guess: headerAndStructureOf).
func readRest(cl *imapclient.Client, m *Message, bs imap.BodyStructure, guess []byte, uid uint32, offset, maxChars int, keepHidden bool) (*Message, error) {
	partCap := textPartCap(offset, maxChars)
	var err error
	atts := attachmentParts(bs)
	texts := bodyTexts(bs)
	var d decodedBody
	if len(texts) == 1 && slices.Equal(texts[0].path, []int{1}) && texts[0].size <= guessBytes && guess != nil {
		// The whole text came with the structure, as the second FETCH
		// would have brought it; what may be left to ask is an
		// attachment's size.
		dt := mailmsg.DecodeTextHidden(bytes.NewReader(guess), texts[0].part, keepHidden)
		d = decodedBody{text: joinTexts([]string{dt.Text}, texts, &m.TextFrom), warnings: dt.Warnings, hidden: dt.Hidden, hiddenText: dt.HiddenText}
		var more decodedBody
		more, err = fetchBodyHidden(cl, uid, bs, nil, atts, partCap, &m.TextFrom, false)
		d.warnings = append(d.warnings, more.warnings...)
	} else {
		d, err = fetchBodyHidden(cl, uid, bs, texts, atts, partCap, &m.TextFrom, keepHidden)
	}
	if err != nil {
		return nil, err
	}
	body, warnings := d.text, d.warnings
	if d.hidden > 0 {
		warnings = append(warnings, mailmsg.HiddenWarning(d.hidden))
		m.HiddenElements = d.hidden
	}
	if keepHidden && d.hiddenText != "" {
		m.HiddenText, m.HiddenTruncated, _ = mailmsg.Truncate(d.hiddenText, 0, maxChars)
	}
	for _, a := range atts {
		m.Attachments = append(m.Attachments, a.Attachment)
	}
	m.Warnings = append(m.Warnings, warnings...)
	m.TotalChars = utf8.RuneCountInString(body)
	m.Offset = offset
	m.Text, m.Truncated, m.NextOffset = mailmsg.Truncate(body, offset, maxChars)
	if len(m.Text) < len(body)/2 {
		// Let the whole body be collected before the answer is encoded:
		// the window alone is what the caller gets.
		m.Text = strings.Clone(m.Text)
	}
	if !m.Truncated {
		m.NextOffset = 0
	}
	return m, nil
}

// guessBytes is how much of part 1 readMessage asks for before it knows
// the structure: a typical text whole, and little wasted when part 1 turns
// out to be an attachment. (minTextPartBytes, what the second FETCH takes
// of a text at least, is larger: a text this size is fetched whole either
// way.)
const guessBytes = 64 << 10

var guessSection = &imap.FetchItemBodySection{Part: []int{1}, Peek: true, Partial: &imap.SectionPartial{Offset: 0, Size: guessBytes}}

// referencesSection is the References header, which the envelope lacks.
var referencesSection = &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"References"}, Peek: true}

func fetchHeaderAndStructure(cl *imapclient.Client, folder string, uid uint32) (*Message, imap.BodyStructure, error) {
	m, bs, _, err := collectHeaderAndStructure(startHeaderAndStructure(cl, uid, false), folder, uid)
	return m, bs, err
}

// startHeaderAndStructure sends the FETCH of what Read says about a
// message besides its text, and with guess the first bytes of part 1.
func startHeaderAndStructure(cl *imapclient.Client, uid uint32, guess bool) *imapclient.FetchCommand {
	return startHeadsAndStructures(cl, imap.UIDSetNum(imap.UID(uid)), guess)
}

// startHeadsAndStructures is startHeaderAndStructure for the messages of
// set in one FETCH.
func startHeadsAndStructures(cl *imapclient.Client, set imap.UIDSet, guess bool) *imapclient.FetchCommand {
	sections := []*imap.FetchItemBodySection{referencesSection}
	if guess {
		sections = append(sections, guessSection)
	}
	return cl.Fetch(set, &imap.FetchOptions{
		UID: true, Flags: true, Envelope: true, RFC822Size: true, InternalDate: true,
		BodyStructure: &imap.FetchItemBodyStructure{Extended: true}, BodySection: sections,
	})
}

// collectHeaderAndStructure reads the answer to startHeaderAndStructure,
// and the bytes of part 1 if they were asked for (nil if not).
func collectHeaderAndStructure(cmd *imapclient.FetchCommand, folder string, uid uint32) (*Message, imap.BodyStructure, []byte, error) {
	bufs, err := cmd.Collect()
	if err != nil {
		return nil, nil, nil, imapError(err, "")
	}
	for _, b := range bufs {
		if uint32(b.UID) == uid && b.BodyStructure != nil {
			return headerAndStructureOf(b, folder)
		}
	}
	for _, b := range bufs {
		if uint32(b.UID) == uid {
			return nil, nil, nil, mailerr.New(mailerr.Internal, "the mail server sent no body structure")
		}
	}
	return nil, nil, nil, noMessage(uid, folder)
}

// headerAndStructureOf is the message in b, an answer to
// startHeaderAndStructure, with its structure and the bytes of part 1 if
// they were asked for (nil if not).
func headerAndStructureOf(b *imapclient.FetchMessageBuffer, folder string) (*Message, imap.BodyStructure, []byte, error) {
	m := &Message{Folder: folder, UID: uint32(b.UID), Flags: flagsOf(b.Flags), Size: b.RFC822Size, Date: b.InternalDate, Attachments: []Attachment{}}
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
	m.References = parseMsgIDs(string(b.FindBodySection(referencesSection)))
	if b.BodyStructure == nil {
		return nil, nil, nil, mailerr.New(mailerr.Internal, "the mail server sent no body structure")
	}
	return m, b.BodyStructure, b.FindBodySection(guessSection), nil
}

// badUID is the answer to a UID of 0.
func badUID() error { return mailerr.New(mailerr.BadInput, "uid must be a positive message UID") }

// noMessage is the error for a UID that is not in folder.
func noMessage(uid uint32, folder string) error {
	return mailerr.Newf(mailerr.NotFound, "no message with UID %d in folder %s; it may have been moved or deleted", uid, quote(folder)).About(mailerr.SubjectMessage)
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

// textPartCap is how much of one text part to fetch for a window of
// maxChars characters from offset: up to 4 bytes a character, at least
// minTextPartBytes, at most maxTextPartBytes.
func textPartCap(offset, maxChars int) uint32 {
	need := (int64(offset) + int64(maxChars)) * 4
	return uint32(min(max(need, minTextPartBytes), maxTextPartBytes))
}

// decodedBody is the decoded text of a message's text parts.
type decodedBody struct {
	text       string
	warnings   []string // without the one about hidden elements
	hidden     int      // hidden HTML elements with text
	hiddenText string   // their text, when asked for
}

// fetchBody fetches the chosen text parts, decoding them while they stream
// in, and in the same command the decoded size of an attachment when the
// server has BINARY (binarySized says which). Other sizes stay estimated.
func fetchBody(cl *imapclient.Client, uid uint32, bs imap.BodyStructure, texts []textPart, atts []attachmentPart, partCap uint32, from *string) (string, []string, error) {
	d, err := fetchBodyHidden(cl, uid, bs, texts, atts, partCap, from, false)
	if d.hidden > 0 {
		d.warnings = append(d.warnings, mailmsg.HiddenWarning(d.hidden))
	}
	return d.text, d.warnings, err
}

// fetchBodyHidden is fetchBody that tells about hidden HTML elements, and
// with keepHidden collects their text.
func fetchBodyHidden(cl *imapclient.Client, uid uint32, bs imap.BodyStructure, texts []textPart, atts []attachmentPart, partCap uint32, from *string, keepHidden bool) (decodedBody, error) {
	var sized *attachmentPart
	if cl.Caps().Has(imap.CapBinary) || cl.Caps().Has(imap.CapIMAP4rev2) {
		sized = binarySized(bs, atts)
	}
	d, err := fetchTexts(cl, uid, texts, partCap, sized, from, keepHidden)
	var ie *imap.Error
	if err != nil && sized != nil && errors.As(err, &ie) {
		// The server could not decode the part after all: again without.
		d, err = fetchTexts(cl, uid, texts, partCap, nil, from, keepHidden)
	}
	if err != nil {
		return decodedBody{}, imapError(err, "")
	}
	return d, nil
}

// fetchTexts fetches texts, and the decoded size of sized unless it is
// nil, in one command.
func fetchTexts(cl *imapclient.Client, uid uint32, texts []textPart, partCap uint32, sized *attachmentPart, from *string, keepHidden bool) (decodedBody, error) {
	var sizes []*imap.FetchItemBinarySectionSize
	if sized != nil {
		sizes = []*imap.FetchItemBinarySectionSize{{Part: sized.path}}
	}
	if len(texts) == 0 && len(sizes) == 0 {
		return decodedBody{}, nil
	}
	var d decodedBody
	sections := make([]*imap.FetchItemBodySection, len(texts))
	for i, t := range texts {
		sections[i] = &imap.FetchItemBodySection{Part: t.path, Peek: true}
		if t.size > partCap {
			sections[i].Partial = &imap.SectionPartial{Offset: 0, Size: int64(partCap)}
			d.warnings = append(d.warnings, fmt.Sprintf("part %s is %d bytes; only its first %d bytes were read", partID(t.path), t.size, partCap))
		}
	}
	cmd := cl.Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{UID: true, BodySection: sections, BinarySectionSize: sizes})
	defer cmd.Close()
	decoded := make([]string, len(texts))
	var hidden []string
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		for item := msg.Next(); item != nil; item = msg.Next() {
			switch it := item.(type) {
			case imapclient.FetchItemDataBinarySectionSize:
				if sized != nil && slices.Equal(sized.path, it.Part) && plausibleSize(sized.part, it.Size) {
					sized.Size = int64(it.Size)
				}
			case imapclient.FetchItemDataBodySection:
				if it.Literal == nil {
					continue
				}
				for i, want := range sections {
					if decoded[i] == "" && it.MatchCommand(want) {
						dt := mailmsg.DecodeTextHidden(io.LimitReader(it.Literal, int64(partCap)+1), texts[i].part, keepHidden)
						decoded[i] = dt.Text
						d.warnings = append(d.warnings, dt.Warnings...)
						d.hidden += dt.Hidden
						if dt.HiddenText != "" {
							hidden = append(hidden, dt.HiddenText)
						}
						break
					}
				}
			}
		}
	}
	if err := cmd.Close(); err != nil {
		return decodedBody{}, err
	}
	d.text = joinTexts(decoded, texts, from)
	d.hiddenText = strings.Join(hidden, "\n\n")
	return d, nil
}

// joinTexts makes the body of the decoded texts (of texts), leaving out
// blank ones, and sets *from to the media type it comes from: text/plain
// if any part was, else the first.
func joinTexts(decoded []string, texts []textPart, from *string) string {
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
	return strings.Join(parts, "\n\n")
}
