package mailmsg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrNoHeader is returned by ParseMessage when the input does not start
// with a header that has at least one readable field.
var ErrNoHeader = errors.New("mailmsg: the message has no readable header")

// DefaultMessageLimit is the limit ParseMessage uses when given limit <= 0.
const DefaultMessageLimit = 32 << 20

const (
	maxDepth = 20  // nesting of multiparts
	maxParts = 500 // parts in one message
)

// Attachment is a non-text part of a message (or a text part marked as an
// attachment), as ParseMessage lists it.
type Attachment struct {
	PartID      string // IMAP part number, e.g. "2" or "1.2", for BODY.PEEK[PartID]
	Filename    string // decoded (RFC 2231, RFC 2047), sanitised, without directories; may be empty
	ContentType string // lower-case media type without parameters, e.g. "application/pdf"
	Size        int64  // size after transfer decoding, in bytes
	Inline      bool   // Content-Disposition: inline, or a multipart/related part with a Content-ID
}

// Parsed is the result of ParseMessage.
type Parsed struct {
	Text          string // best text body, clean UTF-8 (see DecodeText); may be empty
	HTMLConverted bool   // some of Text was converted from HTML
	Attachments   []Attachment
	Warnings      []string // problems met, as sentences; the result is then a best effort
}

// ParseMessage decodes a whole (small) RFC 5322 message: it returns the best
// text body (text/plain preferred in multipart/alternative, else HTML
// converted with HTMLToText; the text parts of a multipart/mixed joined in
// order) and the attachments, with their part numbers as IMAP numbers parts.
// An attached message (message/rfc822) is listed as one attachment; fetch
// its part and call ParseMessage on it to read it.
//
// At most limit bytes are read (DefaultMessageLimit if limit <= 0); a longer
// message is cut, with a warning. A malformed part (no readable header, a
// multipart without boundary, nesting deeper than 20, more than 500 parts)
// adds a warning and is skipped; broken base64 is decoded as far as possible,
// with a warning. The only errors are a failure to read r (wrapped) and
// ErrNoHeader.
func ParseMessage(r io.Reader, limit int64) (*Parsed, error) {
	if limit <= 0 {
		limit = DefaultMessageLimit
	}
	data, err := io.ReadAll(io.LimitReader(r, min(limit, math.MaxInt64-1)+1))
	if err != nil {
		return nil, fmt.Errorf("mailmsg: reading the message: %w", err)
	}
	p := &msgParser{}
	if int64(len(data)) > limit {
		data = data[:limit]
		p.w.add(fmt.Sprintf("The message is larger than %d bytes; only the first %d bytes were read, so parts of it may be missing.", limit, limit))
	}
	h, body, ok := parseHeader(data, true)
	if !ok {
		return nil, ErrNoHeader
	}
	if h.bad > 0 {
		p.w.add(fmt.Sprintf("The message header has %d malformed line(s); they were ignored.", h.bad))
	}
	root := p.entity(h, body, "", 0, "")

	res := &Parsed{}
	var texts []string
	for _, leaf := range p.bodyLeaves(root) {
		var pw warnList
		txt := decodeText(leaf.body, leaf.textPart(), &pw)
		for _, msg := range pw.list {
			p.w.add("Part " + leaf.id + ": " + msg)
		}
		if txt != "" {
			texts = append(texts, txt)
			if leaf.mediaType != "text/plain" {
				res.HTMLConverted = true
			}
		}
	}
	res.Text = strings.Join(texts, "\n\n")
	p.attachments(root, &res.Attachments)
	res.Warnings = p.w.result()
	return res, nil
}

// mimeHeader holds the header fields ParseMessage uses.
type mimeHeader struct {
	contentType, encoding, disposition, contentID, subject string
	bad                                                    int // malformed lines ignored
}

