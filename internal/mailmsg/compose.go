package mailmsg

// Composing outgoing mail. Everything Compose writes is 7-bit ASCII with CRLF
// line endings and lines of at most 998 bytes, so that the submission layer
// never needs SMTPUTF8 or 8BITMIME: header text is RFC 2047 encoded, file
// names RFC 2231 encoded, text parts quoted-printable and attachments base64.

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	netmail "net/mail"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/emersion/go-message/mail"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Address is one mailbox: an optional display name (any Unicode text) and an
// ASCII addr-spec such as "user@example.com".
type Address struct{ Name, Email string }

// String formats a as it would appear in a header field, without checking it.
func (a Address) String() string {
	return (&netmail.Address{Name: a.Name, Address: a.Email}).String()
}

// OutAttachment is a file to attach to an outgoing message.
type OutAttachment struct {
	Filename    string // any Unicode; RFC 2231 encoded on the wire. May be empty.
	ContentType string // e.g. "application/pdf"; "" means application/octet-stream
	Data        []byte
}

// Calendar is the text/calendar alternative of a message (RFC 6047).
type Calendar struct {
	Method string // the iTIP method, REPLY: the Content-Type's method parameter
	Data   []byte // the iCalendar object, UTF-8, CRLF line ends
}

// Draft is an outgoing message before Compose renders it.
type Draft struct {
	From    Address
	ReplyTo []Address
	To, Cc  []Address
	// Bcc recipients get the message through the SMTP envelope only: Compose
	// never writes a Bcc header. See Recipients.
	Bcc []Address

	Subject string
	Text    string // plain text body; made from HTML with HTMLToText when empty and HTML is set
	HTML    string // optional HTML alternative

	Attachments []OutAttachment

	// Calendar, when set, is an iCalendar object sent beside the text as
	// the last alternative (iMIP, RFC 6047): a meeting answer.
	Calendar *Calendar

	// Threading: message ids without angle brackets (brackets are tolerated
	// and removed). InReplyTo is also appended to References when missing
	// there, as RFC 5322 section 3.6.4 asks.
	InReplyTo  string
	References []string

	// Tags are short labels written as the X-Mailbox-Tags header, for
	// agents that filter their mail by them (see CheckTag).
	Tags []string

	Date            time.Time // zero means now
	MessageIDDomain string    // right-hand side of the generated Message-ID; default: the From domain

	// MessageID, when set, is used instead of a generated one (without
	// angle brackets): to render a second copy of a message already
	// composed, such as the sender's Sent copy.
	MessageID string
	// SentCopy renders the sender's own copy: the Bcc header is written,
	// as mail clients keep it in the Sent folder so the sender can see who
	// got a blind copy. Such a rendering must never be submitted.
	SentCopy bool
}

const (
	// maxWord is the longest run of non-blank header text written as is; a
	// longer one is RFC 2047 encoded so that no line exceeds 998 bytes
	// (RFC 5322 section 2.1.1) and the text survives folding unchanged.
	maxWord = 900
	// maxAddrSpec is RFC 5321's limit on a path (256 with the brackets).
	maxAddrSpec = 254
	// dateLayout is RFC 5322 section 3.3.
	dateLayout = "Mon, 02 Jan 2006 15:04:05 -0700"
)

