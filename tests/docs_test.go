package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every relative link of the README and docs/*.md points at a file or
// directory that exists (anchors are not checked).
func TestDocLinksResolve(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fence := regexp.MustCompile("(?ms)^```.*?^```$")
	inline := regexp.MustCompile("`[^`\n]*`")
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(b), "") // code is not links
		text = inline.ReplaceAllString(text, "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p := filepath.Join(filepath.Dir(f), target)
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s links to %s, which does not exist", filepath.Base(f), m[1])
			}
			checked++
		}
	}
	readme, _ := os.ReadFile("../README.md")
	for _, doc := range []string{"clients", "tools", "configuration", "deploy", "scaling", "architecture", "testing", "adding-a-tool"} {
		if !strings.Contains(string(readme), "(docs/"+doc+".md)") {
			t.Errorf("README does not link docs/%s.md", doc)
		}
	}
	if checked < 10 {
		t.Errorf("only %d links checked: is the link pattern broken?", checked)
	}
}
