// Package senderauth says whether a message's sender is who the From
// address claims, from the Authentication-Results header fields (RFC 8601)
// that the operator's own receiving server added: SPF, DKIM with the
// signing domain, and DMARC, and whether a passing domain is aligned with
// the From domain (RFC 7489 relaxed alignment). Fields from any other
// authserv-id are ignored: anyone can write one. Of several trusted
// fields, each method's results come from the topmost field that has
// them. Parsing is done with
// github.com/emersion/go-msgauth/authres after RFC 5322 comments are
// taken out (it does not skip them); organizational domains come from the
// Public Suffix List (golang.org/x/net/publicsuffix). It does no I/O and
// names no tool.
package senderauth

import (
	"fmt"
	"strings"

	"github.com/emersion/go-msgauth/authres"
	"golang.org/x/net/publicsuffix"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Verdicts.
const (
	Pass    = "pass"    // DMARC passed, or an aligned DKIM or SPF pass
	Fail    = "fail"    // DMARC, DKIM or SPF failed and nothing aligned passed
	None    = "none"    // checked, but nothing verifies the From domain
	Unknown = "unknown" // no results the gateway may trust
)

// Caps: how many fields are read, and how long one may be.
const (
	maxFields     = 50
	maxFieldBytes = 8 << 10
	maxDKIM       = 10
)

// Result is what the trusted Authentication-Results say.
type Result struct {
	Verdict    string  `json:"verdict" desc:"pass (DMARC passed, or a DKIM signature or SPF check of the From domain passed), fail (a check failed and none of the From domain passed), none (checked, but nothing verifies the From domain), unknown (no results from the operator's own receiving server)"`
	Note       string  `json:"note,omitempty" desc:"what the verdict rests on, or why the sender is not verified, in a sentence"`
	AuthServID string  `json:"authserv_id,omitempty" desc:"the receiving server whose results these are (AUTHSERV_ID)"`
	FromDomain string  `json:"from_domain,omitempty" desc:"the domain of the From address"`
	Aligned    bool    `json:"aligned" desc:"true when a passing DKIM or SPF domain, or DMARC, vouches for the From domain (same organizational domain)"`
	SPF        *Check  `json:"spf,omitempty" desc:"the SPF result and the envelope sender's domain it is for"`
	DKIM       []Check `json:"dkim,omitempty" desc:"each DKIM result with its signing domain (d=)"`
	DMARC      *Check  `json:"dmarc,omitempty" desc:"the DMARC result and the From domain it is for"`
	Ignored    int     `json:"ignored,omitempty" desc:"Authentication-Results fields from other servers, ignored because anyone can write them"`
}

// Check is one method's result.
type Check struct {
	Result string `json:"result" desc:"pass, fail, softfail, neutral, none, temperror, permerror, policy"`
	Domain string `json:"domain,omitempty" desc:"the domain the result is for"`
}

// Evaluate reads fields, the values of the message's
// Authentication-Results header fields from top to bottom, trusting only
// those whose authserv-id is one of trusted (compared without case);
// from is the From address. Of several trusted fields the topmost result
// of a method wins: a receiving server adds its field above those already
// there, so a forged field bearing its name sits lower.
func Evaluate(trusted []string, fields []string, from string) *Result {
	r := &Result{Verdict: Unknown, FromDomain: domainOf(from)}
	if len(trusted) == 0 {
		r.Note = "The gateway is not told which receiving server's results to trust (AUTHSERV_ID), so the sender is not verified."
		r.Ignored = min(len(fields), maxFields)
		return r
	}
	var spf, dmarc *Check
	dkimField := -1 // the field the DKIM results come from
	found := false
	for i, f := range fields {
		if i >= maxFields {
			break
		}
		if len(f) > maxFieldBytes {
			r.Ignored++
			continue
		}
		id, results := parseField(f)
		if !trustedID(trusted, id) {
			r.Ignored++
			continue
		}
		if !found {
			r.AuthServID = mailmsg.SanitizeLine(strings.ToLower(id))
			if id == "" {
				r.AuthServID = Microsoft365
			}
		}
		found = true
		for _, res := range results {
			switch x := res.(type) {
			case *authres.SPFResult:
				if spf == nil {
					d := domainOf(x.From)
					if d == "" {
						d = domainOf(x.Helo)
					}
					spf = &Check{Result: value(x.Value), Domain: d}
				}
			case *authres.DMARCResult:
				if dmarc == nil {
					dmarc = &Check{Result: value(x.Value), Domain: domainOf(x.From)}
				}
			case *authres.DKIMResult:
				if dkimField >= 0 && dkimField != i || len(r.DKIM) >= maxDKIM {
					continue
				}
				dkimField = i
				d := domainOf(x.Domain)
				if d == "" {
					d = domainOf(x.Identifier)
				}
				r.DKIM = append(r.DKIM, Check{Result: value(x.Value), Domain: d})
			}
		}
	}
	if !found {
		r.Note = fmt.Sprintf("No Authentication-Results from %s (the operator's receiving server) are on this message, so the sender is not verified.", strings.Join(trusted, " or "))
		return r
	}
	r.SPF, r.DMARC = spf, dmarc
	r.judge()
	return r
}

// judge sets the verdict, alignment and note from the results.
func (r *Result) judge() {
	var aligned []string
	failed := false
	for _, d := range r.DKIM {
		switch {
		case d.Result == Pass && r.aligned(d.Domain):
			aligned = append(aligned, "a DKIM signature by "+d.Domain)
		case d.Result == "fail":
			failed = true
		}
	}
	if r.SPF != nil {
		switch {
		case r.SPF.Result == Pass && r.aligned(r.SPF.Domain):
			aligned = append(aligned, "SPF for "+r.SPF.Domain)
		case r.SPF.Result == "fail" || r.SPF.Result == "hardfail":
			failed = true
		}
	}
	dmarcPass := r.DMARC != nil && r.DMARC.Result == Pass && (r.DMARC.Domain == "" || r.aligned(r.DMARC.Domain))
	switch {
	case r.DMARC != nil && r.DMARC.Result == "fail":
		r.Verdict = Fail
		r.Note = fmt.Sprintf("DMARC failed: the message is not from %s as its From address claims.", r.fromText())
	case dmarcPass || len(aligned) > 0:
		r.Verdict, r.Aligned = Pass, true
		if dmarcPass {
			aligned = append([]string{"DMARC"}, aligned...)
		}
		verb := "vouches"
		if len(aligned) > 1 {
			verb = "vouch"
		}
		r.Note = fmt.Sprintf("%s %s for the From domain %s.", capitalize(joinAnd(aligned)), verb, r.fromText())
	case failed:
		r.Verdict = Fail
		r.Note = fmt.Sprintf("Authentication failed and nothing vouches for the From domain %s: treat the sender as unverified, possibly forged.", r.fromText())
	default:
		r.Verdict = None
		r.Note = r.unaligned()
	}
}

// unaligned says why a message without a failure is not verified.
func (r *Result) unaligned() string {
	var passes []string
	for _, d := range r.DKIM {
		if d.Result == Pass && d.Domain != "" {
			passes = append(passes, "signed (DKIM) by "+d.Domain)
		}
	}
	if r.SPF != nil && r.SPF.Result == Pass && r.SPF.Domain != "" {
		passes = append(passes, "sent (SPF) by a server of "+r.SPF.Domain)
	}
	if len(passes) == 0 {
		return fmt.Sprintf("Nothing verifies the From domain %s: treat the sender as unverified.", r.fromText())
	}
	return fmt.Sprintf("The message was %s, but its From address is at %s, which is not the same domain: the sender is unverified.", joinAnd(passes), r.fromText())
}

func (r *Result) fromText() string {
	if r.FromDomain == "" {
		return "(none)"
	}
	return r.FromDomain
}

// aligned reports relaxed alignment (RFC 7489 section 3.1): d and the
// From domain have the same organizational domain.
func (r *Result) aligned(d string) bool {
	return d != "" && r.FromDomain != "" && orgDomain(d) == orgDomain(r.FromDomain)
}

func orgDomain(d string) string {
	d = strings.TrimSuffix(strings.ToLower(d), ".")
	if o, err := publicsuffix.EffectiveTLDPlusOne(d); err == nil {
		return o
	}
	return d
}

// SignedCovering is the domain of a trusted, passing DKIM result whose
// DKIM-Signature among signatures (the header fields' values) signs every
// header field in names; ok is false when there is none.
func (r *Result) SignedCovering(signatures []string, names ...string) (domain string, ok bool) {
	if r == nil {
		return "", false
	}
	for _, d := range r.DKIM {
		if d.Result != Pass || d.Domain == "" {
			continue
		}
		for i, s := range signatures {
			if i >= maxFields || len(s) > maxFieldBytes {
				break
			}
			tags := tagList(s)
			if !strings.EqualFold(strings.TrimSuffix(tags["d"], "."), d.Domain) {
				continue
			}
			signed := map[string]bool{}
			for _, h := range strings.Split(tags["h"], ":") {
				signed[strings.ToLower(strings.TrimSpace(h))] = true
			}
			all := true
			for _, n := range names {
				all = all && signed[strings.ToLower(n)]
			}
			if all {
				return d.Domain, true
			}
		}
	}
	return "", false
}

// tagList reads a DKIM-Signature's tag=value list (RFC 6376 section
// 3.2); white space is not significant.
func tagList(s string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if _, dup := out[k]; dup {
			continue
		}
		out[k] = strings.Join(strings.Fields(v), "")
	}
	return out
}