// Compose renders d as an RFC 5322 message and returns it with its generated
// Message-ID (without angle brackets).
//
// The header has Date, From, Reply-To, To, Cc, Subject, Message-ID,
// In-Reply-To, References and MIME-Version, all ASCII on the wire: non-ASCII
// display names and subjects are RFC 2047 encoded. Bcc is never written,
// except in a SentCopy.
// The body is text/plain, or multipart/alternative (text, HTML, and the
// Calendar last) when HTML or Calendar is set, inside multipart/mixed with
// base64 attachments when there are any.
// Text parts are UTF-8, quoted-printable.
//
// Input problems (a control character or line break in a header value, an
// invalid or non-ASCII email address, a bad content type) are
// *mailerr.Error of kind BadInput naming the field.
func Compose(d Draft) (raw []byte, messageID string, err error) {
	var hdr headerList

	date := d.Date
	if date.IsZero() {
		date = time.Now()
	}
	hdr.add("Date", date.Format(dateLayout))

	from, err := checkAddress("From", d.From)
	if err != nil {
		return nil, "", err
	}
	hdr.add("From", from.header)
	for _, f := range []struct {
		name  string
		addrs []Address
	}{{"Reply-To", d.ReplyTo}, {"To", d.To}, {"Cc", d.Cc}, {"Bcc", d.Bcc}} {
		list, err := checkAddressList(f.name, f.addrs)
		if err != nil {
			return nil, "", err
		}
		if (f.name != "Bcc" || d.SentCopy) && len(list) > 0 { // Bcc is checked, written only in the sender's copy
			hdr.add(f.name, list)
		}
	}

	if err := CheckHeaderValue("Subject", d.Subject); err != nil {
		return nil, "", err
	}
	hdr.add("Subject", encodeText(d.Subject))

	if messageID, err = checkMsgID("Message-ID", d.MessageID); err != nil {
		return nil, "", err
	}
	idDomain := d.MessageIDDomain
	if idDomain != "" {
		if !isHostname(idDomain) {
			return nil, "", mailerr.Newf(mailerr.BadInput, "Message-ID domain %s is not a valid host name", quoteInput(idDomain))
		}
	} else {
		idDomain = from.domain
	}
	if messageID == "" {
		var idHdr mail.Header
		if err := idHdr.GenerateMessageIDWithHostname(idDomain); err != nil {
			return nil, "", mailerr.Wrap(mailerr.Internal, err, "could not generate a Message-ID")
		}
		messageID, err = idHdr.MessageID()
		if err != nil {
			return nil, "", mailerr.Wrap(mailerr.Internal, err, "could not generate a Message-ID")
		}
	}
	hdr.add("Message-ID", "<"+messageID+">")

	inReplyTo, refs, err := threadIDs(d.InReplyTo, d.References)
	if err != nil {
		return nil, "", err
	}
	if inReplyTo != "" {
		hdr.add("In-Reply-To", "<"+inReplyTo+">")
	}
	if len(refs) > 0 {
		hdr.add("References", "<"+strings.Join(refs, "> <")+">")
	}
	if len(d.Tags) > 0 {
		for _, t := range d.Tags {
			if err := CheckTag(t); err != nil {
				return nil, "", err
			}
		}
		hdr.add(TagsHeader, strings.Join(d.Tags, ", "))
	}
	hdr.add("MIME-Version", "1.0")

	atts, err := checkAttachments(d.Attachments)
	if err != nil {
		return nil, "", err
	}

	text := crlfToLF(d.Text)
	if text == "" && d.HTML != "" {
		text = HTMLToText(d.HTML)
	}
	html := crlfToLF(d.HTML)

	cal, err := checkCalendar(d.Calendar)
	if err != nil {
		return nil, "", err
	}
	var buf bytes.Buffer
	if err := writeBody(&buf, hdr.header(), text, html, cal, atts); err != nil {
		return nil, "", mailerr.Wrap(mailerr.Internal, err, "could not compose the message")
	}
	return buf.Bytes(), messageID, nil
}

// Recipients returns the envelope recipients of d: the addresses of To, Cc
// and Bcc, in that order, without duplicates (compared case-insensitively).
// Use it after Compose has accepted d.
func (d Draft) Recipients() []string {
	var out []string
	seen := map[string]bool{}
	for _, list := range [][]Address{d.To, d.Cc, d.Bcc} {
		for _, a := range list {
			e := strings.TrimSpace(a.Email)
			if ca, err := checkAddress("", a); err == nil {
				e = ca.spec
			}
			if k := strings.ToLower(e); e != "" && !seen[k] {
				seen[k] = true
				out = append(out, e)
			}
		}
	}
	return out
}

// headerList keeps header fields in the order they should appear.
type headerList struct{ keys, values []string }

func (h *headerList) add(k, v string) {
	h.keys = append(h.keys, k)
	h.values = append(h.values, v)
}

