package tests

import (
	"go/ast"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every error text quoted in a heading of the Troubleshooting section of
// docs/providers.md occurs within one string literal of the gateway's
// non-test Go source, so the page cannot go on explaining a message the
// gateway no longer prints. (A text split over a concatenation or a format
// verb must be quoted piece by piece.)
func TestProvidersDocErrorTexts(t *testing.T) {
	const doc = "docs/providers.md"
	b, err := os.ReadFile("../" + doc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	start := -1
	for i, l := range lines {
		if l == "## Troubleshooting" {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("%s has no \"## Troubleshooting\" section", doc)
	}

	literals := sourceStrings(t)
	quoted := regexp.MustCompile(`"([^"]+)"`)
	checked := 0
	for i := start + 1; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "## ") {
			break // the next section
		}
		if !strings.HasPrefix(l, "### ") {
			continue
		}
		ms := quoted.FindAllStringSubmatch(l, -1)
		if len(ms) == 0 {
			t.Errorf("%s:%d: heading %q quotes no error text: each troubleshooting entry is keyed by the gateway's own words", doc, i+1, l)
		}
		for _, m := range ms {
			checked++
			if !containsText(literals, m[1]) {
				t.Errorf("%s:%d: %q occurs in no string literal of a non-test .go file: the gateway's message changed; update the troubleshooting entry (quote a stable part)", doc, i+1, m[1])
			}
		}
	}
	if checked < 15 {
		t.Errorf("only %d error texts quoted in the troubleshooting section of %s, want at least 15: is the heading format broken?", checked, doc)
	}
}

// sourceStrings returns the values of the string literals in the non-test
// Go files of every package of the module.
func sourceStrings(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, mp := range modulePackages(t) {
		for _, f := range mp.files {
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						out = append(out, s)
					}
				}
				return true
			})
		}
	}
	return out
}

func containsText(literals []string, text string) bool {
	for _, s := range literals {
		if strings.Contains(s, text) {
			return true
		}
	}
	return false
}
