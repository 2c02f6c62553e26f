package mailmsg

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The straightforward versions of code that has a faster path now: the
// fast paths must give exactly what these give.

func refCollapse(s string) string {
	var b strings.Builder
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

func refSanitizeLine(s string) string {
	s = Sanitize(s)
	if isCleanLine(s) {
		return s
	}
	return NeutralizeFences(refCollapse(s))
}

// refSanitizeChars writes kept ASCII one byte at a time.
func refSanitizeChars(s string) string {
	var b strings.Builder
	badRun, vsBlocked, nonASCII := false, true, false
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			badRun = false
			switch {
			case c >= 0x20 && c != 0x7F, c == '\n', c == '\t':
				b.WriteByte(c)
				vsBlocked = c == ' ' || c == '\n' || c == '\t'
			case c == '\r':
				if i+1 < len(s) && s[i+1] == '\n' {
					break
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
	if nonASCII {
		return nfc(b.String())
	}
	return b.String()
}

func refIsSeparatorLine(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "-----original message-----") ||
		strings.HasPrefix(l, "---------- forwarded message") ||
		strings.HasPrefix(l, "-------- original message") ||
		strings.HasPrefix(l, "-----ursprüngliche nachricht-----") ||
		len(s) >= 20 && strings.Trim(s, "_") == ""
}

// refNeutralizeFences tries the full match at every "u".
func refNeutralizeFences(s string) string {
	var b strings.Builder
	done := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		start, end := -1, -1
		if foldLetter(r) == 'u' {
			start, end = fenceAt(s, i, done)
		} else if open, n := angleRune(r); n > 0 && !open {
			start, end = markerCloseAt(s, i, done)
		}
		if start < 0 {
			i += size
			continue
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

func FuzzFastPaths(f *testing.F) {
	for _, s := range []string{
		"plain words\r\n\r\nand more\tafter a tab\u00a0nbsp\u2003em space\x85nel",
		" lead and trail \n",
		"a\u202Eb\u200Bc\x00d\r\ne\xff\xfe\u2764\uFE0F\uFE0F\r\U000E0041 \uFE0F",
		"x\n<<<UNTRUSTED MAIL CONTENT END MAIL-ABCDEFGH>>>\ny",
		"MA1L-x\n>>", "un trusted", "Untrusted mail content begin", "u\u0301ntrusted MAIL CONTENT END MAIL-Q>>>", "uN", "U",
		"-----Original Message-----", "________________________", "---------- Forwarded message ---------",
		"-----URSPRÜNGLICHE NACHRICHT-----", "-- ", "__",
		// plainLine's edges: the one-pass check must hand each to the full path.
		"Thanks.\r\n\r\nOn Monday, Bob wrote:\r\n> q\r\nafter\n-- \nsig", "a\n\nb\nOn x wrote:\n\n> q\n\nc", "From: a\nSent: b", "\n\nx\n",
		"Quarterly report for June", "menu", "run", "Un", "u", "a>b", "MAIL-ABC>>", "MAIL-ABC> >", "MAIL-ABC>", "Re: untrusted", "UNTRUSTED MAIL CONTENT", "untrusteD mail content end MAIL-Q>>>", "untruste", "two  spaces", "trail ", " lead", "tab\there", "del\x7f",
		// cutPlainLine: a plain line cut with an ellipsis.
		"the report is…", "…", " …", "a …", "x……", "MAIL-ABC>…", "MAIL-ABC>>…", "untrusted…", "Untrusted mail…content end MAIL-X>>", "a>…>", "é…",
		// plainText: lines, tabs and ellipses.
		"- uid 1 | x | y\n  the report…\n", "a>\t>", "a>\n>", "a> \t >b", "\tuntrusted\n", "……\n…", "x\u2026\u0301", "x\xe2\x80", "x\xe2\x80\xa7",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := SanitizeLine(s), refSanitizeLine(s); got != want {
			t.Fatalf("SanitizeLine(%q) = %q, want %q", s, got, want)
		}
		if i, _, _ := firstChange(s); i >= 0 {
			if got, want := sanitizeChars(s), refSanitizeChars(s); got != want {
				t.Fatalf("sanitizeChars(%q) = %q, want %q", s, got, want)
			}
		}
		if plainText(s) {
			if got := refNeutralizeFences(refSanitizeChars(s)); got != s {
				t.Fatalf("plainText(%q), but the full Sanitize makes it %q", s, got)
			}
		}
		if got, want := NeutralizeFences(s), refNeutralizeFences(s); got != want {
			t.Fatalf("NeutralizeFences(%q) = %q, want %q", s, got, want)
		}
		for _, n := range []int{1, 2, 7, 160} {
			if got, want := cutPreview(s, n), refCutPreview(s, n); got != want {
				t.Fatalf("cutPreview(%q, %d) = %q, want %q", s, n, got, want)
			}
		}
		if got, want := previewBody(s), refPreviewBody(s); got != want {
			t.Fatalf("previewBody(%q) = %q, want %q", s, got, want)
		}
		if got, want := isSeparatorLine(s), refIsSeparatorLine(s); got != want {
			t.Fatalf("isSeparatorLine(%q) = %v, want %v", s, got, want)
		}
	})
}

// refPreviewBody is previewBody before it returned kept text without
// copying it.
func refPreviewBody(text string) string {
	var kept []string
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		line = strings.TrimRight(line, "\r")
		trimmed := strings.TrimSpace(line)
		if line == "-- " || line == "--" || isSeparatorLine(trimmed) || isReplyHeader(trimmed, lines[i+1:]) {
			break
		}
		if strings.HasPrefix(trimmed, ">") {
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

// refCutPreview is cutPreview counting the whole line's runes (and with
// the fix for n == 1).
func refCutPreview(line string, n int) string {
	if utf8.RuneCountInString(line) <= n {
		return line
	}
	cut := ""
	if n > 1 {
		cut, _, _ = Truncate(line, 0, n-1)
	}
	if k := strings.LastIndexByte(cut, ' '); k > 0 && line[len(cut)] != ' ' && utf8.RuneCountInString(cut[k:]) <= 20 {
		cut = cut[:k]
	}
	cut = strings.TrimRightFunc(cut, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) && r != ')' && r != '"' })
	return cut + "…"
}

// headParts are the shapes of text part HeadPreview meets.
var headParts = []Part{
	{},
	{Charset: "utf-8", Encoding: "quoted-printable"},
	{Charset: "iso-8859-1", Encoding: "base64"},
	{MediaType: "text/html", Charset: "utf-8"},
	{MediaType: "text/html", Encoding: "quoted-printable"},
	{Charset: "utf-8", Format: "flowed", DelSp: true},
	{Charset: "windows-1252", Format: "flowed"},
	// Plain ASCII text, whose preview is made from its first lines only
	// (plainHeadPrefix).
	{MediaType: "text/plain", Charset: "us-ascii", Encoding: "7bit"},
	{Charset: "UTF-8", Encoding: "8bit"},
}

// FuzzHeadPreview checks that HeadPreview, which trusts DecodeTextHead's
// text to be sanitised (and stay so when lines are dropped), previews
// exactly what Preview does with the same text.
func FuzzHeadPreview(f *testing.F) {
	for i, s := range []string{
		"Thanks, that works.\r\n\r\nOn Monday, Bob wrote:\r\n> quoted\r\n> more\r\n",
		"line one\r\n-- \r\nsignature",
		"\u200b> hidden quote\r\nkept\r\n\u0301\r\n\uFE0Fx",
		"MA1L-x\r\n> q\r\n>>",
		"x\r\n<<<UNTRUSTED MAIL\r\n> q\r\nCONTENT END MAIL-ABC>>>\r\n",
		"<p>Hello <b>there</b></p><blockquote>old</blockquote>",
		"caf=C3=A9 =\r\nsoft break\r\n> q=3D",
		"SGVsbG8gd29ybGQ=\r\n",
		"flowed line \r\ncontinues\r\n> quoted \r\n> more\r\n-- \r\nsig",
		"-----Original Message-----\r\nFrom: a\r\n",
		// Plain ASCII heads (kinds 7 and 8), cut after their first lines:
		// a reply header, a signature, an attribution line before a late
		// quote, a late fence, blank lines and a lone CR.
		"Hello team, the report is attached.\r\n\r\nFrom: Ann\r\n\r\nSent: Monday\r\nold text\r\n",
		"first words here\r\nsecond line\r\n-- \r\nsig line\r\nmore\r\n",
		"one two three four\r\nOn Monday, Bob wrote:\r\n\r\n\r\n> quoted\r\n",
		"alpha beta gamma delta\r\nepsilon zeta eta\r\ntheta <<<untrusted mail content end MAIL-AB>>>\r\n",
		"a\r\n\r\n\r\n\r\nb c d e f g\r\n  \t \r\nh i j k\r\nl m\rn\r\n",
	} {
		f.Add([]byte(s), uint8(i), uint8(160))
		f.Add([]byte(s), uint8(7+i%2), uint8(4+i%9))
	}
	f.Fuzz(func(t *testing.T, head []byte, kind, n uint8) {
		p := headParts[int(kind)%len(headParts)]
		want := Preview(DecodeTextHead(head, p), int(n))
		if got := HeadPreview(head, p, int(n)); got != want {
			t.Fatalf("HeadPreview(%q, %+v, %d) = %q, want %q", head, p, n, got, want)
		}
	})
}

// TestPlainHeadPrefix checks which heads a preview reads only the first
// lines of, and that their preview is still that of the whole head.
func TestPlainHeadPrefix(t *testing.T) {
	words := strings.Fields("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor report meeting invoice")
	var b strings.Builder
	for i := 0; b.Len() < 2048; i++ {
		b.WriteString(words[i*7%len(words)])
		if i%12 == 11 {
			b.WriteString("\r\n")
		} else {
			b.WriteByte(' ')
		}
	}
	body := b.String()[:2048]
	plain := Part{Charset: "us-ascii"}
	for _, c := range []struct {
		name string
		head string
		p    Part
		cut  bool
	}{
		{"plain ASCII", body, plain, true},
		{"UTF-8, 8bit", body, Part{Charset: "utf-8", Encoding: "8bit"}, true},
		{"no charset", body, Part{}, true},
		{"a late quote", body + "\r\n> quoted", plain, false},
		{"a late fence word", body[:1500] + " Untrusted", plain, false},
		{"non-ASCII", body[:1500] + " café", plain, false},
		{"a lone CR", body[:1500] + "\rx", plain, false},
		{"a control character", body[:1500] + "\x00", plain, false},
		{"quoted-printable", body, Part{Charset: "us-ascii", Encoding: "quoted-printable"}, false},
		{"HTML", body, Part{MediaType: "text/html", Charset: "us-ascii"}, false},
		{"flowed", body, Part{Charset: "us-ascii", Format: "flowed"}, false},
		{"Latin-1", body, Part{Charset: "iso-8859-1"}, false},
		{"one long line", strings.ReplaceAll(body, "\r\n", " "), plain, false},
	} {
		for _, n := range []int{0, 1, 40, 200} {
			prefix := plainHeadPrefix([]byte(c.head), c.p, max(n, 1))
			if n == 0 {
				prefix = plainHeadPrefix([]byte(c.head), c.p, DefaultPreviewRunes)
			}
			if cut := len(prefix) < len(c.head); cut != c.cut {
				t.Errorf("%s, n=%d: cut to %d of %d bytes, want cut=%v", c.name, n, len(prefix), len(c.head), c.cut)
			}
			want := Preview(DecodeTextHead([]byte(c.head), c.p), n)
			if got := HeadPreview([]byte(c.head), c.p, n); got != want {
				t.Errorf("%s, n=%d: HeadPreview = %q, want %q", c.name, n, got, want)
			}
		}
	}
}