// header builds a go-message header. go-message writes fields from the last
// added to the first, so they are added in reverse.
func (h *headerList) header() mail.Header {
	var mh mail.Header
	for i := len(h.keys) - 1; i >= 0; i-- {
		mh.Add(h.keys[i], h.values[i])
	}
	return mh
}

func writeBody(w io.Writer, h mail.Header, text, html string, cal *Calendar, atts []attachment) error {
	textHeader := func() mail.InlineHeader {
		var ih mail.InlineHeader
		ih.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
		return ih
	}
	htmlHeader := func() mail.InlineHeader {
		var ih mail.InlineHeader
		ih.SetContentType("text/html", map[string]string{"charset": "utf-8"})
		return ih
	}
	writeAlternative := func(iw *mail.InlineWriter) error {
		parts := []struct {
			h    mail.InlineHeader
			body []byte
		}{{textHeader(), []byte(text)}}
		if html != "" {
			parts = append(parts, struct {
				h    mail.InlineHeader
				body []byte
			}{htmlHeader(), []byte(html)})
		}
		if cal != nil {
			var ch mail.InlineHeader
			ch.SetContentType("text/calendar", map[string]string{"charset": "utf-8", "method": cal.Method})
			parts = append(parts, struct {
				h    mail.InlineHeader
				body []byte
			}{ch, cal.Data})
		}
		for _, p := range parts {
			pw, err := iw.CreatePart(p.h)
			if err != nil {
				return err
			}
			if err := writeAndClose(pw, p.body); err != nil {
				return err
			}
		}
		return iw.Close()
	}
	single := html == "" && cal == nil

	if len(atts) == 0 {
		if single {
			h.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
			h.Set("Content-Transfer-Encoding", "quoted-printable")
			bw, err := mail.CreateSingleInlineWriter(w, h)
			if err != nil {
				return err
			}
			return writeAndClose(bw, []byte(text))
		}
		iw, err := mail.CreateInlineWriter(w, h)
		if err != nil {
			return err
		}
		return writeAlternative(iw)
	}

	mw, err := mail.CreateWriter(w, h)
	if err != nil {
		return err
	}
	if single {
		bw, err := mw.CreateSingleInline(textHeader())
		if err != nil {
			return err
		}
		if err := writeAndClose(bw, []byte(text)); err != nil {
			return err
		}
	} else {
		iw, err := mw.CreateInline()
		if err != nil {
			return err
		}
		if err := writeAlternative(iw); err != nil {
			return err
		}
	}
	for _, a := range atts {
		var ah mail.AttachmentHeader
		ah.SetContentType(a.mediaType, a.params)
		ah.Set("Content-Disposition", a.disposition)
		ah.Set("Content-Transfer-Encoding", a.encoding)
		aw, err := mw.CreateAttachment(ah)
		if err != nil {
			return err
		}
		if err := writeAndClose(aw, a.data); err != nil {
			return err
		}
	}
	return mw.Close()
}

// checkCalendar accepts a calendar part to write: a method token and
// UTF-8 data.
func checkCalendar(c *Calendar) (*Calendar, error) {
	if c == nil {
		return nil, nil
	}
	m := strings.ToUpper(strings.TrimSpace(c.Method))
	if m == "" || len(m) > 20 || strings.Trim(m, "ABCDEFGHIJKLMNOPQRSTUVWXYZ-") != "" {
		return nil, mailerr.Newf(mailerr.BadInput, "calendar: %s is not an iTIP method", quoteInput(c.Method))
	}
	if !utf8.Valid(c.Data) || len(c.Data) == 0 {
		return nil, mailerr.New(mailerr.BadInput, "calendar: the data must be UTF-8 text")
	}
	return &Calendar{Method: m, Data: c.Data}, nil
}