// parseHeader splits a header from its body. It is lenient: malformed lines
// are counted and ignored, a missing blank line makes everything header.
// ok is false when there are header lines but none is a valid field. The
// top header may start with an mbox "From " line.
func parseHeader(data []byte, top bool) (h mimeHeader, body []byte, ok bool) {
	if top && bytes.HasPrefix(data, []byte("From ")) {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		} else {
			data = nil
		}
	}
	valid, lines := 0, 0
	inField := false
	// The field being read, if it is one we keep: its value is
	// data[valStart:valEnd], continuation lines included.
	var dst *string
	valStart, valEnd := 0, 0
	finish := func() {
		if dst != nil {
			*dst = unfold(data[valStart:valEnd])
			dst = nil
		}
	}
	pos := 0
	for pos < len(data) {
		lineStart := pos
		lineEnd, next := len(data), len(data)
		if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
			lineEnd, next = pos+i, pos+i+1
		}
		line := bytes.TrimRight(data[pos:lineEnd], "\r")
		if len(line) == 0 {
			finish()
			return h, data[next:], valid > 0 || lines == 0
		}
		lines++
		if line[0] == ' ' || line[0] == '\t' {
			if !inField {
				h.bad++
			}
			valEnd = lineEnd
			pos = next
			continue
		}
		finish()
		colon := bytes.IndexByte(line, ':')
		key := bytes.TrimRight(line[:max(colon, 0)], " \t")
		pos = next
		if colon <= 0 || len(key) == 0 || !validHeaderKey(key) {
			h.bad++
			inField = false
			continue
		}
		valid++
		inField = true
		var d *string
		switch strings.ToLower(string(key)) {
		case "content-type":
			d = &h.contentType
		case "content-transfer-encoding":
			d = &h.encoding
		case "content-disposition":
			d = &h.disposition
		case "content-id":
			d = &h.contentID
		case "subject":
			d = &h.subject
		}
		if d != nil && *d == "" { // the first of duplicate fields wins
			dst = d
			valStart = lineStart + colon + 1
			valEnd = lineEnd
		}
	}
	finish()
	return h, nil, valid > 0 || lines == 0
}

