package mailmsg

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxPartBytes is how much of one raw (still transfer-encoded) part
// DecodeText reads; the rest is ignored with a warning.
const MaxPartBytes = 16 << 20

// Part describes one body part as the IMAP layer knows it from BODYSTRUCTURE.
type Part struct {
	MediaType string // "text/plain", "text/html"; empty means text/plain
	Charset   string // the charset parameter; empty means US-ASCII (or UTF-8 if valid)
	Encoding  string // Content-Transfer-Encoding: 7bit, 8bit, quoted-printable, base64, binary

	// Format and DelSp are the RFC 3676 parameters of text/plain
	// ("format=flowed; delsp=yes"); flowed text is unwrapped.
	Format string
	DelSp  bool
}

// mediaType returns the lower-case media type without parameters.
func (p Part) mediaType() string {
	mt, _, _ := strings.Cut(p.MediaType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

func (p Part) isHTML() bool {
	mt := p.mediaType()
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// DecodeText turns the raw bytes of one text part (transfer-encoded, in its
// charset) into clean UTF-8 text for a model: it undoes the transfer
// encoding, converts the charset, turns HTML into text (HTMLToText), unwraps
// format=flowed text, sanitises (Sanitize), normalises line endings to \n,
// trims trailing spaces and collapses runs of blank lines.
//
// It never fails. Problems (an unknown charset, broken base64, a part larger
// than MaxPartBytes, a read error) come back as warnings, which are
// sentences a person or a model can read; the text is then a best effort.
func DecodeText(r io.Reader, p Part) (text string, warnings []string) {
	d := decodeTextFrom(r, p, false)
	if d.Hidden > 0 {
		d.warnings.add(HiddenWarning(d.Hidden))
	}
	return d.Text, d.warnings.result()
}

// Decoded is one text part as DecodeTextHidden returns it.
type Decoded struct {
	Text       string   // as DecodeText returns it
	HiddenText string   // the text of the hidden HTML elements, one line each (when asked for); then, after UnsureLabel, text kept in Text that may be hidden
	Hidden     int      // how many hidden HTML elements had text (outermost ones)
	Warnings   []string // DecodeText's, without the one about hidden elements (HiddenWarning)
	warnings   warnList
}

// DecodeTextHidden is DecodeText that also tells how many HTML elements
// with text were left out because mail clients hide them, and with
// keepHidden collects their text (sanitised like the text) in HiddenText.
func DecodeTextHidden(r io.Reader, p Part, keepHidden bool) Decoded {
	d := decodeTextFrom(r, p, keepHidden)
	d.Warnings = d.warnings.result()
	return d
}

func decodeTextFrom(r io.Reader, p Part, keepHidden bool) Decoded {
	raw, err := readPart(r)
	var d Decoded
	if err != nil {
		d.warnings.add("Reading the part failed, so the text may be incomplete.")
	}
	if len(raw) > MaxPartBytes {
		raw = raw[:MaxPartBytes]
		d.warnings.add(fmt.Sprintf("The part is larger than %d MiB; only the first %d MiB were decoded.", MaxPartBytes>>20, MaxPartBytes>>20))
	}
	decodeText(raw, p, keepHidden, &d)
	return d
}

// readPart reads at most MaxPartBytes+1 bytes of r. When r says how much
// it holds (a Size method, as IMAP literals have, possibly behind an
// io.LimitedReader), the buffer is allocated once at that size: io.ReadAll's
// doubling would allocate about twice a large part's size in garbage
// (cmd/mailbox-bench: peak RSS reading a 25 MB text body).
func readPart(r io.Reader) ([]byte, error) {
	limit := int64(MaxPartBytes + 1)
	hint := int64(-1)
	inner := r
	if lr, ok := r.(*io.LimitedReader); ok {
		limit, inner = min(limit, lr.N), lr.R
	}
	if s, ok := inner.(interface{ Size() int64 }); ok && s.Size() >= 0 {
		hint = min(s.Size(), limit)
	}
	if hint < 0 {
		return io.ReadAll(io.LimitReader(r, limit))
	}
	// One byte of room beyond the size, to see the end without growing.
	buf := make([]byte, 0, hint+1)
	lr := io.LimitReader(r, limit)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // the size was understated
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// decodeText is DecodeText on bytes already read: it sets d's text,
// hidden text and count, and adds its warnings.
func decodeText(raw []byte, p Part, keepHidden bool, d *Decoded) {
	w := &d.warnings
	data, problem := transferDecode(raw, p.Encoding)
	switch problem {
	case transferBadBase64:
		w.add("The part has invalid base64 data; it was decoded as far as possible.")
	case transferUnknown:
		w.add(fmt.Sprintf("The transfer encoding %s is unknown; the part was read as it is.", quoteValue(p.Encoding)))
	}

	mt := p.mediaType()
	html := p.isHTML()
	if mt != "" && !strings.HasPrefix(mt, "text/") && !html {
		w.add(fmt.Sprintf("The part has the media type %s, not text; it was read as plain text.", quoteValue(mt)))
	}

	label := p.Charset
	if html && (normCharset(label) == "" || normCharset(label) == "us-ascii") {
		if sniffed := sniffHTMLCharset(data); sniffed != "" {
			label = sniffed
		}
	}
	s, guess, ok := decodeCharset(data, label)
	if !ok {
		w.add(fmt.Sprintf("The charset %s is unknown; the text was decoded as %s and may be garbled.", quoteValue(label), guess))
	}

	if html {
		h := convertHTML(s, keepHidden)
		d.Text, d.HiddenText, d.Hidden = h.text, h.hidden, h.count
		if h.unsureCount > 0 {
			w.add(UnsureWarning(h.unsureCount))
		}
		if h.unsure != "" {
			if d.HiddenText != "" {
				d.HiddenText += "\n"
			}
			d.HiddenText += UnsureLabel + "\n" + h.unsure
		}
		return
	}
	if strings.EqualFold(strings.TrimSpace(p.Format), "flowed") {
		s = unflow(s, p.DelSp)
	}
	d.Text = normalizeText(Sanitize(s))
}

// unflow joins the soft line breaks of RFC 3676 format=flowed text: a line
// ending in a space continues on the next line of the same quote depth.
// Space-stuffing is removed; the signature separator "-- " stays a line.
func unflow(s string, delsp bool) string {
	var b strings.Builder
	b.Grow(len(s))
	open := false // the previous line was flowed and is waiting for its continuation
	openDepth := 0
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, "\r\n")
		depth := 0
		for depth < len(line) && line[depth] == '>' {
			depth++
		}
		content := line[depth:]
		content = strings.TrimPrefix(content, " ") // space-stuffing
		if open && depth != openDepth {
			b.WriteByte('\n') // a quote depth change ends a paragraph
			open = false
		}
		if !open && depth > 0 {
			b.WriteString(strings.Repeat(">", depth))
			b.WriteByte(' ')
		}
		flowed := strings.HasSuffix(content, " ") && content != "-- "
		if flowed && delsp {
			content = content[:len(content)-1]
		}
		b.WriteString(content)
		if flowed {
			open, openDepth = true, depth
		} else {
			b.WriteByte('\n')
			open = false
		}
	}
	return b.String()
}

// warnList collects warnings, without duplicates and at most maxWarnings.
type warnList struct {
	list    []string
	dropped int
}

const maxWarnings = 20

func (w *warnList) add(msg string) {
	for _, m := range w.list {
		if m == msg {
			return
		}
	}
	if len(w.list) >= maxWarnings {
		w.dropped++
		return
	}
	w.list = append(w.list, Sanitize(msg))
}

func (w *warnList) result() []string {
	if w.dropped > 0 {
		return append(w.list, fmt.Sprintf("%d more warning(s) were left out.", w.dropped))
	}
	return w.list
}

// quoteValue quotes a sender-controlled value for a warning.
func quoteValue(v string) string { return quoteCapped(v, 40) }

// quoteCapped quotes v for a message shown to the user: one line,
// sanitised, at most n runes (the last one "…" when cut).
func quoteCapped(v string, n int) string {
	v = SanitizeLine(v)
	if utf8.RuneCountInString(v) > n {
		v, _, _ = Truncate(v, 0, n-1)
		v += "…"
	}
	return fmt.Sprintf("%q", v)
}
