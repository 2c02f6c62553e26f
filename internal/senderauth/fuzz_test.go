package senderauth

import (
	"testing"
	"unicode/utf8"
)

// FuzzEvaluate: any header values give a verdict of the four and a
// note, never a panic; nothing but a trusted field can make it pass.
func FuzzEvaluate(f *testing.F) {
	f.Add(gmail, "news@example.com", "v=1; d=example.com; h=list-unsubscribe:list-unsubscribe-post")
	f.Add(opendkim, "a@example.net", "d=lists.example.org;h=From")
	f.Add(spoofed, "x", "")
	f.Add("mx.example.test (x; dkim=pass; ((( ; dmarc=pass header.from=", "\"@\"@", ";;;=")
	f.Fuzz(func(t *testing.T, field, from, sig string) {
		trusted := []string{"mx.google.com", "mail.example.test", "mx.example.test"}
		r := Evaluate(trusted, []string{field, field}, from)
		switch r.Verdict {
		case Pass, Fail, None, Unknown:
		default:
			t.Fatalf("verdict %q", r.Verdict)
		}
		if !utf8.ValidString(r.Note) || r.Note == "" && r.Verdict != Pass {
			t.Fatalf("note %q", r.Note)
		}
		r.SignedCovering([]string{sig}, "List-Unsubscribe")
		if other := Evaluate([]string{"nobody.invalid"}, []string{field}, from); other.Verdict == Pass {
			t.Fatalf("an untrusted field passed: %q", field)
		}
	})
}
