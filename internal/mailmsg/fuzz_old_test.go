package mailmsg

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
)

// FuzzHTMLToTextOld compares the converter with the one issue 28 replaced
// (a frozen copy in oldconv_test.go) on documents without a <style> block:
// both must show the same words in the same order and count the same
// hidden elements.
//
// The documents are built from the fuzzer's bytes rather than taken as
// they come: on tag soup the old converter's hand-made tree builder and the
// HTML5 algorithm of x/net/html disagree on purpose (that is what the
// change fixed), and a byte-level comparison would report those fixes.
// The generator writes well-formed documents whose tree is the same for
// both (block and inline elements, lists, tables, links, the hidden
// attribute, inline styles), with the inline styles whose meaning did not
// change: display, visibility, zero font sizes, opacity 0, zero sizes with
// hidden overflow, a colour equal to its background. What changed on
// purpose is left out: mso-hide, translucent colours, colours compared by
// contrast, white text on the page's white; and (issue 36) sizes that clip
// only on blocks, never on inline elements or table cells.
func FuzzHTMLToTextOld(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("\x05\x01\x02\x07\x00\x03\x09\x04\x08\x06\x0b\x0c\x0d"))
	f.Add([]byte("hidden text in a table with a link and a list"))
	f.Add([]byte{9, 9, 9, 1, 2, 3, 1, 2, 3, 7, 7, 7, 0, 0, 0, 4, 5, 6})
	f.Fuzz(func(t *testing.T, data []byte) {
		doc := genDoc(data)
		newText, newHidden := htmlToText(doc)
		oldText, oldHidden := oldHtmlToText(doc)
		nw, ow := alnumWords(newText), alnumWords(oldText)
		if !slices.Equal(nw, ow) || newHidden != oldHidden {
			t.Fatalf("document %q\nnew: %q (%d hidden)\nold: %q (%d hidden)", doc, newText, newHidden, oldText, oldHidden)
		}
	})
}

