package mailmsg

import (
	"bytes"
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
// a run of more than 30 combining marks is cut there. Text imitating the
// fence around untrusted content is rewritten (NeutralizeFences).
//
// Clean input is returned as is without allocating: one pass for plain
// text (plainText), else two passes for ASCII text (characters, fences),
// plus the NFC quick check when there is non-ASCII text. Sanitize is
// idempotent.
func Sanitize(s string) string {
	if plainText(s) {
		return s
	}
	return NeutralizeFences(sanitizeChars(s))
}

// plainText reports, in one pass, that Sanitize(s) is s because s is
// plain: printable ASCII, tabs, line feeds and ellipses ("…", which cut
// previews end in), with nothing NeutralizeFences could rewrite. As in
// plainLine, a fence in such text can only start at the word "untrusted"
// or at a run of closing brackets (">>", "> \t>"); the ellipsis is
// punctuation with no canonical composition, so NFC leaves the text as it
// is. The untrusted blocks of list and search pages are such text.
func plainText(s string) bool {
	for i := 0; i < len(s); i++ {
		switch textByte[s[i]] {
		case lbPlain, lbSpace:
		case lbClose:
			j := i + 1
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
			if j < len(s) && s[j] == '>' {
				return false
			}
		case lbU:
			if hasPrefixFold(s[i:], "untrusted") {
				return false
			}
		default:
			if !strings.HasPrefix(s[i:], "…") {
				return false
			}
			i += len("…") - 1
		}
	}
	return true
}

// textByte is lineByte for plainText: tabs and line feeds are spaces.
var textByte = func() (t [256]uint8) {
	t = lineByte
	t['\t'], t['\n'] = lbSpace, lbSpace
	return t
}()

// sanitizeChars is Sanitize without NeutralizeFences, for HTML that is
// sanitised again once it is text.
func sanitizeChars(s string) string {
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
			case keptASCII(c):
				// The whole run of kept ASCII at once.
				j := i + 1
				for j < len(s) && s[j] < utf8.RuneSelf && keptASCII(s[j]) {
					j++
				}
				b.WriteString(s[i:j])
				last := s[j-1]
				vsBlocked = last == ' ' || last == '\n' || last == '\t'
				i = j
				continue
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

// keptASCII reports whether Sanitize keeps the ASCII byte c as it is.
func keptASCII(c byte) bool { return c >= 0x20 && c != 0x7F || c == '\n' || c == '\t' }

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
	if rest, cut := strings.CutSuffix(s, "…"); cut && plainLine(rest) || !cut && plainLine(s) {
		// Plain, or plain and cut with an ellipsis as a list's previews
		// are (cutPreview): the ellipsis is punctuation, neither a letter
		// nor an angle bracket, so it neither starts a fence nor
		// completes one with what comes before it.
		return s
	}
	return oneLine(Sanitize(s))
}

// plainLine reports, in one pass, that SanitizeLine(s) is s: printable
// ASCII with single spaces between words and nothing NeutralizeFences
// could rewrite. In ASCII a fence can only start at the word
// "untrusted" (no ASCII letter folds to its letters but themselves) or at
// two closing angle brackets (">>", "> >"). Most subjects, names,
// addresses and previews are plain; the full path takes three passes.
func plainLine(s string) bool {
	if s == "" || s[0] == ' ' || s[len(s)-1] == ' ' {
		return s == ""
	}
	for i := 0; i < len(s); i++ {
		switch lineByte[s[i]] {
		case lbPlain:
		case lbSpace:
			if s[i-1] == ' ' {
				return false
			}
		case lbClose:
			if strings.HasPrefix(s[i+1:], ">") || strings.HasPrefix(s[i+1:], " >") {
				return false
			}
		case lbU:
			if hasPrefixFold(s[i:], "untrusted") {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// Classes of bytes for plainLine.
const (
	lbPlain = iota // printable ASCII other than below
	lbSpace
	lbClose // '>'
	lbU     // 'u', 'U'
	lbNo    // control characters, DEL, non-ASCII
)

var lineByte = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c < ' ' || c >= 0x7F:
			t[c] = lbNo
		case c == ' ':
			t[c] = lbSpace
		case c == '>':
			t[c] = lbClose
		case c == 'u' || c == 'U':
			t[c] = lbU
		}
	}
	return t
}()

// oneLine is SanitizeLine for text Sanitize has already cleaned.
func oneLine(s string) string {
	if isCleanLine(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for i := 0; i < len(s); {
		// A run of non-space ASCII is copied at once: most mail text is.
		j := i
		for j < len(s) && s[j] < utf8.RuneSelf && !asciiSpace[s[j]] {
			j++
		}
		if j > i {
			if space {
				b.WriteByte(' ')
				space = false
			}
			b.WriteString(s[i:j])
			i = j
			continue
		}
		size, isSpace := 1, true
		if s[i] >= utf8.RuneSelf {
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			isSpace = unicode.IsSpace(r) // (Sanitize left no invalid UTF-8)
		}
		if isSpace {
			space = b.Len() > 0
		} else {
			if space {
				b.WriteByte(' ')
				space = false
			}
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	// Joining lines can make a fence out of pieces on either side of a
	// line break ("MA1L-x" and ">>"): neutralise again.
	return NeutralizeFences(b.String())
}

// asciiSpace is unicode.IsSpace for the ASCII bytes.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

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
	line := SanitizeLine(previewBody(text))
	if line == "" {
		line = SanitizeLine(text)
	}
	return cutPreview(line, n)
}

// HeadPreview is Preview of the first bytes of a text part (DecodeTextHead).
// That text is sanitised already, and dropping whole lines of it leaves it
// so (FuzzHeadPreview checks it), so it is not sanitised again: a list
// previews 20 such heads of up to 2 KB.
//
// Most heads are plain ASCII text with nothing a preview drops once kept
// (plainHeadPrefix): only their first lines are decoded, not the 2 KB.
func HeadPreview(head []byte, p Part, n int) string {
	if n <= 0 {
		n = DefaultPreviewRunes
	}
	prefix := plainHeadPrefix(head, p, n)
	if len(prefix) < len(head) {
		if line, ok := plainPreview(prefix, n); ok {
			return line
		}
	}
	text := DecodeTextHead(prefix, p)
	line := oneLine(previewBody(text))
	if line == "" {
		line = oneLine(text)
	}
	return cutPreview(line, n)
}

// plainHeadPrefix returns the lines of head that decide its preview of n
// runes, or head itself. It cuts only a head whose preview is then
// provably the same (FuzzHeadPreview compares with Preview of the whole):
//
//   - the part is plain text (not HTML, not format=flowed) without a
//     transfer encoding, in US-ASCII or UTF-8, and all of head is printable
//     ASCII, tabs and line breaks (LF or CRLF): decoding, Sanitize and
//     normalizeText then work line by line, forwards only;
//   - no byte of head is '>' and it never spells "untrusted" (any case):
//     no line is a quote, so a kept line is never dropped again (a quote
//     drops the attribution line before it), and NeutralizeFences finds
//     nothing, in the lines nor once they are joined (in ASCII a fence
//     starts only at that word or at closing brackets; see plainLine);
//   - the lines kept whole hold at least n+1 non-blank bytes, so the joined
//     line's first n+1 runes, all cutPreview reads, come from them (a
//     signature or separator among them ends the kept text in both), and
//     the next non-blank line is kept too, so a "From:" line among them
//     sees the line that makes it a reply header (isReplyHeader).
func plainHeadPrefix(head []byte, p Part, n int) []byte {
	if len(head) <= n+1 || p.isHTML() || transferEncoding(p.Encoding) != encIdentity || strings.EqualFold(strings.TrimSpace(p.Format), "flowed") {
		return head
	}
	if enc, ok := lookupCharset(p.Charset); !ok || enc != asciiLabel && enc != utf8Label {
		return head
	}
	cut := -1
	words, lineWords := 0, 0 // non-blank bytes in the lines before this one, in this one
	enough := false          // the lines so far hold n+1 non-blank bytes
	i := 0
	for ; i < len(head) && cut < 0; i++ {
		switch c := head[i]; headByte[c] {
		case hbText:
			lineWords++
		case hbBlank:
		case hbLF:
			if !enough {
				words += lineWords
				enough = words > n
			} else if lineWords > 0 {
				cut = i + 1
			}
			lineWords = 0
		default:
			if !plainHeadByte(head, i) {
				return head
			}
			if c != '\r' {
				lineWords++
			}
		}
	}
	for ; i < len(head); i++ { // the rest is only checked
		if headByte[head[i]] >= hbCheck && !plainHeadByte(head, i) {
			return head
		}
	}
	if cut < 0 {
		return head
	}
	return head[:cut]
}

// plainPreview is HeadPreview of a head that plainHeadPrefix cut, in one
// pass over its lines and without the copies of the general path: for such
// a head, decoding and sanitising only drop the CR of each CRLF,
// normalizeText only trims lines at the end and drops blank ones at the
// start, previewBody keeps the lines before the first signature, separator
// or reply header (there is no quote), and oneLine joins their words with
// single spaces. It stops once the joined line has n+1 bytes, all
// cutPreview reads of it. ok is false when no line is kept (previewBody
// would keep nothing and Preview fall back to the whole text).
func plainPreview(head []byte, n int) (string, bool) {
	b := make([]byte, 0, n+64)
	text := head
	for len(text) > 0 && len(b) <= n {
		var raw []byte
		raw, text, _ = bytes.Cut(text, []byte{'\n'})
		line := bytes.TrimRight(raw, " \t\r")
		trimmed := bytes.TrimLeft(line, " \t")
		if len(trimmed) == 0 {
			continue
		}
		// (The same tests as previewBody's, converting only the lines
		// that can pass them.)
		if string(line) == "--" ||
			(trimmed[0] == '-' || trimmed[0] == '_') && isSeparatorLine(string(trimmed)) ||
			(trimmed[0]|0x20 == 'f') && isReplyHeader(string(trimmed), nextLines(text)) {
			break
		}
		for word := range bytes.FieldsSeq(trimmed) {
			if len(b) > 0 {
				b = append(b, ' ')
			}
			b = append(b, word...)
		}
	}
	if len(b) == 0 {
		return "", false
	}
	return cutPreview(string(b), n), true
}

// nextLines is the rest of a head for isReplyHeader, which looks at the
// first of its lines that is not blank.
func nextLines(rest []byte) []string {
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte{'\n'})
		if len(bytes.TrimSpace(line)) > 0 {
			return []string{string(line)}
		}
	}
	return nil
}

// Classes of head bytes for plainHeadPrefix.
const (
	hbText  = iota // printable ASCII other than below
	hbBlank        // space, tab
	hbLF
	hbCheck // CR, u and U: plainHeadByte decides
	hbNo    // '>', other control characters, DEL, non-ASCII
)

var headByte = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c == ' ' || c == '\t':
			t[c] = hbBlank
		case c == '\n':
			t[c] = hbLF
		case c == '\r' || c == 'u' || c == 'U':
			t[c] = hbCheck
		case c < ' ' || c >= 0x7F || c == '>':
			t[c] = hbNo
		}
	}
	return t
}()

