package mailbox

// What a message's BODYSTRUCTURE says about its parts: which text parts
// make up the body, which parts a mail client shows as attachments, and
// what the attachments weigh once decoded. List and read both decide from
// here, so has_attachments and the attachment list of a read agree.

import (
	"mime"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// textPart is one body part to fetch and decode.
type textPart struct {
	path []int
	part mailmsg.Part
	size uint32
}

// bodyTexts picks the text parts that make up the body, in order: in each
// multipart/alternative the one a mail program shows (alternatives.go:
// the HTML, else the richest one supported); of other multiparts every
// body text part. At most maxTextParts.
func bodyTexts(bs imap.BodyStructure) []textPart {
	return textParts(bs, pickShown)
}

// previewTexts is bodyTexts preferring text/plain in an alternative, for
// the one-line previews of lists and threads: they are read from the first
// bytes of part 1, where the plain alternative usually is and the HTML's
// text (after its styles) rarely starts.
func previewTexts(bs imap.BodyStructure) []textPart {
	return textParts(bs, pickPlain)
}

// textParts is bodyTexts with pick choosing the alternative.
func textParts(bs imap.BodyStructure, pick func(*imap.BodyStructureMultiPart) int) []textPart {
	var texts []textPart
	var walk func(path []int, b imap.BodyStructure)
	walk = func(path []int, b imap.BodyStructure) {
		switch p := b.(type) {
		case *imap.BodyStructureMultiPart:
			if strings.EqualFold(p.Subtype, "alternative") {
				if best := pick(p); best >= 0 {
					walk(childPath(path, best), p.Children[best])
				}
				return
			}
			for i, ch := range p.Children {
				walk(childPath(path, i), ch)
			}
		case *imap.BodyStructureSinglePart:
			if len(path) == 0 {
				path = []int{1} // the body of a single-part message is part 1
			}
			if isBodyText(p) && len(texts) < maxTextParts {
				texts = append(texts, textPartOf(path, p))
			}
		}
	}
	walk(nil, bs)
	return texts
}

func textPartOf(path []int, p *imap.BodyStructureSinglePart) textPart {
	return textPart{path: path, size: p.Size, part: mailmsg.Part{
		MediaType: p.MediaType(), Charset: p.Params["charset"], Encoding: strings.ToLower(p.Encoding),
		Format: p.Params["format"], DelSp: strings.EqualFold(p.Params["delsp"], "yes"),
	}}
}

// pickPlain returns the index of text/plain, else text/html, else a
// nested multipart, else -1.
func pickPlain(p *imap.BodyStructureMultiPart) int {
	best, rank := -1, 0
	for i, ch := range p.Children {
		r := 0
		switch ch.MediaType() {
		case "text/plain":
			r = 3
		case "text/html":
			r = 2
		default:
			if _, ok := ch.(*imap.BodyStructureMultiPart); ok {
				r = 1
			}
		}
		if r > rank {
			best, rank = i, r
		}
	}
	return best
}

func childPath(path []int, i int) []int { return append(append([]int(nil), path...), i+1) }

// isBodyText says whether a part is text shown in the body rather than a
// file: text/plain or text/html, not marked as an attachment, and either
// marked inline or without a name.
func isBodyText(p *imap.BodyStructureSinglePart) bool {
	mt := p.MediaType()
	if mt != "text/plain" && mt != "text/html" {
		return false
	}
	switch disposition(p) {
	case "attachment":
		return false
	case "inline":
		return true
	}
	return p.Filename() == ""
}

func disposition(p imap.BodyStructure) string {
	if d := p.Disposition(); d != nil {
		return strings.ToLower(d.Value)
	}
	return ""
}

// attachmentPart is an attachment with what the reader needs to size it.
type attachmentPart struct {
	Attachment
	path []int
	part *imap.BodyStructureSinglePart
}

// attachmentParts lists the parts a mail client user sees as attachments,
// anywhere in the message (an alternative not shown as text can hold them
// too). A part is one when it is marked as an attachment, or has a name
// and is not body text, or is a forwarded message, or is an unnamed
// non-text part that nothing marks as part of the body. Not attachments:
// body text, unnamed parts marked inline or with a Content-ID (the cid:
// images of an HTML body), unnamed text such as an invitation's
// text/calendar beside its HTML, and the signature of multipart/signed.
// Sizes are estimated (estimatedSize).
func attachmentParts(bs imap.BodyStructure) []attachmentPart {
	var atts []attachmentPart
	var walk func(path []int, b imap.BodyStructure, parent *imap.BodyStructureMultiPart)
	walk = func(path []int, b imap.BodyStructure, parent *imap.BodyStructureMultiPart) {
		switch p := b.(type) {
		case *imap.BodyStructureMultiPart:
			for i, ch := range p.Children {
				walk(childPath(path, i), ch, p)
			}
		case *imap.BodyStructureSinglePart:
			if len(path) == 0 {
				path = []int{1}
			}
			if isAttachment(p, path, parent) {
				atts = append(atts, attachmentPart{path: path, part: p, Attachment: Attachment{
					PartID: partID(path), Filename: filename(p), ContentType: mailmsg.SanitizeLine(p.MediaType()),
					Size: estimatedSize(p), Inline: isInline(p),
				}})
			}
		}
	}
	walk(nil, bs, nil)
	return atts
}

func isAttachment(p *imap.BodyStructureSinglePart, path []int, parent *imap.BodyStructureMultiPart) bool {
	disp := disposition(p)
	switch {
	case disp == "attachment":
		return true
	case isBodyText(p):
		return false
	case parent != nil && strings.EqualFold(parent.Subtype, "signed") && path[len(path)-1] == 2:
		return false // the signature, not something the sender attached
	case p.Filename() != "", isMessage(p):
		return true
	}
	return disp != "inline" && p.ID == "" && !strings.EqualFold(p.Type, "text")
}

func isMessage(p *imap.BodyStructureSinglePart) bool {
	mt := p.MediaType()
	return mt == "message/rfc822" || mt == "message/global"
}

// isInline says whether an attachment is shown in the body by mail clients:
// marked inline, or referenced by its Content-ID without a disposition.
func isInline(p *imap.BodyStructureSinglePart) bool {
	switch disposition(p) {
	case "inline":
		return true
	case "":
		return p.ID != ""
	}
	return false
}

// hasAttachments is attachmentParts(bs) being non-empty.
func hasAttachments(bs imap.BodyStructure) bool { return len(attachmentParts(bs)) > 0 }

func partID(path []int) string {
	s := make([]string, len(path))
	for i, n := range path {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ".")
}

// filename is a part's file name, decoded (RFC 2231 filename*=, RFC 2047),
// sanitised and without directories ("../../x" and "C:\x" are "x"). A
// forwarded message without one is named after its subject.
func filename(p *imap.BodyStructureSinglePart) string {
	name := rawFilename(p)
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	if name == "" && isMessage(p) {
		name = "message.eml"
		if m := p.MessageRFC822; m != nil && m.Envelope != nil && strings.TrimSpace(m.Envelope.Subject) != "" {
			name = strings.NewReplacer("/", "_", `\`, "_").Replace(m.Envelope.Subject) + ".eml"
		}
	}
	name = mailmsg.SanitizeLine(name)
	if name == "." || name == ".." {
		return ""
	}
	if utf8.RuneCountInString(name) > 255 {
		name, _, _ = mailmsg.Truncate(name, 0, 255)
	}
	return name
}

func rawFilename(p *imap.BodyStructureSinglePart) string {
	var params map[string]string
	if d := p.Disposition(); d != nil {
		params = d.Params
	}
	for _, src := range []map[string]string{params, p.Params} {
		for _, k := range []string{"filename*", "name*"} {
			if v := src[k]; v != "" {
				if _, ps, err := mime.ParseMediaType("x/x; " + k + "=" + v); err == nil {
					for _, x := range ps {
						return x
					}
				}
			}
		}
		for _, k := range []string{"filename", "name"} {
			if v := src[k]; v != "" {
				return mailmsg.DecodeHeader(v)
			}
		}
	}
	return ""
}

// estimatedSize is a part's decoded size as far as its encoded size tells:
// exact for 7bit, 8bit and binary; for base64 three bytes for every four
// characters, less the line breaks (CRLF after every 76 characters); for
// quoted-printable (and unknown encodings) the encoded size, an upper bound.
func estimatedSize(p *imap.BodyStructureSinglePart) int64 {
	n := int64(p.Size)
	if strings.EqualFold(p.Encoding, "base64") {
		n -= 2 * ((n + 77) / 78)
		return max(n, 0) * 3 / 4
	}
	return n
}

// binarySized is the attachment whose decoded size the server is asked
// (BINARY.SIZE), or nil. Only base64 and quoted-printable change the size,
// and only the message's last part in such an encoding is asked: Dovecot
// 2.3 answers BINARY.SIZE wrongly for a part that a later base64 or
// quoted-printable part follows (short by about what decoding the later one
// saves), so those keep the estimate. Asking nothing else also spares the
// whole FETCH failing on a part the server cannot decode (NO [PARSE] for
// broken base64, NO [UNKNOWN-CTE]).
func binarySized(bs imap.BodyStructure, atts []attachmentPart) *attachmentPart {
	last := lastEncodedPart(bs)
	for i := range atts {
		if atts[i].part == last {
			return &atts[i]
		}
	}
	return nil
}

// lastEncodedPart is the last single part, in part order and inside
// attached messages too, whose transfer encoding changes its size.
func lastEncodedPart(bs imap.BodyStructure) *imap.BodyStructureSinglePart {
	var last *imap.BodyStructureSinglePart
	var walk func(b imap.BodyStructure)
	walk = func(b imap.BodyStructure) {
		switch p := b.(type) {
		case *imap.BodyStructureMultiPart:
			for _, ch := range p.Children {
				walk(ch)
			}
		case *imap.BodyStructureSinglePart:
			if strings.EqualFold(p.Encoding, "base64") || strings.EqualFold(p.Encoding, "quoted-printable") {
				last = p
			}
			if p.MessageRFC822 != nil && p.MessageRFC822.BodyStructure != nil {
				walk(p.MessageRFC822.BodyStructure)
			}
		}
	}
	walk(bs)
	return last
}

// plausibleSize says whether n can be the decoded size of p: decoding
// never grows base64 beyond 3/4 of it, nor quoted-printable beyond it.
func plausibleSize(p *imap.BodyStructureSinglePart, n uint32) bool {
	if strings.EqualFold(p.Encoding, "base64") {
		return uint64(n) <= uint64(p.Size)*3/4
	}
	return n <= p.Size
}
