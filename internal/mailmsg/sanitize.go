package mailmsg

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// What Sanitize does with one non-ASCII rune.
const (
	runeKeep      = iota
	runeDrop      // invisible, format, bidi, C1 control, noncharacter
	runeNewline   // U+2028, U+2029
	runeVariation // variation selector: kept only directly after a base character
)

// classify tells what Sanitize does with r (r >= 0x80).
func classify(r rune) int {
	switch {
	case r < 0xA0: // C1 controls
		return runeDrop
	case r < 0x00AD:
		return runeKeep
	// Soft hyphen, combining grapheme joiner, Hangul fillers, Khmer
	// invisible vowels, Mongolian vowel separator, BOM.
	case r == 0x00AD, r == 0x034F, r == 0x115F, r == 0x1160, r == 0x17B4, r == 0x17B5,
		r == 0x180E, r == 0x3164, r == 0xFFA0, r == 0xFEFF:
		return runeDrop
	// Zero-width space and joiners, LRM, RLM, bidi embeddings, overrides and
	// isolates, Arabic letter mark, word joiner, invisible operators,
	// deprecated format characters.
	case r >= 0x200B && r <= 0x200F, r >= 0x202A && r <= 0x202E, r >= 0x2060 && r <= 0x206F, r == 0x061C:
		return runeDrop
	// Interlinear annotation, noncharacters, musical format characters, tag
	// characters (used to smuggle invisible ASCII).
	case r >= 0xFFF9 && r <= 0xFFFB, r >= 0xFDD0 && r <= 0xFDEF, r&0xFFFE == 0xFFFE,
		r >= 0x1D173 && r <= 0x1D17A, r >= 0xE0000 && r <= 0xE007F:
		return runeDrop
	case r == 0x2028, r == 0x2029:
		return runeNewline
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF, r >= 0x180B && r <= 0x180D, r == 0x180F:
		return runeVariation
	}
	return runeKeep
}

// Sanitize makes s safe to show to a model: it removes C0 and C1 control
// characters (keeping \n and \t; \r\n and lone \r become \n), zero-width and
// other invisible format characters (U+200B..U+200F, U+2060..U+206F, U+FEFF,
// soft hyphen, U+180E, U+034F, Hangul fillers, tag characters
// U+E0000..U+E007F, noncharacters) and bidi controls (U+202A..U+202E,
// U+2066..U+2069, U+061C, U+200E, U+200F). U+2028 and U+2029 become \n. A
// variation selector is kept only directly after a non-space character, so a
// run of them (a way to hide data in text) is cut to one. Invalid UTF-8
// becomes U+FFFD (one per run of bad bytes). The result is NFC-normalised;
// a run of more than 30 combining marks is cut there.
//
// Clean input is returned as is without allocating: one pass for ASCII text,
// plus the NFC quick check when there is non-ASCII text. Sanitize is
// idempotent.
func Sanitize(s string) string {
	i, nonASCII, vsBlocked := firstChange(s)
	if i < 0 {
		if !nonASCII {
			return s
		}
		return nfc(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	badRun := false
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			badRun = false
			switch {
			case c >= 0x20 && c != 0x7F, c == '\n', c == '\t':
				b.WriteByte(c)
				vsBlocked = c == ' ' || c == '\n' || c == '\t'
			case c == '\r':
				if i+1 < len(s) && s[i+1] == '\n' {
					break // the \n follows
				}
				b.WriteByte('\n')
				vsBlocked = true
			}
			i++
			continue
		}
		nonASCII = true
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r == utf8.RuneError && size == 1 {
			if !badRun {
				b.WriteRune(utf8.RuneError)
				badRun = true
				vsBlocked = false
			}
			continue
		}
		badRun = false
		switch classify(r) {
		case runeKeep:
			b.WriteRune(r)
			vsBlocked = isSpaceRune(r)
		case runeNewline:
			b.WriteByte('\n')
			vsBlocked = true
		case runeVariation:
			if !vsBlocked {
				b.WriteRune(r)
				vsBlocked = true
			}
		}
	}
	out := b.String()
	if nonASCII {
		out = nfc(out)
	}
	return out
}

// cgj is U+034F COMBINING GRAPHEME JOINER.
const cgj = "\u034F"

