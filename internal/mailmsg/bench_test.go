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

// newsletterCSS is a style sheet shaped like the ones responsive mail
// frameworks keep in <style> (Foundation for Emails, MJML, mailgen): resets,
// descendant and child selectors under a body class, grid classes, buttons,
// a hidden preheader, and mobile @media rules.
func newsletterCSS() string {
	var b strings.Builder
	b.WriteString(`body,table,td,p,a{-webkit-text-size-adjust:100%;-ms-text-size-adjust:100%}` +
		`table,td{mso-table-lspace:0pt;mso-table-rspace:0pt}img{border:0;height:auto;outline:none;text-decoration:none}` +
		`body{margin:0;padding:0;width:100%!important;background:#f3f3f3}` +
		`.preheader{display:none!important;visibility:hidden;mso-hide:all;font-size:1px;color:#f3f3f3;line-height:1px;max-height:0;max-width:0;opacity:0;overflow:hidden}` +
		`table.body .container{background:#fefefe;width:580px}table.body .hide-for-large *{mso-hide:all}` +
		`table.button table td{background:#2199e8;border:2px solid #2199e8}table.button table td a{color:#fefefe;font-weight:bold}` +
		`table.body th.columns>table td{padding:0}h1,h2,h3{color:inherit;word-wrap:normal}a:hover{color:#147dc2}` +
		`.callout-inner.secondary{background:#ebebeb}td.spacer{font-size:0;line-height:0}`)
	for i := range 12 {
		fmt.Fprintf(&b, `th.small-%d,td.small-%d{width:%dpx}th.large-%d,td.large-%d{width:%dpx}`, i+1, i+1, 48*(i+1), i+1, i+1, 48*(i+1))
		fmt.Fprintf(&b, `table.body .columns .col-%d p{margin:0 0 %dpx}.row>.c%d td{padding:%dpx}`, i, i, i, i)
	}
	b.WriteString(`@media only screen and (max-width:596px){table.body .hide-for-large{display:block!important;width:auto!important}` +
		`table.body .show-for-large{display:none!important}table.body .container{width:95%!important}` +
		`table.body th.small-12{display:inline-block!important;width:100%!important}}` +
		`@media (prefers-color-scheme:dark){.dm{background:#000!important;color:#fff!important}}`)
	return b.String()
}

// newsletterHTML builds a newsletter of about size bytes: a Foundation-like
// layout (nested tables, grid classes, a button, a hidden preheader) with
// the style sheet of newsletterCSS in <style>.
func newsletterHTML(size int) string {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">` +
		`<html><head><meta http-equiv="Content-Type" content="text/html; charset=utf-8"><title>News</title><style>` +
		newsletterCSS() + `</style></head><body><span class="preheader">This week: stories and offers &zwnj;&nbsp;&zwnj;&nbsp;</span>` +
		`<table class="body"><tr><td class="center" align="center" valign="top"><center><table class="container"><tbody><tr><td>`)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `<table class="row c%d"><tbody><tr><th class="small-12 large-%d columns first col-%d"><table><tr><th>`+
			`<h2>Story %d: Gr&uuml;&szlig;e &amp; more</h2>`+
			`<p style="font-size:16px;color:#0a0a0a">Lorem ipsum dolor sit amet, <b>consectetur</b> adipiscing elit &mdash; sed do eiusmod tempor.<br>`+
			`Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris.</p>`+
			`<table class="button"><tr><td><table><tr><td><a href="https://news.example/story/%d?utm_source=mail&amp;utm_medium=email" style="mso-hide:all">Read more</a></td></tr></table></td></tr></table>`+
			`<table class="spacer"><tbody><tr><td class="spacer" height="16" style="font-size:16px;line-height:16px">&#xA0;</td></tr></tbody></table>`+
			`</th><th class="expander"></th></tr></table></th>`+
			`<th class="small-12 large-4 columns last"><table><tr><th><p class="text-center" style="background:rgba(0,0,0,.05)">Price: &euro;%d.99</p>`+
			`<!-- tracking %d --><img src="https://t.example/p/%d.gif" width="1" height="1" alt=""></th></tr></table></th></tr></tbody></table>`+"\n",
			i%12, 8, i%12, i, i, i, i, i)
	}
	b.WriteString(`</td></tr></tbody></table></center></td></tr></table><script>var x = 1 < 2;</script></body></html>`)
	return b.String()
}

