package demo

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"mime"
	"mime/quotedprintable"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
)

// This file writes RFC 5322 / MIME text by hand rather than with go-message's
// writer: go-message only writes UTF-8, and the seed needs legacy charsets,
// fixed boundaries (so every run produces the same bytes) and full control
// over header encodings.

// addr is a mailbox: display name (UTF-8) and address.
type addr struct{ name, email string }

// field is a header field whose value is already encoded.
type field struct{ name, value string }

// entity is a MIME entity: a leaf with an encoded body, or a multipart.
type entity struct {
	ctype  string            // media type, e.g. "text/plain"
	params map[string]string // Content-Type parameters; the boundary is added when written
	header []field           // Content-Transfer-Encoding, Content-Disposition, ...
	body   string            // leaf only: encoded, CRLF line ends, ends with CRLF
	parts  []*entity         // multipart only
}

// write writes the entity's header and body. Boundaries are derived from
// base and a counter, so output is deterministic.
func (e *entity) write(b *bytes.Buffer, base string, n *int) {
	params := make(map[string]string, len(e.params)+1)
	for k, v := range e.params {
		params[k] = v
	}
	var boundary string
	if e.parts != nil {
		*n++
		boundary = fmt.Sprintf("=_%s_%d", base, *n)
		params["boundary"] = boundary
	}
	writeField(b, "Content-Type", mime.FormatMediaType(e.ctype, params))
	for _, f := range e.header {
		writeField(b, f.name, f.value)
	}
	b.WriteString("\r\n")
	if e.parts == nil {
		b.WriteString(e.body)
		return
	}
	b.WriteString("This is a multi-part message in MIME format.\r\n")
	for _, p := range e.parts {
		b.WriteString("\r\n--" + boundary + "\r\n")
		p.write(b, base, n)
	}
	b.WriteString("\r\n--" + boundary + "--\r\n")
}

// writeField writes one header field, folding a long value at spaces.
func writeField(b *bytes.Buffer, name, value string) {
	line := name + ": "
	col := len(line)
	b.WriteString(line)
	for i, word := range strings.Split(value, " ") {
		if i > 0 {
			if col+1+len(word) > 76 {
				b.WriteString("\r\n ")
				col = 1
			} else {
				b.WriteString(" ")
				col++
			}
		}
		b.WriteString(word)
		col += len(word)
	}
	b.WriteString("\r\n")
}

// crlfText turns a Go string with \n line ends into CRLF text ending in CRLF.
func crlfText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.TrimRight(s, "\n") + "\n"
	return strings.ReplaceAll(s, "\n", "\r\n")
}