// nfc normalises s (which has no U+034F) to NFC. x/text follows the Unicode
// Stream-Safe Text Format and inserts U+034F after 30 non-starters in a row;
// such runs exist only to hide or garble text ("zalgo"), so the rest of the
// run is dropped with the inserted U+034F. The result is stable under
// another NFC.
func nfc(s string) string {
	out := norm.NFC.String(s)
	if out == s || !strings.Contains(out, cgj) { // out == s is cheap: same pointer when unchanged
		return out
	}
	var b strings.Builder
	b.Grow(len(out))
	for len(out) > 0 {
		k := strings.Index(out, cgj)
		if k < 0 {
			b.WriteString(out)
			break
		}
		b.WriteString(out[:k])
		out = out[k+len(cgj):]
		for len(out) > 0 {
			r, size := utf8.DecodeRuneInString(out)
			if string(r) != cgj && !continuesRun(r) {
				break
			}
			out = out[size:]
		}
	}
	return b.String()
}

// continuesRun reports whether x/text may count r as a non-starter when it
// tracks runs for the Stream-Safe Text Format: a combining mark, or a rune
// that combines with the one before it (or decomposes to one that does).
func continuesRun(r rune) bool {
	p := norm.NFC.PropertiesString(string(r))
	if p.CCC() != 0 || p.LeadCCC() != 0 || !p.BoundaryBefore() {
		return true
	}
	if d := norm.NFKD.PropertiesString(string(r)).Decomposition(); len(d) > 0 {
		first, _ := utf8.DecodeRune(d)
		q := norm.NFC.PropertiesString(string(first))
		return q.CCC() != 0 || q.LeadCCC() != 0 || !q.BoundaryBefore()
	}
	return false
}

// isSpaceRune is unicode.IsSpace for r >= 0x80, cheap for the common
// non-space runes.
func isSpaceRune(r rune) bool {
	return r == 0x85 || r == 0xA0 || r >= 0x1680 && r <= 0x3000 && unicode.IsSpace(r)
}

// firstChange returns the byte index of the first place where Sanitize must
// change s (or -1), whether s has non-ASCII text before that index, and
// whether a variation selector at that index would be dropped.
func firstChange(s string) (idx int, nonASCII, vsBlocked bool) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c >= 0x20 && c != 0x7F) || c == '\n' || c == '\t' {
				i++
				continue
			}
			return i, nonASCII, vsBlockedAfter(s[:i])
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return i, nonASCII, vsBlockedAfter(s[:i])
		}
		switch classify(r) {
		case runeKeep:
		case runeVariation:
			// Nothing before i was changed, so the rune before it in s
			// is the one before it in the output.
			if vsBlockedAfter(s[:i]) {
				return i, nonASCII, true
			}
		default:
			return i, nonASCII, vsBlockedAfter(s[:i])
		}
		nonASCII = true
		i += size
	}
	return -1, nonASCII, false
}

// vsBlockedAfter reports whether a variation selector following prefix
// (unchanged text) would be dropped: at the start, after white space or
// after another variation selector.
func vsBlockedAfter(prefix string) bool {
	r, _ := utf8.DecodeLastRuneInString(prefix)
	switch {
	case prefix == "", r == ' ', r == '\n', r == '\t':
		return true
	case r < utf8.RuneSelf:
		return false
	}
	return isSpaceRune(r) || classify(r) == runeVariation
}

// SanitizeLine is Sanitize for one-line values (subjects, names, filenames):
// newlines, tabs and other white space become spaces, runs of spaces collapse
// to one, and leading and trailing spaces are removed.
func SanitizeLine(s string) string {
	s = Sanitize(s)
	if isCleanLine(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isCleanLine reports whether s has no white space other than single ASCII
// spaces between words.
func isCleanLine(s string) bool {
	prevSpace := true // a leading space is not clean
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == ' ' {
				if prevSpace {
					return false
				}
				prevSpace = true
			} else {
				if c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' {
					return false
				}
				prevSpace = false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			return false
		}
		prevSpace = false
		i += size
	}
	return !prevSpace || s == ""
}

// normalizeText tidies sanitised text: it trims trailing white space from
// every line, drops leading and trailing blank lines and collapses runs of
// more than two blank lines to two.
func normalizeText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	blank := 0
	started := false
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimRightFunc(line, unicode.IsSpace)
		if line == "" {
			if started {
				blank++
			}
			continue
		}
		if started {
			b.WriteByte('\n')
			for range min(blank, 2) {
				b.WriteByte('\n')
			}
		}
		blank = 0
		started = true
		b.WriteString(line)
	}
	return b.String()
}