func writeAndClose(w io.WriteCloser, b []byte) error {
	if _, err := w.Write(b); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// crlfToLF turns CRLF and lone CR into LF; the quoted-printable writer then
// writes every line break as CRLF.
func crlfToLF(s string) string {
	if !strings.Contains(s, "\r") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}

// CheckHeaderValue returns an error naming field if v cannot be put in a
// header field safely: CR and LF (header injection), NUL and the other C0
// controls except tab, DEL, C1 controls, and invalid UTF-8.
func CheckHeaderValue(field, v string) error {
	for i, r := range v {
		switch {
		case r == '\r' || r == '\n':
			return mailerr.Newf(mailerr.BadInput, "%s: line breaks (CR or LF) are not allowed in a header field", field)
		case r == 0:
			return mailerr.Newf(mailerr.BadInput, "%s: NUL characters are not allowed in a header field", field)
		case r < 0x20 && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f:
			return mailerr.Newf(mailerr.BadInput, "%s: control character U+%04X is not allowed in a header field", field, r)
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(v[i:]); size == 1 {
				return mailerr.Newf(mailerr.BadInput, "%s: the text is not valid UTF-8", field)
			}
		}
	}
	return nil
}

// ParseAddress parses one address, "Name <user@example.com>" or
// "user@example.com" (RFC 5322, with RFC 2047 names decoded). Errors name
// field and quote the bad value. The returned Email is an ASCII addr-spec.
func ParseAddress(field, s string) (Address, error) {
	if err := CheckHeaderValue(field, s); err != nil {
		return Address{}, err
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return Address{}, mailerr.Newf(mailerr.BadInput, "%s: the address is empty", field)
	}
	p := netmail.AddressParser{WordDecoder: WordDecoder()}
	na, err := p.Parse(s)
	if err != nil {
		return Address{}, badAddress(field, s, err)
	}
	ca, err := checkAddress(field, Address{Name: na.Name, Email: addrSpec(na.Address)})
	if err != nil {
		return Address{}, err
	}
	return Address{Name: ca.name, Email: ca.spec}, nil
}

// ParseAddressList parses a comma-separated list of addresses as
// ParseAddress does. An empty or blank s is an empty list.
func ParseAddressList(field, s string) ([]Address, error) {
	if err := CheckHeaderValue(field, s); err != nil {
		return nil, err
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	p := netmail.AddressParser{WordDecoder: WordDecoder()}
	list, err := p.ParseList(s)
	if err != nil {
		return nil, badAddress(field, s, err)
	}
	out := make([]Address, 0, len(list))
	for _, na := range list {
		ca, err := checkAddress(field, Address{Name: na.Name, Email: addrSpec(na.Address)})
		if err != nil {
			return nil, err
		}
		out = append(out, Address{Name: ca.name, Email: ca.spec})
	}
	return out, nil
}

func badAddress(field, s string, err error) error {
	reason := strings.TrimPrefix(err.Error(), "mail: ")
	return mailerr.Wrap(mailerr.BadInput, err, fmt.Sprintf(
		"%s: %s is not a valid email address (%s); write \"Name <user@example.com>\" or \"user@example.com\"",
		field, quoteInput(s), reason))
}

// checkedAddress is an address that passed checkAddress.
type checkedAddress struct {
	name   string
	spec   string // addr-spec, local part quoted when needed
	domain string
	header string // as written in a header field
}

// checkAddress validates a and formats it for a header field. The name may
// be any text without controls; the addr-spec must be ASCII (a non-ASCII
// one would need SMTPUTF8, RFC 6531).
func checkAddress(field string, a Address) (checkedAddress, error) {
	var ca checkedAddress
	if err := CheckHeaderValue(field, a.Name); err != nil {
		return ca, err
	}
	if err := CheckHeaderValue(field, a.Email); err != nil {
		return ca, err
	}
	email := strings.TrimSpace(a.Email)
	if email == "" {
		return ca, mailerr.Newf(mailerr.BadInput, "%s: the email address is empty", field)
	}
	if !isASCII(email) {
		return ca, mailerr.Newf(mailerr.BadInput,
			"%s: %s: email addresses with non-ASCII characters are not supported; for an internationalised domain use its ASCII (xn--) form",
			field, quoteInput(email))
	}
	if strings.ContainsRune(email, '\t') {
		return ca, mailerr.Newf(mailerr.BadInput, "%s: %s: tabs are not allowed in an email address", field, quoteInput(email))
	}
	na, err := netmail.ParseAddress("<" + email + ">")
	if err != nil || na.Name != "" {
		if err == nil {
			err = errors.New("unexpected display name")
		}
		return ca, badAddress(field, email, err)
	}
	ca.spec = addrSpec(na.Address)
	if len(ca.spec) > maxAddrSpec {
		return ca, mailerr.Newf(mailerr.BadInput, "%s: the email address is longer than %d characters", field, maxAddrSpec)
	}
	at := strings.LastIndexByte(ca.spec, '@')
	ca.domain = ca.spec[at+1:]
	ca.name = strings.TrimSpace(a.Name)
	ca.header = formatAddress(ca.name, na.Address)
	return ca, nil
}

func checkAddressList(field string, list []Address) (string, error) {
	parts := make([]string, 0, len(list))
	for _, a := range list {
		ca, err := checkAddress(field, a)
		if err != nil {
			return "", err
		}
		parts = append(parts, ca.header)
	}
	return strings.Join(parts, ", "), nil
}

// addrSpec formats the local@domain that net/mail parsed (local part
// unquoted) as an addr-spec, quoting the local part when needed.
func addrSpec(parsed string) string {
	s := (&netmail.Address{Address: parsed}).String()
	return strings.TrimSuffix(strings.TrimPrefix(s, "<"), ">")
}

// formatAddress writes "Name <spec>". net/mail quotes an ASCII name and
// RFC 2047 encodes any other. Encoded here instead: a name that reads as an
// encoded word or has a word too long to fold, and a non-ASCII name with
// ASCII characters that RFC 2047 section 5(3) does not allow in a "Q" word
// in a phrase (net/mail leaves a backslash in, which breaks the address).
func formatAddress(name, parsed string) string {
	if name != "" && (mustEncode(name) || !isASCII(name) && !qPhraseSafe(name)) {
		return encodeWordsB(name) + " " + (&netmail.Address{Address: parsed}).String()
	}
	return (&netmail.Address{Name: name, Address: parsed}).String()
}

// qPhraseSafe reports whether the ASCII characters of s are letters,
// digits, space and "!*+-/=_", which a "Q" encoded word in a phrase may
// hold as they are or encoded.
func qPhraseSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if strings.IndexByte(" !*+-/=_", c) < 0 {
			return false
		}
	}
	return true
}