// wrapText hard-wraps lines longer than 76 bytes at spaces, keeping a "> "
// quote prefix, as a mail client would.
func wrapText(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		prefix := ""
		for strings.HasPrefix(line[len(prefix):], "> ") {
			prefix += "> "
		}
		for len(line) > 76 {
			cut := strings.LastIndex(line[:76], " ")
			if cut <= len(prefix) {
				break
			}
			out = append(out, line[:cut])
			line = prefix + line[cut+1:]
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func encodeTo(enc encoding.Encoding, s string) string {
	out, err := enc.NewEncoder().String(s)
	if err != nil {
		panic(fmt.Sprintf("demo: seed text not representable: %v", err)) // a bug in the seed
	}
	return out
}

// charsets the seed uses besides UTF-8.
var encodings = map[string]encoding.Encoding{
	"ISO-8859-1":   charmap.ISO8859_1,
	"windows-1252": charmap.Windows1252,
	"KOI8-R":       charmap.KOI8R,
	"Shift_JIS":    japanese.ShiftJIS,
}

// toCharset converts UTF-8 text to the bytes of charset.
func toCharset(charset, s string) string {
	if charset == "" || strings.EqualFold(charset, "utf-8") || strings.EqualFold(charset, "us-ascii") {
		return s
	}
	enc, ok := encodings[charset]
	if !ok {
		panic("demo: unknown seed charset " + charset)
	}
	return encodeTo(enc, s)
}

// encodeWords returns s as RFC 2047 encoded-words in charset ("" means
// UTF-8), or s itself if it is plain ASCII. Q encoding for Latin scripts, B
// otherwise, as mail clients do.
func encodeWords(charset, s string) string {
	if isASCII(s) {
		return s
	}
	if charset == "" {
		charset = "UTF-8"
	}
	raw := toCharset(charset, s)
	enc := mime.QEncoding
	switch strings.ToUpper(charset) {
	case "SHIFT_JIS", "KOI8-R":
		enc = mime.BEncoding
	case "UTF-8":
		// Mostly non-Latin text is shorter in base64.
		if nonASCII := len(s) - countASCII(s); nonASCII*3 > len(s) {
			enc = mime.BEncoding
		}
	}
	return enc.Encode(charset, raw)
}

func countASCII(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < utf8.RuneSelf {
			n++
		}
	}
	return n
}

// formatAddr formats a mailbox for a header, encoding a non-ASCII display
// name in charset and quoting one with specials.
func formatAddr(charset string, a addr) string {
	switch {
	case a.name == "":
		return a.email
	case !isASCII(a.name):
		return encodeWords(charset, a.name) + " <" + a.email + ">"
	case strings.ContainsAny(a.name, `()<>[]:;@\,."`):
		return `"` + strings.ReplaceAll(a.name, `"`, `\"`) + `" <` + a.email + ">"
	default:
		return a.name + " <" + a.email + ">"
	}
}

func formatAddrs(charset string, l []addr) string {
	s := make([]string, len(l))
	for i, a := range l {
		s[i] = formatAddr(charset, a)
	}
	return strings.Join(s, ", ")
}

// Leaf and multipart constructors.

// textPart is a text/<subtype> part in charset with the given transfer
// encoding ("7bit", "8bit", "quoted-printable" or "base64").
func textPart(subtype, charset, cte, text string) *entity {
	if subtype == "plain" && (cte == "7bit" || cte == "8bit") {
		text = wrapText(text)
	}
	raw := toCharset(charset, text)
	var body string
	switch cte {
	case "7bit", "8bit":
		body = crlfText(raw)
	case "quoted-printable":
		var b bytes.Buffer
		w := quotedprintable.NewWriter(&b)
		w.Write([]byte(strings.TrimRight(strings.ReplaceAll(raw, "\r\n", "\n"), "\n") + "\n"))
		w.Close()
		body = b.String()
	case "base64":
		body = base64Lines([]byte(crlfText(raw)))
	default:
		panic("demo: unknown transfer encoding " + cte)
	}
	return &entity{
		ctype:  "text/" + subtype,
		params: map[string]string{"charset": charset},
		header: []field{{"Content-Transfer-Encoding", cte}},
		body:   body,
	}
}

// plain is text/plain in UTF-8, 7bit if ASCII and 8bit otherwise.
func plain(text string) *entity {
	if isASCII(text) {
		return textPart("plain", "us-ascii", "7bit", text)
	}
	return textPart("plain", "utf-8", "8bit", text)
}

// html is text/html in UTF-8, quoted-printable.
func html(h string) *entity { return textPart("html", "utf-8", "quoted-printable", h) }

func alternative(text, h string) *entity {
	return &entity{ctype: "multipart/alternative", parts: []*entity{plain(text), html(h)}}
}

func mixed(parts ...*entity) *entity {
	return &entity{ctype: "multipart/mixed", parts: parts}
}

// attachment is a base64 attachment. A non-ASCII filename is written with
// RFC 2231 extended-parameter syntax (filename*=utf-8 and percent escapes),
// as mime.FormatMediaType writes it.
func attachment(ctype, filename string, data []byte) *entity {
	return &entity{
		ctype:  ctype,
		params: map[string]string{"name": filename},
		header: []field{
			{"Content-Transfer-Encoding", "base64"},
			{"Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filename, "size": fmt.Sprint(len(data))})},
		},
		body: base64Lines(data),
	}
}

// attachment2047 is an attachment whose non-ASCII filename is an RFC 2047
// encoded-word inside a quoted parameter: not valid MIME, but what several
// widespread clients send.
func attachment2047(ctype, filename string, data []byte) *entity {
	word := mime.QEncoding.Encode("utf-8", filename)
	return &entity{
		ctype:  ctype,
		params: map[string]string{"name": word},
		header: []field{
			{"Content-Transfer-Encoding", "base64"},
			{"Content-Disposition", `attachment; filename="` + word + `"`},
		},
		body: base64Lines(data),
	}
}

func base64Lines(data []byte) string {
	enc := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n")
	return b.String()
}

// The message.

// msg describes one seeded message.
type msg struct {
	tag     string // stable handle, unique per account
	folder  string
	age     time.Duration // how long before Start the message was sent
	zone    *time.Location
	from    addr
	to, cc  []addr
	subject string // UTF-8
	charset string // charset for encoded-words in the header; "" = UTF-8
	replyTo string // tag of the message this one answers (same thread)
	flags   []string
	extra   []field // more header fields, already encoded
	// authres are Authentication-Results values, written first, as the
	// receiving server prepends them.
	authres []string
	body    *entity
}

// messageID derives a stable Message-ID (without brackets) from the tag and
// the sender's domain.
func messageID(tag string, from addr) string {
	h := fnv.New32a()
	h.Write([]byte(tag))
	_, domain, _ := strings.Cut(from.email, "@")
	return fmt.Sprintf("%08x.%s@mail.%s", h.Sum32(), tag, domain)
}

// render produces the RFC 5322 text with CRLF line ends. refs is the
// References list (oldest first); its last entry becomes In-Reply-To.
func (m *msg) render(date time.Time, id string, refs []string) []byte {
	var b bytes.Buffer
	for _, v := range m.authres {
		writeField(&b, "Authentication-Results", v)
	}
	writeField(&b, "Date", date.Format(time.RFC1123Z))
	writeField(&b, "From", formatAddr(m.charset, m.from))
	if len(m.to) > 0 {
		writeField(&b, "To", formatAddrs(m.charset, m.to))
	}
	if len(m.cc) > 0 {
		writeField(&b, "Cc", formatAddrs(m.charset, m.cc))
	}
	// An empty Subject field is legal and happens.
	writeField(&b, "Subject", encodeWords(m.charset, m.subject))
	writeField(&b, "Message-ID", "<"+id+">")
	if len(refs) > 0 {
		writeField(&b, "In-Reply-To", "<"+refs[len(refs)-1]+">")
		writeField(&b, "References", "<"+strings.Join(refs, "> <")+">")
	}
	for _, f := range m.extra {
		writeField(&b, f.name, f.value)
	}
	writeField(&b, "MIME-Version", "1.0")
	n := 0
	m.body.write(&b, fmt.Sprintf("%08x", fnvString(id)), &n)
	return b.Bytes()
}

func fnvString(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// Binary fixtures.

// pdfDoc returns a small one-page PDF showing title. It opens in most
// viewers; it is there to be a realistic binary attachment.
func pdfDoc(title string) []byte {
	content := fmt.Sprintf("BT /F1 18 Tf 72 770 Td (%s) Tj ET", title)
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// pngImage returns a w×h PNG with a gradient; hue varies the colours.
func pngImage(w, h int, hue uint8) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), hue, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err) // cannot fail on a bytes.Buffer
	}
	return b.Bytes()
}