// Truncate returns at most maxChars runes of text starting at rune offset
// offset. It cuts on rune boundaries only (an invalid byte counts as one
// rune), so the chunks returned for offsets 0, next, next', ... concatenate
// to exactly text. truncated reports whether more text follows out; next is
// the offset at which it starts (the rune count of text when nothing
// follows). A negative offset counts as 0; maxChars <= 0 means no limit.
func Truncate(text string, offset, maxChars int) (out string, truncated bool, next int) {
	offset = max(offset, 0)
	i, n := 0, 0
	for n < offset && i < len(text) {
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
		n++
	}
	if maxChars <= 0 {
		return text[i:], false, n + utf8.RuneCountInString(text[i:])
	}
	j := i
	for m := 0; m < maxChars && j < len(text); m++ {
		_, size := utf8.DecodeRuneInString(text[j:])
		j += size
		n++
	}
	return text[i:j], j < len(text), n
}

// DefaultPreviewRunes is the preview length Preview uses when asked for n <= 0.
const DefaultPreviewRunes = 160

// Preview returns a one-line preview of at most n runes (DefaultPreviewRunes
// if n <= 0) of a text body: quoted lines (">"), the attribution line before
// them ("On ... wrote:") and everything after a signature separator ("-- ")
// or a forwarded/original-message separator are left out when something else
// remains; white space is collapsed. A cut preview ends in "…".
func Preview(text string, n int) string {
	if n <= 0 {
		n = DefaultPreviewRunes
	}
	line := SanitizeLine(previewBody(text))
	if line == "" {
		line = SanitizeLine(text)
	}
	if utf8.RuneCountInString(line) <= n {
		return line
	}
	cut, _, _ := Truncate(line, 0, n-1)
	// Back off to the last word boundary, unless the cut is at one already.
	if k := strings.LastIndexByte(cut, ' '); k > 0 && line[len(cut)] != ' ' && utf8.RuneCountInString(cut[k:]) <= 20 {
		cut = cut[:k]
	}
	cut = strings.TrimRightFunc(cut, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) && r != ')' && r != '"' })
	return cut + "…"
}

// previewBody drops quotes, attribution lines and signatures from text.
func previewBody(text string) string {
	var kept []string
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		line = strings.TrimRight(line, "\r")
		trimmed := strings.TrimSpace(line)
		if line == "-- " || line == "--" || isSeparatorLine(trimmed) || isReplyHeader(trimmed, lines[i+1:]) {
			break
		}
		if strings.HasPrefix(trimmed, ">") {
			// Drop the attribution line ("On Monday, Bob wrote:") before a quote.
			for len(kept) > 0 && strings.TrimSpace(kept[len(kept)-1]) == "" {
				kept = kept[:len(kept)-1]
			}
			if len(kept) > 0 && isAttribution(kept[len(kept)-1]) {
				kept = kept[:len(kept)-1]
			}
			continue
		}
		kept = append(kept, line)
	}
	return strings.Join(kept, "\n")
}

func isSeparatorLine(s string) bool {
	l := strings.ToLower(s)
	switch {
	case strings.HasPrefix(l, "-----original message-----"),
		strings.HasPrefix(l, "---------- forwarded message"),
		strings.HasPrefix(l, "-------- original message"),
		strings.HasPrefix(l, "-----ursprüngliche nachricht-----"),
		len(s) >= 20 && strings.Trim(s, "_") == "":
		return true
	}
	return false
}

// isReplyHeader reports whether line starts an Outlook-style quoted header
// block: "From: ..." followed by "Sent: ..." or "Date: ...".
func isReplyHeader(line string, rest []string) bool {
	if !hasPrefixFold(line, "from:") {
		return false
	}
	for _, next := range rest {
		next = strings.TrimSpace(next)
		if next == "" {
			continue
		}
		return hasPrefixFold(next, "sent:") || hasPrefixFold(next, "date:")
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func isAttribution(s string) bool {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, suffix := range []string{"wrote:", "schrieb:", "écrit :", "écrit:", "escribió:", "scritto:", "schreef:", "skrev:", "написал:", "napisał:"} {
		if strings.HasSuffix(s, suffix) {
			return true
		}
	}
	return false
}