// unfold joins a folded header value and trims it; values are capped at
// 64 KiB.
func unfold(v []byte) string {
	if len(v) > 64<<10 {
		v = v[:64<<10]
	}
	var b strings.Builder
	b.Grow(len(v))
	for _, c := range v {
		if c != '\r' && c != '\n' {
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}

func validHeaderKey(k []byte) bool {
	for _, c := range k {
		if c < 33 || c > 126 || c == ':' {
			return false
		}
	}
	return true
}

// mimePart is one node of the MIME tree.
type mimePart struct {
	id         string // IMAP part number ("" for a multipart message itself)
	mediaType  string
	params     map[string]string
	encoding   string
	disp       string
	dispParams map[string]string
	contentID  string
	parentType string
	body       []byte // raw (transfer-encoded) body of a leaf
	multipart  bool
	children   []*mimePart
	skip       bool
}

func (m *mimePart) textPart() Part {
	return Part{
		MediaType: m.mediaType,
		Charset:   m.params["charset"],
		Encoding:  m.encoding,
		Format:    m.params["format"],
		DelSp:     strings.EqualFold(m.params["delsp"], "yes"),
	}
}

// isBodyText reports whether the part is text meant to be read in the body
// rather than an attachment.
func (m *mimePart) isBodyText() bool {
	if m.multipart || m.skip || (m.mediaType != "text/plain" && m.mediaType != "text/html") {
		return false
	}
	if m.disp == "attachment" {
		return false
	}
	return m.disp == "inline" || m.filename() == ""
}

func (m *mimePart) filename() string {
	if n := m.dispParams["filename"]; n != "" {
		return n
	}
	return m.params["name"]
}

type msgParser struct {
	w     warnList
	parts int
}

func where(id string) string {
	if id == "" {
		return "The message"
	}
	return "Part " + id
}

// entity builds the MIME tree for one entity. id is its IMAP part number
// ("" for the message itself).
func (p *msgParser) entity(h mimeHeader, body []byte, id string, depth int, parentType string) *mimePart {
	mt, params := parseMediaType(h.contentType)
	if !validMediaType(mt) {
		mt = "text/plain"
		if parentType == "multipart/digest" {
			mt = "message/rfc822"
		}
	}
	disp, dispParams := parseMediaType(h.disposition)
	m := &mimePart{
		id: id, mediaType: mt, params: params, disp: disp, dispParams: dispParams,
		encoding: h.encoding, contentID: strings.Trim(strings.TrimSpace(h.contentID), "<>"),
		parentType: parentType,
	}
	if !strings.HasPrefix(mt, "multipart/") {
		if m.id == "" {
			m.id = "1" // IMAP calls the body of a non-multipart message part 1
		}
		m.body = body
		return m
	}
	m.multipart = true
	if depth >= maxDepth {
		p.w.add(where(id) + " is nested too deeply; it was skipped.")
		m.skip = true
		return m
	}
	boundary := params["boundary"]
	if boundary == "" {
		p.w.add(where(id) + " is a multipart without a boundary; it was skipped.")
		m.skip = true
		return m
	}
	chunks := splitMultipart(body, boundary)
	if len(chunks) == 0 {
		p.w.add(where(id) + " is a multipart with no parts.")
	}
	for i, chunk := range chunks {
		if p.parts >= maxParts {
			p.w.add(fmt.Sprintf("The message has more than %d parts; the rest were skipped.", maxParts))
			break
		}
		p.parts++
		childID := strconv.Itoa(i + 1)
		if id != "" {
			childID = id + "." + childID
		}
		ch, cbody, ok := parseHeader(chunk, false)
		if !ok {
			p.w.add("Part " + childID + " has no readable header; it was skipped.")
			m.children = append(m.children, &mimePart{id: childID, skip: true})
			continue
		}
		if ch.bad > 0 {
			p.w.add(fmt.Sprintf("Part %s has %d malformed header line(s); they were ignored.", childID, ch.bad))
		}
		m.children = append(m.children, p.entity(ch, cbody, childID, depth+1, mt))
	}
	return m
}

func validMediaType(mt string) bool {
	typ, sub, ok := strings.Cut(mt, "/")
	return ok && len(mt) <= 127 && typ != "" && sub != "" && isToken(typ) && isToken(sub)
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7F || strings.IndexByte("()<>@,;:\\\"/[]?=", c) >= 0 {
			return false
		}
	}
	return true
}

// splitMultipart returns the bodies of the parts of a multipart body
// (preamble and epilogue dropped). A delimiter is a line "--boundary" or
// "--boundary--" followed only by white space; the line break before it
// belongs to it. Without a closing delimiter the last part runs to the end.
// Searching for "\n--boundary" keeps this linear whatever the boundary.
func splitMultipart(body []byte, boundary string) [][]byte {
	delim := []byte("\n--" + boundary)
	var parts [][]byte
	start := -1 // start of the current part
	pos := 0
	// A delimiter on the very first line has no line break before it.
	lineAt, after, closing, found := 0, 0, false, false
	if bytes.HasPrefix(body, delim[1:]) {
		if a, c, ok := delimiterRest(body, len(delim)-1); ok {
			lineAt, after, closing, found = 0, a, c, true
		}
	}
	for {
		if !found {
			for {
				k := bytes.Index(body[pos:], delim)
				if k < 0 {
					break
				}
				k += pos
				if a, c, ok := delimiterRest(body, k+len(delim)); ok {
					lineAt, after, closing, found = k, a, c, true
					break
				}
				pos = k + 1
			}
		}
		if !found {
			if start >= 0 {
				parts = append(parts, body[start:])
			}
			return parts
		}
		if start >= 0 {
			end := lineAt
			if end > start && body[end-1] == '\r' {
				end--
			}
			parts = append(parts, body[start:max(end, start)])
		}
		if closing || len(parts) >= maxParts+1 {
			return parts
		}
		// The line break ending this delimiter line may start the next one
		// (an empty part).
		start, pos, found = after, max(after-1, 0), false
	}
}

// delimiterRest checks what follows "--boundary" at body[i:]: an optional
// "--" (closing delimiter), then only spaces or tabs to the end of the line.
// It returns where the next line starts.
func delimiterRest(body []byte, i int) (after int, closing, ok bool) {
	if bytes.HasPrefix(body[i:], []byte("--")) {
		closing = true
		i += 2
	}
	for i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r') {
		i++
	}
	if i == len(body) {
		return i, closing, true
	}
	if body[i] == '\n' {
		return i + 1, closing, true
	}
	return 0, false, false
}