// plainHeadByte decides a head byte of class hbCheck or hbNo: a CR is
// fine before a LF, a u unless it starts the word "untrusted" (any case).
func plainHeadByte(head []byte, i int) bool {
	switch head[i] {
	case '\r':
		return i+1 < len(head) && head[i+1] == '\n'
	case 'u', 'U':
		const word = "untrusted"
		if len(head)-i < len(word) {
			return true
		}
		for k := 1; k < len(word); k++ {
			if head[i+k]|0x20 != word[k] { // exact for lower-case letters
				return true
			}
		}
	}
	return false
}

// cutPreview cuts a one-line preview to at most n runes.
func cutPreview(line string, n int) string {
	if n <= 0 {
		n = DefaultPreviewRunes
	}
	// At most n runes: said by walking n runes, not counting the whole
	// line (a preview's line can be a 2 KB body).
	if _, more, _ := Truncate(line, 0, n); !more {
		return line
	}
	cut := "" // n == 1: the ellipsis alone (Truncate reads 0 as no limit)
	if n > 1 {
		cut, _, _ = Truncate(line, 0, n-1)
	}
	// Back off to the last word boundary, unless the cut is at one already.
	if k := strings.LastIndexByte(cut, ' '); k > 0 && line[len(cut)] != ' ' && utf8.RuneCountInString(cut[k:]) <= 20 {
		cut = cut[:k]
	}
	cut = strings.TrimRightFunc(cut, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) && r != ')' && r != '"' })
	return cut + "…"
}

