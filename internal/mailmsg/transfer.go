package mailmsg

import (
	"bytes"
	"strings"
)

// Transfer-decoding problems worth a warning.
type transferProblem int

const (
	transferOK transferProblem = iota
	transferBadBase64
	transferUnknown
)

// transferDecode undoes a Content-Transfer-Encoding. It never fails: bad
// base64 is decoded as far as possible, bad quoted-printable escapes are
// kept literally, and an unknown encoding leaves the data as is.
func transferDecode(raw []byte, enc string) ([]byte, transferProblem) {
	switch transferEncoding(enc) {
	case encIdentity:
		return raw, transferOK
	case encQP:
		return decodeQP(raw), transferOK
	case encBase64:
		out, bad := decodeBase64(raw)
		if bad {
			return out, transferBadBase64
		}
		return out, transferOK
	}
	return raw, transferUnknown
}

// Transfer encodings as transferEncoding names them.
const (
	encIdentity = "identity" // 7bit, 8bit, binary: nothing to undo
	encQP       = "quoted-printable"
	encBase64   = "base64"
)

// transferEncoding names a Content-Transfer-Encoding value leniently (case,
// quotes and common misspellings); "" when it is unknown.
func transferEncoding(enc string) string {
	switch strings.ToLower(strings.Trim(strings.TrimSpace(enc), `"`)) {
	case "", "7bit", "8bit", "binary", "7-bit", "8-bit":
		return encIdentity
	case "quoted-printable", "quoted_printable", "qp":
		return encQP
	case "base64", "base-64":
		return encBase64
	}
	return ""
}

// decodeQP decodes quoted-printable leniently: "=XX" (either case) becomes
// the byte, "=" at the end of a line is a soft break, any other "=" is kept,
// trailing white space on a line is removed and line breaks become CRLF.
func decodeQP(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for len(raw) > 0 {
		line := raw
		eol := false
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
			eol = true
		} else {
			raw = nil
		}
		line = bytes.TrimRight(line, " \t\r")
		soft := false
		for i := 0; i < len(line); i++ {
			c := line[i]
			if c != '=' {
				out = append(out, c)
				continue
			}
			if i == len(line)-1 {
				soft = true
				break
			}
			if i+2 < len(line) {
				h, ok1 := unhex(line[i+1])
				l, ok2 := unhex(line[i+2])
				if ok1 && ok2 {
					out = append(out, h<<4|l)
					i += 2
					continue
				}
			}
			out = append(out, '=')
		}
		if eol && !soft {
			out = append(out, '\r', '\n')
		}
	}
	return out
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// base64Value returns the value of a standard base64 alphabet byte, or -1.
func base64Value(c byte) int {
	switch {
	case c >= 'A' && c <= 'Z':
		return int(c - 'A')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 26
	case c >= '0' && c <= '9':
		return int(c-'0') + 52
	case c == '+':
		return 62
	case c == '/':
		return 63
	}
	return -1
}

// decodeBase64 decodes base64 leniently: white space is skipped, "=" ends a
// quantum (so concatenated base64 blocks decode), other bytes outside the
// alphabet are skipped and reported as bad, as is a dangling single
// character at the end.
func decodeBase64(raw []byte) (out []byte, bad bool) {
	out = make([]byte, 0, len(raw)/4*3+3)
	var q uint32
	n := 0
	flush := func() {
		switch n {
		case 1:
			bad = true
		case 2:
			out = append(out, byte(q>>4))
		case 3:
			out = append(out, byte(q>>10), byte(q>>2))
		}
		q, n = 0, 0
	}
	for _, c := range raw {
		v := base64Value(c)
		if v < 0 {
			switch c {
			case '=':
				flush()
			case ' ', '\t', '\r', '\n', '\f', '\v':
			default:
				bad = true
			}
			continue
		}
		q = q<<6 | uint32(v)
		n++
		if n == 4 {
			out = append(out, byte(q>>16), byte(q>>8), byte(q))
			q, n = 0, 0
		}
	}
	flush()
	return out, bad
}