// encodeText encodes unstructured header text (Subject).
func encodeText(s string) string {
	if mustEncode(s) {
		return encodeWordsB(s)
	}
	return mime.QEncoding.Encode("utf-8", s) // unchanged when ASCII
}

// mustEncode reports whether ASCII text would not survive as is: it looks
// like an RFC 2047 encoded word (a reader would decode it) or has a word too
// long to fold within 998 bytes.
func mustEncode(s string) bool {
	if strings.Contains(s, "=?") {
		return true
	}
	run := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' || s[i] == '\t' {
			run = 0
			continue
		}
		if run++; run > maxWord {
			return true
		}
	}
	return false
}

// encodeWordsB encodes s as RFC 2047 "B" encoded words of at most 75
// characters, split at character boundaries, separated by spaces (which a
// decoder drops between encoded words).
func encodeWordsB(s string) string {
	const maxChunk = 45 // 60 base64 characters + "=?utf-8?b??=" = 72
	var b strings.Builder
	for s != "" {
		n := 0
		for n < len(s) {
			_, size := utf8.DecodeRuneInString(s[n:])
			if n+size > maxChunk && n > 0 {
				break
			}
			n += size
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("=?utf-8?b?")
		b.WriteString(base64.StdEncoding.EncodeToString([]byte(s[:n])))
		b.WriteString("?=")
		s = s[n:]
	}
	return b.String()
}

// threadIDs checks and normalises In-Reply-To and References.
func threadIDs(inReplyTo string, references []string) (string, []string, error) {
	irt, err := checkMsgID("In-Reply-To", inReplyTo)
	if err != nil {
		return "", nil, err
	}
	var refs []string
	for _, r := range references {
		id, err := checkMsgID("References", r)
		if err != nil {
			return "", nil, err
		}
		if id != "" && !slices.Contains(refs, id) {
			refs = append(refs, id)
		}
	}
	if irt != "" && (len(refs) == 0 || refs[len(refs)-1] != irt) {
		refs = slices.DeleteFunc(refs, func(id string) bool { return id == irt })
		refs = append(refs, irt)
	}
	return irt, refs, nil
}

// ValidMessageID reports whether id (with or without angle brackets) can be
// written in In-Reply-To or References as Compose would write it.
func ValidMessageID(id string) bool {
	v, err := checkMsgID("", id)
	return err == nil && v != ""
}

// checkMsgID accepts a message id with or without angle brackets and
// returns it without: printable ASCII, no blanks, no brackets inside.
func checkMsgID(field, id string) (string, error) {
	id = strings.TrimSpace(id)
	if strings.HasPrefix(id, "<") && strings.HasSuffix(id, ">") {
		id = id[1 : len(id)-1]
	}
	if id == "" {
		return "", nil
	}
	if len(id) > maxWord {
		return "", mailerr.Newf(mailerr.BadInput, "%s: the message id is too long", field)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c <= ' ' || c >= 0x7f || c == '<' || c == '>' {
			return "", mailerr.Newf(mailerr.BadInput, "%s: %s is not a valid message id", field, quoteInput(id))
		}
	}
	return id, nil
}

// attachment is an OutAttachment checked and ready to write.
type attachment struct {
	mediaType   string
	params      map[string]string
	disposition string
	encoding    string
	data        []byte
}

func checkAttachments(in []OutAttachment) ([]attachment, error) {
	out := make([]attachment, 0, len(in))
	for i, a := range in {
		field := fmt.Sprintf("attachment %d", i+1)
		if err := CheckHeaderValue(field+" file name", a.Filename); err != nil {
			return nil, err
		}
		if err := CheckHeaderValue(field+" content type", a.ContentType); err != nil {
			return nil, err
		}
		ct := strings.TrimSpace(a.ContentType)
		if ct == "" {
			ct = "application/octet-stream"
		}
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || !strings.Contains(mt, "/") || !isASCII(ct) {
			return nil, mailerr.Newf(mailerr.BadInput, "%s: %s is not a valid content type (want e.g. application/pdf)", field, quoteInput(ct))
		}
		delete(params, "name")
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
			return nil, mailerr.Newf(mailerr.BadInput, "%s: charset %s is not supported; convert the text to UTF-8", field, quoteInput(cs))
		}
		if strings.HasPrefix(mt, "multipart/") {
			return nil, mailerr.Newf(mailerr.BadInput, "%s: a multipart content type cannot be attached; use application/octet-stream", field)
		}
		enc := "base64"
		if strings.HasPrefix(mt, "message/") {
			// RFC 2046 section 5.2 forbids base64 for message/*: a message
			// goes as 7bit if it can, else as an opaque file.
			if is7bit(a.Data) {
				enc = "7bit"
			} else {
				mt, params = "application/octet-stream", map[string]string{}
			}
		}
		name := strings.TrimSpace(a.Filename)
		if name != "" && (!isASCII(name) || len(name) <= maxWord && !strings.Contains(name, "=?")) {
			params["name"] = name // RFC 2047 encoded by go-message, for old readers
		}
		if mime.FormatMediaType(mt, params) == "" {
			return nil, mailerr.Newf(mailerr.BadInput, "%s: %s is not a valid content type (want e.g. application/pdf)", field, quoteInput(ct))
		}
		out = append(out, attachment{
			mediaType:   mt,
			params:      params,
			disposition: "attachment" + filenameParam(name),
			encoding:    enc,
			data:        a.Data,
		})
	}
	return out, nil
}

