package mailmsg

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// Seeds besides these live in testdata/fuzz/<target>/.

func FuzzParseMessage(f *testing.F) {
	f.Add([]byte(crlf(mixedMessage)))
	f.Add([]byte("Content-Type: text/html; charset=koi8-r\r\n\r\n<p>\xf0\xd2\xc9\xd7\xc5\xd4</p><script>x</script>"))
	f.Add([]byte("Content-Type: multipart/alternative; boundary=a\r\n\r\n--a\r\nContent-Type: text/plain; format=flowed\r\n\r\nhi \r\nthere\r\n--a--"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseMessage(bytes.NewReader(data), 1<<20)
		if err != nil {
			if p != nil {
				t.Fatalf("result %+v with error %v", p, err)
			}
			return
		}
		checkParsed(t, p)
		if len(p.Attachments) > maxParts {
			t.Fatalf("%d attachments", len(p.Attachments))
		}
	})
}

func FuzzDecodeHeader(f *testing.F) {
	f.Add("=?UTF-8?B?R3LDvMOfZQ==?= =?ISO-2022-JP?B?GyRCRnxLXDhsGyhC?=")
	f.Add("=?x-unknown?Q?caf=E9?= raw \xe9 =?utf-7?q?+AOk-?=")
	f.Add("=?=?=?a?b?=?q?=?=")
	f.Fuzz(func(t *testing.T, s string) {
		out := DecodeHeader(s)
		checkClean(t, "DecodeHeader", out)
		if SanitizeLine(out) != out {
			t.Fatalf("not a clean line: %q", out)
		}
		// The stdlib decoder with our charsets may return an error on bad
		// syntax, but must not panic.
		_, _ = WordDecoder().DecodeHeader(s)
	})
}

func FuzzSanitize(f *testing.F) {
	f.Add("plain")
	f.Add("a\u202Eb\u200Bc\x00d\r\ne\xff\u2764\uFE0F\uFE0F\U000E0041")
	f.Add("e\u0301\u200B\u0301\uFE0F")
	f.Fuzz(func(t *testing.T, s string) {
		out := Sanitize(s)
		checkClean(t, "Sanitize", out)
		line := SanitizeLine(s)
		checkClean(t, "SanitizeLine", line)
		if SanitizeLine(line) != line {
			t.Fatalf("SanitizeLine not idempotent: %q -> %q", line, SanitizeLine(line))
		}
		for _, r := range line {
			if r == '\n' || r == '\t' {
				t.Fatalf("SanitizeLine kept a line break or tab: %q", line)
			}
		}
		preview := Preview(s, 40)
		checkClean(t, "Preview", preview)
		if n := utf8.RuneCountInString(preview); n > 40 {
			t.Fatalf("Preview has %d runes", n)
		}
		// Truncate chunks always put the text back together.
		var b bytes.Buffer
		for offset := 0; ; {
			chunk, more, next := Truncate(s, offset, 3)
			b.WriteString(chunk)
			if !more {
				break
			}
			offset = next
		}
		if b.String() != s {
			t.Fatalf("Truncate chunks give %q, want %q", b.String(), s)
		}
	})
}

func FuzzHTMLToText(f *testing.F) {
	f.Add(`<p>Hi <a href="https://x.example/?a=1&amp;b">link</a></p><script>if(a<b)</script><table><tr><td>1<td>2</table>`)
	f.Add(`<div style="display:none"><div>x</div></div><pre> a\n b</pre><blockquote>q</blockquote><!-- c > -->`)
	f.Fuzz(func(t *testing.T, s string) {
		out := HTMLToText(s)
		checkClean(t, "HTMLToText", out)
		if normalizeText(out) != out {
			t.Fatalf("not normalised: %q", out)
		}
	})
}
