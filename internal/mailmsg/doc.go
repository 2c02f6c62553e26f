// Package mailmsg owns MIME decoding, charsets, HTML to text and sanitising of
// mail content before it reaches the model.
//
// Everything here treats mail as hostile input: it never fails a whole message
// because of one bad part, decodes every charset it can and falls back to a
// best effort (with a warning) for the rest, strips invisible, control and
// bidi characters, never lets raw HTML through, and runs in time linear in
// the size of its input.
//
// HTML is parsed with golang.org/x/net/html (the HTML5 algorithm, scripting
// off as in mail clients) and <style> rules are matched with
// github.com/andybalholm/cascadia, so what counts as hidden is judged on the
// tree a browser renders: html.go walks it, css.go and selector.go cascade
// the style sheets, vars.go resolves custom properties, style.go decides
// what one element's style hides, geometry.go bounds where text lands (off
// the page is hidden), replaced.go applies the rendering rules that are not
// CSS (SVG, <object>). HiddenRules lists the rules, in the words of
// docs/tools.md; tests/hiding_test.go checks them against Chromium's
// pixels.
//
// The package does no I/O to mail servers and must not import go-imap or
// go-smtp: the IMAP layer hands it raw bytes (one part at a time, as fetched
// with BODY.PEEK[part], or the first bytes of one) and gets text back.
//
// Entry points:
//   - [DecodeHeader] and [WordDecoder] for RFC 2047 header values.
//   - [DecodeText] for one raw, still transfer-encoded text part.
//   - [DecodeTextHead] and [NestedBody] for the first bytes of a part, as a
//     partial FETCH returns them (previews).
//   - [HTMLToText], [Sanitize], [SanitizeLine], [Truncate], [Preview] for
//     preparing text for the model.
//   - [Compose] and the address parsers for writing mail.
//
// The text, names and warnings that DecodeHeader, DecodeText, DecodeTextHead,
// HTMLToText, Sanitize, SanitizeLine and Preview return are valid UTF-8 in
// NFC, without C0/C1 controls (other than newline and tab), zero-width or bidi
// control characters; warnings quote sender-controlled values only that way.
// (Truncate cuts what it is given; WordDecoder is raw, for go-imap.) The text
// is still untrusted content written by whoever sent the mail: the caller
// must present it to the model as such.
package mailmsg
