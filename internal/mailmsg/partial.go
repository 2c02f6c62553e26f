package mailmsg

// Decoding the first bytes of a part, as a partial FETCH returns them: for
// previews, where fetching whole parts would cost too much.

import (
	"bytes"
	"io"
	"strings"

	"github.com/emersion/go-message/textproto"
)

// Nested is one step down into a multipart body: the boundary of the
// multipart, and the 1-based position of the child to enter.
type Nested struct {
	Boundary string
	Index    int
}

// NestedBody returns the raw body (still transfer-encoded) of a part nested
// in a multipart body, given the first bytes of that multipart body and the
// way down: path[0] picks a child of the multipart, path[1] a child of that
// child (itself a multipart), and so on. Only what head holds is returned:
// the body may be cut, and it is nil when it starts beyond head or the path
// does not fit the bytes.
func NestedBody(head []byte, path []Nested) []byte {
	for _, step := range path {
		if step.Boundary == "" || step.Index < 1 {
			return nil
		}
		mr := textproto.NewMultipartReader(bytes.NewReader(head), step.Boundary)
		var part *textproto.Part
		for range step.Index {
			var err error
			if part, err = mr.NextPart(); err != nil {
				return nil
			}
		}
		// A cut body ends in io.ErrUnexpectedEOF, with what was there.
		body, _ := io.ReadAll(part)
		head = body
	}
	return head
}

// DecodeTextHead is DecodeText for the first bytes of a text part, the rest
// not fetched: a base64 group, a quoted-printable escape or a character cut
// off at the end is dropped rather than shown as garbage. Warnings are left
// out: this is for previews.
func DecodeTextHead(head []byte, p Part) string {
	switch transferEncoding(p.Encoding) {
	case encBase64:
		head = wholeBase64Groups(head)
	case encQP:
		head = withoutCutEscape(head)
	}
	var d Decoded
	decodeText(head, p, false, &d)
	// A multi-byte character cut at the end decodes as U+FFFD.
	return strings.TrimRight(d.Text, "\uFFFD")
}

// wholeBase64Groups cuts base64 text after its last complete group of four
// characters (white space between them does not count).
func wholeBase64Groups(b []byte) []byte {
	n, end := 0, 0
	for i, c := range b {
		if base64Value(c) >= 0 || c == '=' {
			if n++; n%4 == 0 {
				end = i + 1
			}
		}
	}
	return b[:end]
}

// withoutCutEscape drops a quoted-printable escape cut off at the end ("="
// or "=4").
func withoutCutEscape(b []byte) []byte {
	switch n := len(b); {
	case n >= 1 && b[n-1] == '=':
		return b[:n-1]
	case n >= 2 && b[n-2] == '=':
		if _, ok := unhex(b[n-1]); ok {
			return b[:n-2]
		}
	}
	return b
}
