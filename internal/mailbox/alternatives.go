package mailbox

// Which alternative of a multipart/alternative is read, and what its
// text/plain sibling says that the shown one does not.
//
// A mail program shows one alternative: the HTML when there is one, else
// the last one it supports (RFC 2046 orders them from plainest to
// richest). People read the HTML, so that is what a read returns. A sender
// can put in the text/plain part what no mail program shows; a read
// fetches it too, in the same FETCH, and when it says materially more
// than the HTML shows (plainDiffers), the result says so: a warning (in
// the fenced text), PlainDiffers with an excerpt of what it adds, and with
// include_hidden its whole text after the hidden text.

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// PlainDifference is what the text/plain alternative of a message says
// that its HTML, the part mail programs show, does not.
type PlainDifference struct {
	PartID string `json:"part_id" desc:"the text/plain part that differs"`
	Words  int    `json:"words" desc:"how many distinct words of it the shown text lacks"`
	Adds   string `json:"adds" desc:"the lines of the text/plain part with those words (at most 300 characters): sender's text, not shown by mail programs"`
}

// pickShown returns the index of the alternative a mail program shows:
// the last one that is or holds HTML, else the last one supported (plain
// text, or a multipart holding body text), else -1.
func pickShown(p *imap.BodyStructureMultiPart) int {
	html, supported := -1, -1
	for i, ch := range p.Children {
		texts := textParts(ch, pickShown)
		if len(texts) == 0 {
			continue
		}
		supported = i
		for _, t := range texts {
			if strings.EqualFold(t.part.MediaType, "text/html") {
				html = i
				break
			}
		}
	}
	if html >= 0 {
		return html
	}
	return supported
}

// plainSiblings lists, for each multipart/alternative whose shown part is
// not text/plain, its text/plain alternatives (body text), to compare.
func plainSiblings(bs imap.BodyStructure) []textPart {
	var out []textPart
	var walk func(path []int, b imap.BodyStructure)
	walk = func(path []int, b imap.BodyStructure) {
		p, ok := b.(*imap.BodyStructureMultiPart)
		if !ok {
			return
		}
		if strings.EqualFold(p.Subtype, "alternative") {
			shown := pickShown(p)
			html := shown >= 0 && slices.ContainsFunc(textParts(p.Children[shown], pickShown), func(t textPart) bool {
				return strings.EqualFold(t.part.MediaType, "text/html")
			})
			for i, ch := range p.Children {
				if sp, ok := ch.(*imap.BodyStructureSinglePart); ok && i != shown && html &&
					sp.MediaType() == "text/plain" && isBodyText(sp) && len(out) < maxTextParts {
					out = append(out, textPartOf(childPath(path, i), sp))
				}
			}
			if shown >= 0 {
				walk(childPath(path, shown), p.Children[shown])
			}
			return
		}
		for i, ch := range p.Children {
			walk(childPath(path, i), ch)
		}
	}
	walk(nil, bs)
	return out
}

// minExtraWords is how many distinct words the text/plain part must say
// beyond the shown text to differ materially (a number of 3 or more digits
// is enough alone: an account, an amount, a code).
const minExtraWords = 5

// plainDiffers compares the text/plain alternative's text with the shown
// text; nil when it adds nothing material.
func plainDiffers(part []int, plain, shown string) *PlainDifference {
	have := map[string]bool{}
	for _, w := range textWords(shown) {
		have[w] = true
	}
	extra := map[string]bool{}
	number := false
	for _, w := range textWords(plain) {
		if have[w] || extra[w] {
			continue
		}
		extra[w] = true
		number = number || len(w) >= 3 && strings.Trim(w, "0123456789") == ""
	}
	if len(extra) < minExtraWords && !number {
		return nil
	}
	// The lines that carry the extra words.
	var b strings.Builder
	for line := range strings.Lines(plain) {
		line = strings.TrimSpace(line)
		has := false
		for _, w := range textWords(line) {
			has = has || extra[w]
		}
		if !has {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(" / ")
		}
		b.WriteString(line)
		if utf8.RuneCountInString(b.String()) > maxAddsRunes {
			break
		}
	}
	adds := b.String()
	if utf8.RuneCountInString(adds) > maxAddsRunes {
		adds, _, _ = mailmsg.Truncate(adds, 0, maxAddsRunes-1)
		adds += "…"
	}
	return &PlainDifference{PartID: partID(part), Words: len(extra), Adds: adds}
}

const maxAddsRunes = 300

// textWords splits text into lower-case words of letters and digits.
func textWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// plainWarning is the sentence of the read result about a differing
// text/plain part.
func plainWarning(d *PlainDifference, keepHidden bool) string {
	where := "imap_read_email with include_hidden=true returns all of it in hidden_text."
	if keepHidden {
		where = "All of it is in hidden_text."
	}
	return fmt.Sprintf("The text/plain alternative (part %s), which mail programs do not show, says more than the HTML they show: %d words the text above lacks, in %q. The text above is the HTML's; %s",
		d.PartID, d.Words, d.Adds, where)
}

// plainLabel starts the text/plain part's text in the hidden text.
const plainLabel = "text/plain alternative, not shown by mail programs:"

// comparePlain sets m's PlainDiffers and warning from the decoded text/plain
// alternatives (plains, decoded) and the shown text, and returns the
// hidden text with, when asked for, the differing part's text after it.
func comparePlain(m *Message, plains []textPart, decoded []string, shown string, keepHidden bool, hidden string) string {
	for i, plain := range decoded {
		if i >= len(plains) {
			break
		}
		d := plainDiffers(plains[i].path, plain, shown)
		if d == nil {
			continue
		}
		m.PlainDiffers = d
		m.Warnings = append(m.Warnings, plainWarning(d, keepHidden))
		if keepHidden {
			hidden = strings.TrimPrefix(hidden+"\n\n"+plainLabel+"\n"+plain, "\n\n")
		}
		break // one is enough to say
	}
	return hidden
}

// withPlains appends the text/plain alternatives to fetch beside the
// shown texts, when not already among them.
func withPlains(texts, plains []textPart) []textPart {
	out := texts
	for _, p := range plains {
		if !slices.ContainsFunc(texts, func(t textPart) bool { return slices.Equal(t.path, p.path) }) {
			out = append(out, p)
		}
	}
	return out
}