// is7bit reports whether b can be sent with Content-Transfer-Encoding 7bit:
// ASCII without NUL or lone CR, lines of at most 998 bytes.
func is7bit(b []byte) bool {
	line := 0
	for i, c := range b {
		switch {
		case c == 0 || c >= 0x80:
			return false
		case c == '\r':
			if i+1 >= len(b) || b[i+1] != '\n' {
				return false
			}
		case c == '\n':
			line = 0
			continue
		}
		if line++; line > 998 {
			return false
		}
	}
	return true
}

// filenameParam formats `; filename=...` for Content-Disposition: quoted
// when short ASCII, else RFC 2231 extended (utf-8, percent-encoded) in
// sections short enough that the field folds between them within 78
// characters a line.
func filenameParam(name string) string {
	if name == "" {
		return ""
	}
	const maxSection = 40
	if isASCII(name) && len(name) <= 60 && !strings.Contains(name, "=?") {
		return "; " + strings.TrimPrefix(mime.FormatMediaType("x", map[string]string{"filename": name}), "x; ")
	}
	// Sections end at character boundaries: some readers decode each
	// section on its own.
	var sections []string
	var sec strings.Builder
	for _, r := range name {
		var enc strings.Builder
		var buf [utf8.UTFMax]byte
		for _, c := range buf[:utf8.EncodeRune(buf[:], r)] {
			if isAttrChar(c) {
				enc.WriteByte(c)
			} else {
				fmt.Fprintf(&enc, "%%%02X", c)
			}
		}
		if sec.Len() > 0 && sec.Len()+enc.Len() > maxSection {
			sections = append(sections, sec.String())
			sec.Reset()
		}
		sec.WriteString(enc.String())
	}
	sections = append(sections, sec.String())
	if len(sections) == 1 {
		return "; filename*=utf-8''" + sections[0]
	}
	var b strings.Builder
	for i, s := range sections {
		if i == 0 {
			fmt.Fprintf(&b, "; filename*0*=utf-8''%s", s)
		} else {
			fmt.Fprintf(&b, "; filename*%d*=%s", i, s)
		}
	}
	return b.String()
}

