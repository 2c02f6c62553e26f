package senderauth

import (
	"strings"
	"testing"
)

// Fields as the providers write them (from their published examples and
// real messages), each under its own authserv-id.
const (
	gmail = `mx.google.com;
       dkim=pass header.i=@example.com header.s=s1 header.b=AbCdEf12;
       spf=pass (google.com: domain of bounce@mail.example.com designates 192.0.2.1 as permitted sender) smtp.mailfrom=bounce@mail.example.com;
       dmarc=pass (p=REJECT sp=REJECT dis=NONE) header.from=example.com`
	microsoft = `spf=pass (sender IP is 192.0.2.1) smtp.mailfrom=example.com; dkim=pass (signature was verified) header.d=example.com;dmarc=pass action=none header.from=example.com;compauth=pass reason=100`
	opendkim  = `mail.example.test; dkim=pass (1024-bit key; unprotected) header.d=lists.example.org header.i=@lists.example.org header.b="aBc"`
	opendmarc = `mail.example.test; dmarc=none (p=none dis=none) header.from=example.net`
	spoofed   = `mail.example.test; spf=fail (mail.example.test: domain of x@example.com does not designate 198.51.100.9 as permitted sender) smtp.mailfrom=example.com; dkim=none; dmarc=fail (p=reject) header.from=example.com`
)

func TestEvaluate(t *testing.T) {
	for _, c := range []struct {
		name    string
		trusted []string
		fields  []string
		from    string
		verdict string
		aligned bool
		note    string
	}{
		{"gmail", []string{"mx.google.com"}, []string{gmail}, "news@example.com", Pass, true, "DMARC, a DKIM signature by example.com and SPF for mail.example.com vouch"},
		{"microsoft 365 lacks the authserv-id: a name cannot match it", []string{"protection.outlook.com"}, []string{microsoft}, "a@example.com", Unknown, false, "No Authentication-Results from protection.outlook.com"},
		{"microsoft 365", []string{Microsoft365}, []string{microsoft}, "a@example.com", Pass, true, "DMARC, a DKIM signature by example.com and SPF for example.com vouch"},
		{"microsoft 365 with the receiving domain between results", []string{Microsoft365}, []string{"spf=pass (sender IP is 209.85.219.172) smtp.mailfrom=example.org; alum.mit.edu; dkim=pass (signature was verified) header.d=example.org;alum.mit.edu; dmarc=pass action=none header.from=example.org;compauth=pass reason=100"}, "x@example.org", Pass, true, "DMARC"},
		{"opendkim and opendmarc, unaligned signature", []string{"mail.example.test"}, []string{opendmarc, opendkim}, "Someone <ceo@example.net>", None, false, "signed (DKIM) by lists.example.org, but its From address is at example.net"},
		{"spoofed", []string{"mail.example.test"}, []string{spoofed}, "ceo@example.com", Fail, false, "DMARC failed"},
		{"no AUTHSERV_ID", nil, []string{gmail}, "news@example.com", Unknown, false, "AUTHSERV_ID"},
		{"subdomain aligns (relaxed)", []string{"mx.example.test"}, []string{"mx.example.test; dkim=pass header.d=mail.shop.example.co.uk"}, "orders@shop.example.co.uk", Pass, true, "DKIM signature by mail.shop.example.co.uk"},
		{"same public suffix does not align", []string{"mx.example.test"}, []string{"mx.example.test; dkim=pass header.d=evil.co.uk"}, "orders@shop.co.uk", None, false, "not the same domain"},
		{"a wildcard trusts the provider's hosts", []string{"*.messagingengine.com"}, []string{"mx3.messagingengine.com; dkim=pass header.d=example.com"}, "a@example.com", Pass, true, "DKIM"},
		{"a wildcard is not the domain itself", []string{"*.messagingengine.com"}, []string{"messagingengine.com; dkim=pass header.d=example.com", "evilmessagingengine.com; dkim=pass header.d=example.com"}, "a@example.com", Unknown, false, "No Authentication-Results"},
		{"dkim fail", []string{"mx.example.test"}, []string{"mx.example.test; dkim=fail (bad signature) header.d=example.org; spf=softfail smtp.mailfrom=example.org"}, "a@example.org", Fail, false, "Authentication failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Evaluate(c.trusted, c.fields, c.from)
			if r.Verdict != c.verdict || r.Aligned != c.aligned || !strings.Contains(r.Note, c.note) {
				t.Errorf("verdict %s aligned %v note %q; want %s %v %q", r.Verdict, r.Aligned, r.Note, c.verdict, c.aligned, c.note)
			}
		})
	}
}