func alnumWords(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// genDoc writes a well-formed document chosen by data.
func genDoc(data []byte) string {
	g := docGen{data: data}
	var b strings.Builder
	b.WriteString("<html><body>")
	for range 6 {
		if g.done() {
			break
		}
		g.block(&b, 0)
	}
	b.WriteString("</body></html>")
	return b.String()
}

type docGen struct {
	data []byte
	i    int
	word int
	// open holds, for each element open, whether its style sets a
	// colour: a link inside one would differ on purpose (links keep the
	// browser's blue now, they inherited the colour before), so none is
	// written there.
	open     []bool
	coloured int
}

// end closes the element attrs opened.
func (g *docGen) end() {
	if g.open[len(g.open)-1] {
		g.coloured--
	}
	g.open = g.open[:len(g.open)-1]
}

func (g *docGen) done() bool { return g.i >= len(g.data) }

func (g *docGen) next(n int) int {
	if g.i >= len(g.data) {
		return 0
	}
	c := int(g.data[g.i])
	g.i++
	return c % n
}

var genStyles = []string{
	"", "", "", "display:none", "visibility:hidden", "visibility:visible", "font-size:0", "font-size:14px",
	"opacity:0", "max-height:0;overflow:hidden", "color:#0000ff;background:#0000ff", "color:#ff0000",
	"color:#0000ff", "display:block", "height:0;overflow:hidden", "font:0/0 a",
}

// attrs writes an element's attributes; sized says it is a block, where
// a zero size with hidden overflow hides (on inline elements and table
// parts sizes do not clip, which the old converter ignored: left out).
func (g *docGen) attrs(sized bool) string {
	var a string
	coloured := false
	defer func() {
		g.open = append(g.open, coloured)
		if coloured {
			g.coloured++
		}
	}()
	if g.next(3) > 0 {
		return "" // most elements have no style
	}
	if s := genStyles[g.next(len(genStyles))]; s != "" && (sized || !strings.Contains(s, "height")) {
		a += ` style="` + s + `"`
		coloured = strings.Contains(s, "color")
	}
	if g.next(9) == 0 && !strings.Contains(a, "display") {
		a += " hidden" // (under a CSS display it shows now, as in browsers)
	}
	return a
}

func (g *docGen) text(b *strings.Builder) {
	g.word++
	fmt.Fprintf(b, "w%d ", g.word)
}

func (g *docGen) inline(b *strings.Builder, depth int) {
	switch k := g.next(7); {
	case k < 3 || depth > 4:
		g.text(b)
	case k == 3 && g.coloured > 0:
		g.text(b)
	case k == 3:
		g.word++
		fmt.Fprintf(b, `<a href="https://x.example/%d"%s>`, g.word, g.attrs(false))
		g.text(b)
		b.WriteString("</a> ")
		g.end()
	default:
		tag := []string{"span", "b", "i", "font"}[g.next(4)]
		fmt.Fprintf(b, "<%s%s>", tag, g.attrs(false))
		for range 1 + g.next(3) {
			if tag == "span" {
				g.inline(b, depth+1)
			} else {
				g.text(b)
			}
		}
		fmt.Fprintf(b, "</%s> ", tag)
		g.end()
	}
}

func (g *docGen) block(b *strings.Builder, depth int) {
	if depth > 5 {
		g.inline(b, depth)
		return
	}
	switch g.next(8) {
	case 0, 1:
		tag := []string{"p", "h2"}[g.next(2)]
		fmt.Fprintf(b, "<%s%s>", tag, g.attrs(true))
		for range 1 + g.next(3) {
			g.inline(b, depth+1)
		}
		fmt.Fprintf(b, "</%s>", tag)
		g.end()
	case 2, 3:
		tag := []string{"div", "blockquote", "center"}[g.next(3)]
		fmt.Fprintf(b, "<%s%s>", tag, g.attrs(true))
		for range 1 + g.next(3) {
			g.block(b, depth+1)
		}
		fmt.Fprintf(b, "</%s>", tag)
		g.end()
	case 4:
		tag := []string{"ul", "ol"}[g.next(2)]
		fmt.Fprintf(b, "<%s%s>", tag, g.attrs(true))
		for range 1 + g.next(3) {
			fmt.Fprintf(b, "<li%s>", g.attrs(true))
			g.inline(b, depth+1)
			b.WriteString("</li>")
			g.end()
		}
		fmt.Fprintf(b, "</%s>", tag)
		g.end()
	case 5:
		fmt.Fprintf(b, "<table%s><tbody>", g.attrs(false))
		for range 1 + g.next(2) {
			fmt.Fprintf(b, "<tr%s>", g.attrs(false))
			for range 1 + g.next(3) {
				fmt.Fprintf(b, "<td%s>", g.attrs(false))
				g.block(b, depth+1)
				b.WriteString("</td>")
				g.end()
			}
			b.WriteString("</tr>")
			g.end()
		}
		b.WriteString("</tbody></table>")
		g.end()
	case 6:
		g.inline(b, depth)
		b.WriteString("<br>")
	default:
		g.inline(b, depth)
	}
}

// FuzzSelectorMatch checks the combinator matching of selector.go (each
// answer remembered, budgeted) against cascadia's own matching of the
// whole selector (which backtracks, fine on small documents): for every
// element of a small document, the two must agree on every selector that
// both accept.
func FuzzSelectorMatch(f *testing.F) {
	f.Add(".a .b", `<div class="a"><p><span class="b">x</span></p></div><span class="b">y</span>`)
	f.Add("div > p + span ~ i", `<div><p></p><span></span><b></b><i></i></div><i></i>`)
	f.Add(".a > .b .c", `<div class="a"><div class="b"><div class="b"><i class="c"></i></div></div></div>`)
	f.Add("li:nth-child(2n+1) b:not(.x)", `<ul><li><b></b></li><li><b></b></li><li><b class="x"></b><b></b></li></ul>`)
	f.Add("td[align=center] ~ td .k", `<table><tr><td align="center"></td><td><span class="k"></span></td></tr></table>`)
	f.Add("* + *", `<p><i></i><b></b></p>`)
	f.Fuzz(func(t *testing.T, sel, doc string) {
		if len(sel) > 200 || len(doc) > 2000 {
			return
		}
		ref, err := cascadia.Compile(sel)
		if err != nil {
			return
		}
		root, err := html.Parse(strings.NewReader(doc))
		if err != nil {
			return
		}
		sh := newStyleSheet([]cssRule{{selectors: sel, decls: []propDecl{{prop: propDisplay, cssDecl: cssDecl{val: "none", order: 1}}}, order: 1}}, false)
		if len(sh.sels) != 1 || strings.Contains(sel, ",") {
			return // refused (a browser would refuse it, or it has parts cascadia alone accepts) or a list
		}
		m := newMatcher(sh, root, 1<<30)
		for e := range m.elems {
			// The matcher's ancestor check needs the counts of the
			// element's ancestors.
			for i := range m.anc {
				m.anc[i] = 0
			}
			for p := m.elems[e].parent; p >= 0; p = m.elems[p].parent {
				m.enter(p)
			}
			got, done := m.match(&sh.sels[0], int32(e))
			got = got && m.ancestorsPresent(&sh.sels[0])
			if !done {
				t.Fatalf("budget spent on a small document")
			}
			if want := ref.Match(m.elems[e].n); got != want {
				var b strings.Builder
				html.Render(&b, m.elems[e].n)
				t.Fatalf("selector %q on element %d (%s) of %q: matched %v, cascadia says %v", sel, e, b.String(), doc, got, want)
			}
		}
	})
}