// BenchmarkHTMLToText converts a 100 KB and a 1 MB newsletter (see
// newsletterHTML: nested tables and a framework's style sheet in <style>)
// and the same sizes of benchHTML (inline styles, one small rule) to text,
// hidden-text removal included.
func BenchmarkHTMLToText(b *testing.B) {
	for _, doc := range []struct {
		name string
		make func(int) string
	}{{"newsletter", newsletterHTML}, {"simple", benchHTML}} {
		for _, size := range []int{100 << 10, 1 << 20} {
			html := doc.make(size)
			b.Run(fmt.Sprintf("%s-%dKB", doc.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(html)))
				b.ReportAllocs()
				for b.Loop() {
					_ = HTMLToText(html)
				}
			})
		}
	}
}

// BenchmarkHTMLToTextOld is BenchmarkHTMLToText on the converter issue 28
// replaced (oldconv_test.go), to compare the two under the same load.
func BenchmarkHTMLToTextOld(b *testing.B) {
	for _, doc := range []struct {
		name string
		make func(int) string
	}{{"newsletter", newsletterHTML}, {"simple", benchHTML}} {
		for _, size := range []int{100 << 10, 1 << 20} {
			html := doc.make(size)
			b.Run(fmt.Sprintf("%s-%dKB", doc.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(html)))
				b.ReportAllocs()
				for b.Loop() {
					_ = oldHTMLToText(html)
				}
			})
		}
	}
}

// hostileHTML builds about size bytes of HTML made to make a selector
// matcher slow: a style sheet whose rules grow with the document (half of
// it, up to maxRules) with descendant, child, sibling, structural
// and negated compounds that all keep matching a deep chain of .a
// elements, and a body of 100-deep nests of .a and long lists.
func hostileHTML(size int) string {
	var css, body strings.Builder
	for i := 0; css.Len() < size/2 && i < maxRules; i++ {
		switch i % 5 {
		case 0:
			fmt.Fprintf(&css, ".a .a .a .a .h%d{display:none}", i%50)
		case 1:
			fmt.Fprintf(&css, ".a > .a > .a ~ .h%d{visibility:hidden}", i%50)
		case 2:
			fmt.Fprintf(&css, "li:nth-child(2n+1) .a .h%d{opacity:0}", i%50)
		case 3:
			fmt.Fprintf(&css, ":not(.q) .a + .a .h%d{font-size:0}", i%50)
		default:
			fmt.Fprintf(&css, "div.a[data-x] .a .zz%d{display:none}", i)
		}
	}
	for i := 0; body.Len() < size/2; i++ {
		body.WriteString(strings.Repeat(`<div class="a" data-x>`, 100))
		fmt.Fprintf(&body, `<span class="h%d">secret %d</span><span class="a">shown %d</span>`, i%60, i, i)
		body.WriteString(strings.Repeat("</div>", 100))
		body.WriteString("<ul>" + strings.Repeat(`<li><span class="a"><b class="h1">x</b></span></li>`, 50) + "</ul>")
	}
	return "<style>" + css.String() + "</style>" + body.String()
}

// BenchmarkHTMLToTextHostile is hostileHTML at three sizes: the time per
// byte stays flat (the matching budget grows with the input).
func BenchmarkHTMLToTextHostile(b *testing.B) {
	for _, size := range []int{256 << 10, 1 << 20, 4 << 20} {
		html := hostileHTML(size)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(html)))
			b.ReportAllocs()
			for b.Loop() {
				_ = HTMLToText(html)
			}
		})
	}
}
