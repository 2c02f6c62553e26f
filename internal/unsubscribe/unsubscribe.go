// Package unsubscribe reads a mailing list's unsubscribe options
// (List-Unsubscribe, RFC 2369) and does the one-click unsubscribe of
// RFC 8058: an HTTPS POST of "List-Unsubscribe=One-Click", made only
// when the sender asks for it (List-Unsubscribe-Post) and a DKIM
// signature the operator's receiving server checked covers both headers,
// through the egress check (public addresses only, each redirect checked
// again), without cookies, with a short timeout and a bounded read of the
// answer. It never fetches a link otherwise, and names no tool.
package unsubscribe

import (
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Caps on what a header may offer.
const (
	maxURIs   = 10
	maxURI    = 2000
	maxHeader = 8 << 10
)

// OneClickValue is the only List-Unsubscribe-Post value RFC 8058 defines.
const OneClickValue = "List-Unsubscribe=One-Click"

// Options are a message's ways to leave its list.
type Options struct {
	List     string   `json:"list,omitempty" desc:"the list's identifier (List-Id), when the message has one"`
	HTTPS    []string `json:"https,omitempty" desc:"https links to unsubscribe (List-Unsubscribe)"`
	Mailto   []string `json:"mailto,omitempty" desc:"mailto: addresses to unsubscribe by sending a message (List-Unsubscribe)"`
	OneClick bool     `json:"one_click" desc:"true when RFC 8058 one-click unsubscribe applies: the sender asks for it (List-Unsubscribe-Post) and a DKIM signature checked by the operator's receiving server covers both list headers; only then is the https link posted to"`
	Note     string   `json:"note" desc:"why one-click applies or not, in a sentence"`
	Ignored  []string `json:"ignored,omitempty" desc:"links left out: not https (an unencrypted http link) or not readable"`

	post bool // List-Unsubscribe-Post says One-Click
}

// Parse reads the List-Unsubscribe, List-Unsubscribe-Post and List-Id
// values; nil when there is no List-Unsubscribe. Only URIs in angle
// brackets count (RFC 2369 section 2); https links without credentials
// and mailto: links are kept, at most ten.
func Parse(listUnsubscribe, listUnsubscribePost, listID string) *Options {
	if strings.TrimSpace(listUnsubscribe) == "" {
		return nil
	}
	o := &Options{List: mailmsg.SanitizeLine(strings.TrimSpace(listID))}
	if utf8.RuneCountInString(o.List) > 200 {
		o.List, _, _ = mailmsg.Truncate(o.List, 0, 200)
	}
	if len(listUnsubscribe) > maxHeader {
		listUnsubscribe = listUnsubscribe[:maxHeader]
	}
	for n, rest := 0, listUnsubscribe; n < maxURIs; n++ {
		i := strings.IndexByte(rest, '<')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '>')
		if j < 0 {
			break
		}
		raw := strings.Join(strings.Fields(rest[i+1:i+j]), "") // folding may split a URI
		rest = rest[i+j+1:]
		switch u := checkURI(raw); {
		case u == "":
			o.Ignored = append(o.Ignored, shorten(raw))
		case strings.HasPrefix(u, "https:"):
			o.HTTPS = append(o.HTTPS, u)
		default:
			o.Mailto = append(o.Mailto, u)
		}
	}
	o.post = strings.EqualFold(strings.Join(strings.Fields(listUnsubscribePost), ""), OneClickValue)
	o.Decide("", "")
	return o
}

// Decide sets OneClick and its note: signedBy is the domain whose DKIM
// signature (checked by checker, the receiving server) covers
// List-Unsubscribe and List-Unsubscribe-Post, "" when there is none.
func (o *Options) Decide(signedBy, checker string) {
	if o == nil {
		return
	}
	o.OneClick = false
	switch {
	case !o.post:
		o.Note = "The sender offers no one-click unsubscribe (no List-Unsubscribe-Post: List-Unsubscribe=One-Click)."
	case len(o.HTTPS) == 0:
		o.Note = "The sender asks for one-click unsubscribe but gives no https link for it."
	case signedBy == "":
		o.Note = "The sender asks for one-click unsubscribe, but no DKIM signature checked by the operator's receiving server covers List-Unsubscribe and List-Unsubscribe-Post, as RFC 8058 requires, so the link is not posted to."
	default:
		o.OneClick = true
		o.Note = "One-click unsubscribe applies: the sender asks for it, and its DKIM signature by " + signedBy + ", checked by " + checker + ", covers both list headers."
	}
}