// bodyLeaves picks the text parts that make up the body, in order.
func (p *msgParser) bodyLeaves(m *mimePart) []*mimePart {
	if m.skip {
		return nil
	}
	if !m.multipart {
		if m.isBodyText() {
			return []*mimePart{m}
		}
		return nil
	}
	switch m.mediaType {
	case "multipart/alternative":
		var best []*mimePart
		for _, c := range m.children {
			leaves := p.bodyLeaves(c)
			for _, l := range leaves {
				if l.mediaType == "text/plain" {
					return leaves
				}
			}
			if len(leaves) > 0 {
				best = leaves // the last (richest) HTML alternative
			}
		}
		return best
	case "multipart/related":
		if len(m.children) == 0 {
			return nil
		}
		root := m.children[0]
		if start := strings.Trim(m.params["start"], "<> "); start != "" {
			for _, c := range m.children {
				if c.contentID == start {
					root = c
					break
				}
			}
		}
		return p.bodyLeaves(root)
	case "multipart/signed":
		if len(m.children) == 0 {
			return nil
		}
		return p.bodyLeaves(m.children[0])
	case "multipart/encrypted":
		p.w.add(where(m.id) + " is encrypted; its text cannot be shown.")
		return nil
	}
	var out []*mimePart
	for _, c := range m.children {
		out = append(out, p.bodyLeaves(c)...)
	}
	return out
}

// attachments lists the leaves that are not body text.
func (p *msgParser) attachments(m *mimePart, out *[]Attachment) {
	if m.skip {
		return
	}
	if m.multipart {
		for _, c := range m.children {
			p.attachments(c, out)
		}
		return
	}
	if m.isBodyText() {
		return
	}
	data, problem := transferDecode(m.body, m.encoding)
	switch problem {
	case transferBadBase64:
		p.w.add("Part " + m.id + " has invalid base64 data; it was decoded as far as possible and its size is approximate.")
	case transferUnknown:
		p.w.add(fmt.Sprintf("Part %s has the unknown transfer encoding %s; its size is that of the encoded data.", m.id, quoteValue(m.encoding)))
	}
	name := m.filename()
	if name == "" && m.mediaType == "message/rfc822" {
		if h, _, ok := parseHeader(data, true); ok && h.subject != "" {
			name = h.subject + ".eml"
		} else {
			name = "message.eml"
		}
	}
	ct := m.mediaType
	if utf8.RuneCountInString(ct) > 100 {
		ct, _, _ = Truncate(ct, 0, 100)
	}
	*out = append(*out, Attachment{
		PartID:      m.id,
		Filename:    cleanFilename(name),
		ContentType: SanitizeLine(ct),
		Size:        int64(len(data)),
		Inline:      m.disp == "inline" || (m.disp == "" && m.parentType == "multipart/related" && m.contentID != ""),
	})
}

// cleanFilename decodes and sanitises an attachment name and drops any
// directory part ("../../x" and "C:\x" become "x").
func cleanFilename(name string) string {
	name = DecodeHeader(name)
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = SanitizeLine(name)
	if name == "." || name == ".." {
		return ""
	}
	if utf8.RuneCountInString(name) > 255 {
		name, _, _ = Truncate(name, 0, 255)
	}
	return name
}