// previewBody drops quotes, attribution lines and signatures from text.
// When what it keeps is one stretch of text (nothing dropped, or only a
// tail), that stretch is returned without copying it.
func previewBody(text string) string {
	var kept []int // indexes into lines
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		line = strings.TrimRight(line, "\r")
		trimmed := strings.TrimSpace(line)
		if line == "-- " || line == "--" || isSeparatorLine(trimmed) || isReplyHeader(trimmed, lines[i+1:]) {
			break
		}
		if strings.HasPrefix(trimmed, ">") {
			// Drop the attribution line ("On Monday, Bob wrote:") before a quote.
			for len(kept) > 0 && strings.TrimSpace(lines[kept[len(kept)-1]]) == "" {
				kept = kept[:len(kept)-1]
			}
			if len(kept) > 0 && isAttribution(lines[kept[len(kept)-1]]) {
				kept = kept[:len(kept)-1]
			}
			continue
		}
		kept = append(kept, i)
	}
	if len(kept) == 0 {
		return ""
	}
	whole := true // kept lines follow each other, none ends in "\r"
	for k, i := range kept {
		if k > 0 && i != kept[k-1]+1 || strings.HasSuffix(lines[i], "\r") {
			whole = false
			break
		}
	}
	if whole {
		start := 0
		for _, line := range lines[:kept[0]] {
			start += len(line) + 1
		}
		end := start + len(lines[kept[0]])
		for _, i := range kept[1:] {
			end += 1 + len(lines[i])
		}
		return text[start:end]
	}
	var b strings.Builder
	b.Grow(len(text))
	for k, i := range kept {
		if k > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.TrimRight(lines[i], "\r"))
	}
	return b.String()
}

