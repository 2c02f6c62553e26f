package mailmsg

import (
	"strings"
	"time"
	"unicode"
)

// forwardPrefixes are the forward markers ForwardSubject removes before
// adding its own: English (Fwd, Fw), German (WG) and French (TR), any case.
var forwardPrefixes = []string{"fwd", "fw", "wg", "tr"}

// ForwardSubject returns the subject of a forward of a message with the
// given subject: exactly one "Fwd: " followed by the subject without the
// forward markers it started with ("Fwd:", "FW:", "WG:", "TR:").
func ForwardSubject(subject string) string {
	s := strings.TrimFunc(subject, unicode.IsSpace)
	for {
		cut := false
		for _, p := range forwardPrefixes {
			if len(s) > len(p) && strings.EqualFold(s[:len(p)], p) {
				if rest := strings.TrimLeft(s[len(p):], " \t"); strings.HasPrefix(rest, ":") {
					s, cut = strings.TrimLeftFunc(rest[1:], unicode.IsSpace), true
					break
				}
			}
		}
		if !cut {
			break
		}
	}
	return "Fwd: " + s
}

// Forwarded is what a forward quotes of the original's header.
type Forwarded struct {
	From, To, Cc []Address
	Date         time.Time
	Subject      string
}

// ForwardedBody is the text of a forward: note (the sender's own words),
// then the original's From, Date, Subject, To and Cc in a block as mail
// clients write it, then the original's text.
func ForwardedBody(note string, h Forwarded, text string) string {
	var b strings.Builder
	if note = strings.TrimRight(crlfToLF(note), " \t\n"); note != "" {
		b.WriteString(note)
		b.WriteString("\n\n")
	}
	b.WriteString("---------- Forwarded message ----------\n")
	line := func(k, v string) {
		if v != "" {
			b.WriteString(k + ": " + SanitizeLine(v) + "\n")
		}
	}
	line("From", addressText(h.From))
	if !h.Date.IsZero() {
		line("Date", h.Date.Format(dateLayout))
	}
	line("Subject", h.Subject)
	line("To", addressText(h.To))
	line("Cc", addressText(h.Cc))
	b.WriteString("\n")
	b.WriteString(crlfToLF(text))
	if !strings.HasSuffix(text, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

// addressText writes addresses for people: "Name <a@x>, b@x".
func addressText(as []Address) string {
	parts := make([]string, 0, len(as))
	for _, a := range as {
		if a.Name == "" {
			parts = append(parts, a.Email)
		} else {
			parts = append(parts, a.Name+" <"+a.Email+">")
		}
	}
	return strings.Join(parts, ", ")
}

// UndoTransferEncoding decodes the raw bytes of an attachment carried into
// a forward: base64 and quoted-printable undone leniently (as DecodeText
// does), anything else as is. damaged reports base64 that was broken (what
// could be decoded is returned) or an unknown encoding (returned as is).
func UndoTransferEncoding(raw []byte, encoding string) (data []byte, damaged bool) {
	out, problem := transferDecode(raw, encoding)
	return out, problem != transferOK
}