// A field bearing the trusted id but added by the sender sits below the
// receiving server's own: the topmost result of each method counts.
// Fields from other ids are counted as ignored and never used.
func TestForgedFields(t *testing.T) {
	forgedSameID := "mail.example.test; spf=pass smtp.mailfrom=bank.example; dmarc=pass header.from=bank.example"
	real := "mail.example.test; spf=fail smtp.mailfrom=attacker.example; dmarc=fail header.from=bank.example"
	r := Evaluate([]string{"mail.example.test"}, []string{real, forgedSameID}, "security@bank.example")
	if r.Verdict != Fail || r.SPF.Result != "fail" {
		t.Errorf("forged lower field won: %+v", r)
	}
	// DKIM results too come from the topmost field that has any.
	forgedDKIM := "mail.example.test; dkim=pass header.d=bank.example"
	r = Evaluate([]string{"mail.example.test"}, []string{"mail.example.test; dkim=fail header.d=bank.example", forgedDKIM}, "security@bank.example")
	if r.Verdict != Fail || len(r.DKIM) != 1 {
		t.Errorf("a forged lower DKIM result was used: %+v", r)
	}
	forgedOtherID := "mx.bank.example; spf=pass smtp.mailfrom=bank.example; dkim=pass header.d=bank.example; dmarc=pass header.from=bank.example"
	r = Evaluate([]string{"mail.example.test"}, []string{forgedOtherID}, "security@bank.example")
	if r.Verdict != Unknown || r.Ignored != 1 || r.SPF != nil || len(r.DKIM) != 0 {
		t.Errorf("a field from another server was used: %+v", r)
	}
}

func TestSignedCovering(t *testing.T) {
	r := Evaluate([]string{"mx.example.test"}, []string{"mx.example.test; dkim=pass header.d=news.example.org; dkim=fail header.d=other.example"}, "news@news.example.org")
	sig := "v=1; a=rsa-sha256; d=news.example.org; s=s1;\r\n\th=from:to:subject:list-unsubscribe:\r\n\t list-unsubscribe-post; bh=x; b=y"
	if d, ok := r.SignedCovering([]string{sig}, "List-Unsubscribe", "List-Unsubscribe-Post"); !ok || d != "news.example.org" {
		t.Errorf("covering signature not found: %q %v", d, ok)
	}
	if _, ok := r.SignedCovering([]string{strings.Replace(sig, ":\r\n\t list-unsubscribe-post", "", 1)}, "List-Unsubscribe", "List-Unsubscribe-Post"); ok {
		t.Error("a signature that does not sign List-Unsubscribe-Post counted")
	}
	if _, ok := r.SignedCovering([]string{strings.Replace(sig, "d=news.example.org", "d=other.example", 1)}, "List-Unsubscribe", "List-Unsubscribe-Post"); ok {
		t.Error("a signature whose DKIM result failed counted")
	}
}

func TestStripComments(t *testing.T) {
	for in, want := range map[string]string{
		`a (b (c) d) e`:                 `a   e`,
		`a "x (y)" z`:                   `a "x (y)" z`,
		`a (b \) c) d`:                  `a   d`,
		`mx.example (amavis); spf=pass`: `mx.example  ; spf=pass`,
		`(unclosed`:                     ` `,
	} {
		if got := stripComments(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func BenchmarkEvaluate(b *testing.B) {
	fields := []string{gmail, opendkim, opendmarc}
	b.ReportAllocs()
	for b.Loop() {
		Evaluate([]string{"mx.google.com"}, fields, "news@example.com")
	}
}