func isSeparatorLine(s string) bool {
	// Every separator starts with a dash or an underscore: most lines are
	// settled without lowering them (which allocates).
	if s == "" || s[0] != '-' && s[0] != '_' {
		return false
	}
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

// FencePhrase is the phrase of the lines that fence untrusted mail content
// in the tools' text output ("<<<UNTRUSTED MAIL CONTENT BEGIN MAIL-…>>>").
// It is defined here, next to NeutralizeFences, so that the fence and the
// check that mail cannot imitate it stay one shape.
const FencePhrase = "UNTRUSTED MAIL CONTENT"

// FenceRemoved replaces fence-like text in mail content.
const FenceRemoved = "[fence-like text removed]"

// NeutralizeFences rewrites text that imitates a fence line, so that mail
// content can never hold a line that a model could take for the start or
// end of the fenced block. Fence-like text is
//   - the phrase UNTRUSTED MAIL CONTENT preceded by an opening angle bracket
//     ("<<<", "＜", "‹", "«", ...) or followed by BEGIN or END, together with
//     what follows it on the line up to a marker-like word and a closing
//     angle run ("END MAIL-AAAA>>>");
//   - a marker-like word "MAIL-…" followed by two or more closing angle
//     brackets.
//
// Letters match case-insensitively and through common lookalikes
// (fullwidth, mathematical and small-capital letters, Cyrillic and Greek
// homoglyphs; I, l and 1 alike, 0 for O); the words may be run together or
// separated by up to three spaces or punctuation characters.
//
// The whole fence-like stretch becomes FenceRemoved. Replacing all of it,
// not only the angle brackets, leaves no BEGIN/END or marker that still
// reads like a fence, and the square brackets cannot start one. Only the
// exact phrase after an angle bracket or before BEGIN/END is touched, so
// ordinary mail (quotes made of ">>>", "mail content", "the end") is not.
//
// It returns s itself when there is nothing to rewrite, runs in time linear
// in len(s), and NeutralizeFences(NeutralizeFences(s)) ==
// NeutralizeFences(s). Sanitize calls it.
func NeutralizeFences(s string) string {
	var b strings.Builder
	done := 0 // s[:done] has been handled (written to b if b is in use)
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		} else if r|0x20 != 'u' && r != '>' {
			i++ // the common case: an ASCII byte that starts nothing
			continue
		}
		start, end := -1, -1
		if foldLetter(r) == 'u' {
			// "u" followed by an ASCII letter other than n starts no
			// phrase (common in text): skip the full match.
			if next := i + size; next < len(s) && s[next] < utf8.RuneSelf && s[next]|0x20 != 'n' {
				i = next
				continue
			}
			start, end = fenceAt(s, i, done)
		} else if open, n := angleRune(r); n > 0 && !open {
			start, end = markerCloseAt(s, i, done)
		}
		if start < 0 {
			i += size
			continue
		}
		if b.Len() == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[done:start])
		b.WriteString(FenceRemoved)
		done, i = end, end
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// fenceAt looks for the fence phrase starting at s[i] and returns the
// fence-like stretch around it, or -1. floor is where already rewritten
// text ends: the stretch does not reach before it.
func fenceAt(s string, i, floor int) (start, end int) {
	p, ok := matchWords(s, i, "untrusted", "mall", "content")
	if !ok {
		return -1, -1
	}
	// Opening angle brackets before the phrase, spaces allowed.
	start, opening := i, 0
	for k, n := i, 0; k > floor && n < 16; n++ {
		r, size := utf8.DecodeLastRuneInString(s[floor:k])
		if open, w := angleRune(r); w > 0 && open {
			opening += w
			start = k - size
		} else if !isLineSpace(r) {
			break
		}
		k -= size
	}
	// BEGIN or END, a marker-like word, closing angle brackets.
	end = p
	keyword := false
	if q, ok := matchWords(s, skipSeparators(s, p, 3), "begln"); ok && !isWordRune(s, q) {
		end, keyword = q, true
	} else if q, ok := matchWords(s, skipSeparators(s, p, 3), "end"); ok && !isWordRune(s, q) {
		end, keyword = q, true
	}
	q := skipSeparators(s, end, 3)
	tokenEnd := q
	for n := 0; tokenEnd < len(s) && n < 80; n++ {
		r, size := utf8.DecodeRuneInString(s[tokenEnd:])
		if foldLetter(r) == 0 && !isDash(r) && !isMark(r) {
			break
		}
		tokenEnd += size
	}
	closeEnd, closing := closingRun(s, skipSpaces(s, tokenEnd, 3))
	switch {
	case closing > 0:
		end = closeEnd
	case keyword && markerLike(s[:tokenEnd], q):
		end = tokenEnd
	}
	if opening == 0 && !keyword && closing < 2 {
		return -1, -1
	}
	return start, end
}

