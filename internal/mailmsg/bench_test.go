package mailmsg

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// benchHTML builds a newsletter-like HTML document of about size bytes.
func benchHTML(size int) string {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html><head><meta charset="utf-8"><title>News</title>` +
		`<style>body{font-family:Arial} .btn > a {color:#fff}</style></head><body>` +
		`<span style="display:none">Preheader &zwnj;&nbsp;&zwnj;&nbsp;</span>`)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `<table role="presentation" width="100%%" cellpadding="0"><tr><td class="c%d" style="padding:10px">`+
			`<h2>Story %d: Gr&uuml;&szlig;e &amp; more</h2>`+
			`<p>Lorem ipsum dolor sit amet, <b>consectetur</b> adipiscing elit &mdash; sed do eiusmod tempor.<br>`+
			`Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris.</p>`+
			`<p><a href="https://news.example/story/%d?utm_source=mail&amp;utm_medium=email">Read more</a></p>`+
			`<!-- tracking %d --><img src="https://t.example/p/%d.gif" width="1" height="1"></td>`+
			`<td>&nbsp;</td><td>Price: &euro;%d.99</td></tr></table>`+"\n", i, i, i, i, i, i)
	}
	b.WriteString(`<script>var x = 1 < 2;</script></body></html>`)
	return b.String()
}

func BenchmarkSanitize(b *testing.B) {
	ascii := strings.Repeat("The quick brown fox jumps over the lazy dog.\n", 10240/45+1)[:10240]
	unicode := strings.Repeat("Grüße aus Köln, 日本語のテキスト, Привет мир 😀\n", 10240/80+1)
	dirty := strings.Repeat("text\u200b with\u202e hidden\x00 chars\r\n", 10240/40+1)
	for _, bc := range []struct {
		name, input string
	}{{"ascii-10KB", ascii}, {"unicode-10KB", unicode}, {"dirty-10KB", dirty}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.input)))
			b.ReportAllocs()
			for b.Loop() {
				_ = Sanitize(bc.input)
			}
		})
	}
}

func BenchmarkDecodeTextHTML(b *testing.B) {
	html := []byte(benchHTML(200 << 10))
	part := Part{MediaType: "text/html", Charset: "utf-8", Encoding: "8bit"}
	b.SetBytes(int64(len(html)))
	b.ReportAllocs()
	for b.Loop() {
		text, _ := DecodeText(bytes.NewReader(html), part)
		if len(text) == 0 {
			b.Fatal("no text")
		}
	}
}

// BenchmarkPreviewHead is what a list does for each message of a page: find
// the first text part in the first 2 KB of part 1 (a multipart/alternative
// inside multipart/mixed) and decode it for the preview.
func BenchmarkPreviewHead(b *testing.B) {
	alt := crlf(`--a
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

` + strings.Repeat("Hello Bob, please find the report attached. Gr=C3=BC=C3=9Fe!\n", 200) + `
--a
Content-Type: text/html; charset=utf-8

` + benchHTML(20<<10) + `
--a--
`)
	head := []byte(alt[:2048])
	part := Part{MediaType: "text/plain", Charset: "utf-8", Encoding: "quoted-printable"}
	b.SetBytes(int64(len(head)))
	b.ReportAllocs()
	for b.Loop() {
		if p := Preview(DecodeTextHead(NestedBody(head, []Nested{{"a", 1}}), part), 200); !strings.HasPrefix(p, "Hello Bob") {
			b.Fatalf("preview %q", p)
		}
	}
}
