package mailmsg

// Messages between agents of one mailbox are composed like any other
// (Compose: 7-bit, checked addresses, Message-ID, threading, tags) with
// a few header fields of their own added, which Draft has no place for.

import (
	"bytes"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Field is one extra header field: a name of printable ASCII and a value
// of any text (RFC 2047 encoded when it needs to be).
type Field struct{ Name, Value string }

// ComposeWith is Compose with extra header fields added at the end of
// the header. A value with a line break or a control character is a
// BadInput error naming the field.
func ComposeWith(d Draft, extra []Field) (raw []byte, messageID string, err error) {
	var add bytes.Buffer
	for _, f := range extra {
		if f.Name == "" || !isFieldName(f.Name) {
			return nil, "", mailerr.Newf(mailerr.Internal, "header field name %q is not valid", f.Name)
		}
		if err := CheckHeaderValue(f.Name, f.Value); err != nil {
			return nil, "", err
		}
		add.WriteString(fold(f.Name+": "+encodeText(f.Value)) + "\r\n")
	}
	raw, messageID, err = Compose(d)
	if err != nil || add.Len() == 0 {
		return raw, messageID, err
	}
	end := bytes.Index(raw, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, "", mailerr.New(mailerr.Internal, "the composed message has no end of header")
	}
	out := make([]byte, 0, len(raw)+add.Len())
	out = append(out, raw[:end+2]...)
	out = append(out, add.Bytes()...)
	out = append(out, raw[end+2:]...)
	return out, messageID, nil
}

// fold breaks a header line longer than 78 characters at its spaces
// (unfolding gives it back unchanged: only the CRLF goes).
func fold(line string) string {
	const width = 78
	var b strings.Builder
	n := 0
	for i, word := range strings.Split(line, " ") {
		if i > 0 {
			if n+1+len(word) > width {
				b.WriteString("\r\n")
				n = 0
			}
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

// isFieldName is RFC 5322's field-name: printable ASCII but ':'.
func isFieldName(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f || s[i] == ':' {
			return false
		}
	}
	return true
}