// markerCloseAt looks for a marker-like word ("MAIL-…") right before the
// closing angle bracket at s[i]; it returns the stretch from the word to
// the end of the angle run, or -1.
func markerCloseAt(s string, i, floor int) (start, end int) {
	end, closing := closingRun(s, i)
	if closing < 2 {
		return -1, -1
	}
	k := i
	for n := 0; k > floor && n < 3; n++ { // spaces before the brackets
		r, size := utf8.DecodeLastRuneInString(s[floor:k])
		if !isLineSpace(r) {
			break
		}
		k -= size
	}
	// The word before them. Its length is not capped: a word holds no
	// angle bracket, so each word is looked at by one run only.
	wordEnd := k
	for k > floor {
		r, size := utf8.DecodeLastRuneInString(s[floor:k])
		if foldLetter(r) == 0 && !isDash(r) && !isMark(r) {
			break
		}
		k -= size
	}
	if !markerLike(s[:wordEnd], k) {
		return -1, -1
	}
	return k, end
}

// markerLike reports whether the word s[i:] holds "MAIL-" followed by a
// letter or digit.
func markerLike(s string, i int) bool {
	for j := i; j < len(s); {
		if q, ok := matchWords(s, j, "mall"); ok {
			if r, size := utf8.DecodeRuneInString(s[q:]); isDash(r) && isWordRune(s, q+size) {
				return true
			}
		}
		_, size := utf8.DecodeRuneInString(s[j:])
		j += size
	}
	return false
}