// isAttrChar is RFC 2231's attribute-char (RFC 5987 attr-char).
func isAttrChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&+-.^_`|~", c) >= 0
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// isHostname reports whether s is an ASCII host name (letters, digits,
// hyphens, dots; no empty labels).
func isHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// replyPrefixes are the reply markers ReplySubject removes: English, German
// (AW), Scandinavian (SV) and Dutch (Antw), any case.
var replyPrefixes = []string{"re", "aw", "sv", "antw"}

// ReplySubject returns the subject of a reply to a message with the given
// subject: exactly one "Re: " followed by the subject without the reply
// prefixes it started with ("Re:", "RE:", "Re[2]:", "Re(2):", "AW:", "SV:",
// "Antw:", in any case and any number).
func ReplySubject(subject string) string {
	s := strings.TrimFunc(subject, unicode.IsSpace)
	for {
		rest, ok := cutReplyPrefix(s)
		if !ok {
			break
		}
		s = strings.TrimLeftFunc(rest, unicode.IsSpace)
	}
	return "Re: " + s
}

// cutReplyPrefix removes one leading reply marker and its colon.
func cutReplyPrefix(s string) (string, bool) {
	for _, p := range replyPrefixes {
		if len(s) < len(p) || !strings.EqualFold(s[:len(p)], p) {
			continue
		}
		rest := s[len(p):]
		// a counter: Re[2]: or Re(2):
		if len(rest) > 0 && (rest[0] == '[' || rest[0] == '(') {
			closing := byte(']')
			if rest[0] == '(' {
				closing = ')'
			}
			j := 1
			for j < len(rest) && '0' <= rest[j] && rest[j] <= '9' {
				j++
			}
			if j == 1 || j >= len(rest) || rest[j] != closing {
				continue
			}
			rest = rest[j+1:]
		}
		rest = strings.TrimLeft(rest, " \t") // "RE :" (French style)
		if strings.HasPrefix(rest, ":") {
			return rest[1:], true
		}
	}
	return "", false
}

// quoteInput quotes a caller's value for an error message.
func quoteInput(v string) string { return quoteCapped(v, 80) }