// Microsoft365 in the trusted list stands for the fields Exchange Online
// writes, which lack the authserv-id RFC 8601 requires ("spf=pass …;
// dkim=pass …"): the topmost such field is Exchange Online's own.
const Microsoft365 = "microsoft-365"

// trustedID reports whether id is one of trusted: the same name (without
// case), any subdomain of a "*.domain" entry (a provider whose receiving
// hosts each write their own name), or "" for Microsoft365.
func trustedID(trusted []string, id string) bool {
	id = strings.ToLower(strings.TrimSpace(id))
	for _, t := range trusted {
		t = strings.ToLower(t)
		switch {
		case id == "":
			if t == Microsoft365 {
				return true
			}
		case strings.HasPrefix(t, "*."):
			if strings.HasSuffix(id, t[1:]) && len(id) > len(t)-1 {
				return true
			}
		case t == id:
			return true
		}
	}
	return false
}

// parseField reads one Authentication-Results value: its authserv-id
// ("" when the field starts with a result, as Exchange Online writes it)
// and its results, each parsed by authres on its own, so that one it
// cannot read (Exchange Online puts the receiving domain between results)
// does not hide the others.
func parseField(f string) (string, []authres.Result) {
	parts := strings.Split(stripComments(f), ";")
	id, rest := strings.TrimSpace(parts[0]), parts[1:]
	if strings.Contains(id, "=") {
		id, rest = "", parts
	} else if fields := strings.Fields(id); len(fields) > 0 {
		id = fields[0] // without the version ("mx.example.com 1")
	}
	var out []authres.Result
	for _, p := range rest {
		if p = strings.TrimSpace(p); p == "" || !strings.Contains(p, "=") {
			continue
		}
		if _, rs, err := authres.Parse("x; " + p); err == nil {
			out = append(out, rs...)
		}
	}
	return id, out
}

// value is a result word as a person reads it (lower case, known words).
func value(v authres.ResultValue) string {
	s := strings.ToLower(string(v))
	if len(s) > 20 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz") != "" {
		return "unknown"
	}
	return s
}

// domainOf is the domain of an address, "@domain" or a bare domain, lower
// case; "" when it does not look like one.
func domainOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	s = strings.ToLower(strings.Trim(s, "<>\" "))
	if s == "" || len(s) > 253 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789.-_") != "" {
		return ""
	}
	return s
}

// stripComments takes RFC 5322 comments, "(…)" nested and with
// backslash escapes, out of a header value, outside quoted strings: they
// would otherwise split results ("(1024-bit key; unprotected)") or pass
// for a version.
func stripComments(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	depth, quoted := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && (depth > 0 || quoted):
			if depth == 0 {
				b.WriteByte(c)
				if i+1 < len(s) {
					b.WriteByte(s[i+1])
				}
			}
			i++
		case quoted:
			b.WriteByte(c)
			if c == '"' {
				quoted = false
			}
		case c == '(':
			if depth == 0 {
				b.WriteByte(' ')
			}
			depth++
		case c == ')' && depth > 0:
			depth--
		case depth > 0:
		case c == '"':
			quoted = true
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