// matchWords matches words (folded as foldLetter folds) at s[i:], each
// separated from the last by at most three separators, and returns where
// the match ends.
func matchWords(s string, i int, words ...string) (int, bool) {
	for w, word := range words {
		if w > 0 {
			i = skipSeparators(s, i, 3)
		}
		for k := 0; k < len(word); k++ {
			if i >= len(s) {
				return i, false
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if foldLetter(r) != word[k] {
				return i, false
			}
			i += size
			for i < len(s) { // combining marks do not break a word
				r, size := utf8.DecodeRuneInString(s[i:])
				if !isMark(r) {
					break
				}
				i += size
			}
		}
	}
	return i, true
}

// closingRun measures the run of closing angle brackets (spaces allowed
// between them) at s[i:]: where it ends and how many brackets it shows.
func closingRun(s string, i int) (end, count int) {
	end = i
	for k, n := i, 0; k < len(s) && n < 32; n++ {
		r, size := utf8.DecodeRuneInString(s[k:])
		k += size
		if open, w := angleRune(r); w > 0 && !open {
			count += w
			end = k
		} else if !isLineSpace(r) {
			break
		}
	}
	return end, count
}

// skipSeparators skips at most max spaces or punctuation characters (not
// line breaks or angle brackets).
func skipSeparators(s string, i, max int) int {
	for n := 0; i < len(s) && n < max; n++ {
		r, size := utf8.DecodeRuneInString(s[i:])
		if _, w := angleRune(r); w > 0 || r == '\n' || !isLineSpace(r) && !unicode.IsPunct(r) && !unicode.IsSymbol(r) {
			break
		}
		i += size
	}
	return i
}

func skipSpaces(s string, i, max int) int {
	for n := 0; i < len(s) && n < max; n++ {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isLineSpace(r) {
			break
		}
		i += size
	}
	return i
}

// isWordRune reports whether a letter or digit starts at s[i].
func isWordRune(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return foldLetter(r) != 0
}

func isLineSpace(r rune) bool { return r != '\n' && (r == ' ' || r == '\t' || isSpaceRune(r)) }

func isMark(r rune) bool { return r >= 0x300 && unicode.In(r, unicode.Mn, unicode.Me) }

func isDash(r rune) bool {
	switch r {
	case '-', '_', '\u2010', '\u2011', '\u2012', '\u2013', '\u2014', '\u2015', '\u2043', '\u2212', '\uFE63', '\uFF0D', '\uFF3F':
		return true
	}
	return false
}

// angleRune tells whether r looks like an opening or closing angle bracket
// and how many brackets it shows (0: not one).
func angleRune(r rune) (open bool, n int) {
	switch r {
	case '<', '\u2039', '\uFF1C', '\uFE64', '\u3008', '\u2329', '\u27E8', '\u02C2', '\u1438', '\u276E', '\u2770', '\u29FC', '\u226E':
		return true, 1
	case '\u00AB', '\u300A', '\u27EA', '\u226A':
		return true, 2
	case '\u22D8', '\u2AF7':
		return true, 3
	case '>', '\u203A', '\uFF1E', '\uFE65', '\u3009', '\u232A', '\u27E9', '\u02C3', '\u1433', '\u276F', '\u2771', '\u29FD', '\u226F':
		return false, 1
	case '\u00BB', '\u300B', '\u27EB', '\u226B':
		return false, 2
	case '\u22D9', '\u2AF8':
		return false, 3
	}
	return false, 0
}

// homoglyphs maps letters that look like the Latin letters of the fence
// words to them.
var homoglyphs = map[rune]byte{
	'а': 'a', 'А': 'a', 'α': 'a', 'Α': 'a', 'ɑ': 'a', 'ᴀ': 'a',
	'В': 'b', 'Β': 'b', 'ʙ': 'b', 'Ь': 'b',
	'с': 'c', 'С': 'c', 'ϲ': 'c', 'Ϲ': 'c', 'ᴄ': 'c',
	'ԁ': 'd', 'ᴅ': 'd', 'Ꭰ': 'd',
	'е': 'e', 'Е': 'e', 'Ε': 'e', 'ᴇ': 'e', 'ҽ': 'e',
	'ɡ': 'g', 'ɢ': 'g', 'Ԍ': 'g',
	'і': 'l', 'І': 'l', 'Ι': 'l', 'ι': 'l', 'ı': 'l', 'ɪ': 'l', 'ӏ': 'l', 'Ӏ': 'l', 'ʟ': 'l', 'Ꮮ': 'l', 'ǀ': 'l',
	'м': 'm', 'М': 'm', 'Μ': 'm', 'ᴍ': 'm',
	'п': 'n', 'Ν': 'n', 'ɴ': 'n', 'ո': 'n', 'η': 'n',
	'о': 'o', 'О': 'o', 'ο': 'o', 'Ο': 'o', 'օ': 'o', 'ᴏ': 'o',
	'г': 'r', 'ʀ': 'r', 'Ꭱ': 'r',
	'ѕ': 's', 'Ѕ': 's', 'ꜱ': 's', 'Ꮪ': 's',
	'т': 't', 'Т': 't', 'τ': 't', 'Τ': 't', 'ᴛ': 't',
	'υ': 'u', 'ս': 'u', 'ᴜ': 'u', 'Ս': 'u',
}

// foldLetter maps a letter or digit to the lower-case ASCII letter or digit
// it can pass for ('i', '1' and '|' as 'l', '0' as 'o'); 0 for other runes.
func foldLetter(r rune) byte {
	if r < utf8.RuneSelf {
		c := byte(r)
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		switch {
		case c == 'i' || c == '1' || c == '|':
			return 'l'
		case c == '0':
			return 'o'
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			return c
		}
		return 0
	}
	if r >= 0xFF01 && r <= 0xFF5E { // fullwidth ASCII
		return foldLetter(r - 0xFEE0)
	}
	if r < 0x600 || r >= 0x13A0 && r <= 0x13FF || r >= 0x1D00 && r <= 0x1D2B || r == 0xA731 {
		if c, ok := homoglyphs[r]; ok {
			return c
		}
	}
	// Accented Latin letters, letterlike symbols, enclosed, mathematical and
	// other compatibility forms of ASCII letters and digits: the letter
	// their decomposition starts with.
	if r >= 0xC0 && r <= 0x2AF || r >= 0x1E00 && r <= 0x1EFF || r >= 0x2100 && r <= 0x24FF ||
		r >= 0x1D400 && r <= 0x1D7FF || r >= 0x1F100 && r <= 0x1F1FF || r >= 0x2070 && r <= 0x209F ||
		r >= 0x1D2C && r <= 0x1D6A {
		var buf [4]byte
		n := utf8.EncodeRune(buf[:], r)
		if d := norm.NFKD.Properties(buf[:n]).Decomposition(); len(d) > 0 && d[0] < utf8.RuneSelf && d[0] > ' ' {
			return foldLetter(rune(d[0]))
		}
	}
	return 0
}