// checkURI is raw as a kept link (https without credentials, or mailto
// with an address), "" otherwise.
func checkURI(raw string) string {
	if raw == "" || len(raw) > maxURI || !utf8.ValidString(raw) || strings.ContainsAny(raw, "\x00\r\n\t ") {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		if u.Host == "" || u.User != nil || u.Opaque != "" {
			return ""
		}
		return mailmsg.SanitizeLine(raw)
	case "mailto":
		if m, ok := ParseMailto(raw); ok && len(m.To) > 0 {
			return mailmsg.SanitizeLine(raw)
		}
	}
	return ""
}

func shorten(s string) string {
	s = mailmsg.SanitizeLine(s)
	if utf8.RuneCountInString(s) > 100 {
		s, _, _ = mailmsg.Truncate(s, 0, 99)
		s += "…"
	}
	return s
}

// Mailto is a mailto: link read (RFC 6068).
type Mailto struct {
	To      []string
	Subject string
	Body    string
}

// ParseMailto reads a mailto: URI: the addresses (before "?" and in to=),
// subject and body.
func ParseMailto(raw string) (Mailto, bool) {
	var m Mailto
	if len(raw) < 7 || !strings.EqualFold(raw[:7], "mailto:") {
		return m, false
	}
	rest := raw[7:]
	addrs, query, _ := strings.Cut(rest, "?")
	add := func(list string) bool {
		dec, err := url.PathUnescape(list)
		if err != nil {
			return false
		}
		for _, a := range strings.Split(dec, ",") {
			if a = strings.TrimSpace(a); a != "" {
				if !strings.Contains(a, "@") || strings.ContainsAny(a, " <>\"\r\n") || len(a) > 254 {
					return false
				}
				m.To = append(m.To, a)
			}
		}
		return true
	}
	if !add(addrs) {
		return m, false
	}
	if query != "" {
		q, err := url.ParseQuery(query)
		if err != nil {
			return m, false
		}
		for k, vs := range q {
			switch strings.ToLower(k) {
			case "to":
				for _, v := range vs {
					if !add(url.PathEscape(v)) {
						return m, false
					}
				}
			case "subject":
				m.Subject = vs[0]
			case "body":
				m.Body = vs[0]
			}
		}
	}
	if len(m.To) > 5 {
		return m, false
	}
	return m, true
}

// Action is what unsubscribing from o does: a one-click POST to URL, a
// message to a mailto address, or only a link for the person to open.
type Action struct {
	Kind   string // OneClickPost, SendMail, OpenLink, or "" when o offers nothing
	URL    string // the https link (OneClickPost, OpenLink)
	Mailto Mailto // SendMail
	Raw    string // the mailto: link (SendMail)
}

// Kinds of Action.
const (
	OneClickPost = "one-click"
	SendMail     = "mailto"
	OpenLink     = "link"
)

// Choose picks how to unsubscribe: one-click when it applies, else the
// first mailto link, else the first https link for a person to open.
func (o *Options) Choose() Action {
	switch {
	case o == nil:
		return Action{}
	case o.OneClick:
		return Action{Kind: OneClickPost, URL: o.HTTPS[0]}
	case len(o.Mailto) > 0:
		m, _ := ParseMailto(o.Mailto[0])
		if strings.TrimSpace(m.Subject) == "" {
			m.Subject = "unsubscribe"
		}
		if strings.TrimSpace(m.Body) == "" {
			m.Body = "unsubscribe"
		}
		return Action{Kind: SendMail, Mailto: m, Raw: o.Mailto[0]}
	case len(o.HTTPS) > 0:
		return Action{Kind: OpenLink, URL: o.HTTPS[0]}
	}
	return Action{}
}
