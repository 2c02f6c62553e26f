package mailmsg

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// FuzzParseAddressList: list parsing (the To/Cc/Bcc path of the smtp_
// tools; FuzzParseAddress in compose_test.go covers one address) never
// panics, refuses with a BadInput error naming the field, and every address
// it accepts is safe to write in a header and parses again alone.
func FuzzParseAddressList(f *testing.F) {
	f.Add("Ann Example <ann@example.com>")
	f.Add(`"Doe, John" <john@example.com>, =?utf-8?q?J=C3=BCrgen?= <j@example.de>`)
	f.Add("bob@example.com\r\nBcc: evil@example.com")
	f.Add(`"a@b"@example.com`)
	f.Add("<@route:user@example.com>")
	f.Add("user@[192.0.2.1]")
	f.Add("=?x-unknown?b?AAAA?= <x@y.z>")
	f.Fuzz(func(t *testing.T, s string) {
		list, err := ParseAddressList("cc", s)
		if err != nil {
			if mailerr.KindOf(err) != mailerr.BadInput || !strings.HasPrefix(mailerr.Message(err), "cc: ") {
				t.Fatalf("error of kind %v / %q", mailerr.KindOf(err), mailerr.Message(err))
			}
			return
		}
		for _, a := range list {
			checkParsedAddress(t, a)
			again, err := ParseAddress("to", a.Email)
			if err != nil || again.Email != a.Email {
				t.Fatalf("%q gave %q, which parses to %q (%v)", s, a.Email, again.Email, err)
			}
		}
	})
}

func checkParsedAddress(t *testing.T, a Address) {
	t.Helper()
	if CheckHeaderValue("x", a.Name) != nil || CheckHeaderValue("x", a.Email) != nil {
		t.Fatalf("accepted an address unsafe for a header: %q <%q>", a.Name, a.Email)
	}
	if !strings.Contains(a.Email, "@") {
		t.Fatalf("accepted %q without @", a.Email)
	}
	for i := 0; i < len(a.Email); i++ {
		if a.Email[i] >= utf8.RuneSelf {
			t.Fatalf("accepted a non-ASCII addr-spec %q", a.Email)
		}
	}
}

// FuzzHeaderValue: message ids and header values that pass the checks
// cannot inject a header line.
func FuzzHeaderValue(f *testing.F) {
	f.Add("<abc.123@example.com>")
	f.Add("abc@example.com>\r\nBcc: x@y")
	f.Add("Re: hello \u2028 world")
	f.Add("\x00\x7f\u0085")
	f.Fuzz(func(t *testing.T, s string) {
		if CheckHeaderValue("subject", s) == nil && strings.ContainsAny(s, "\r\n\x00") {
			t.Fatalf("CheckHeaderValue accepted %q", s)
		}
		if ValidMessageID(s) && strings.ContainsAny(strings.TrimSpace(s), "\r\n\t \x00") {
			t.Fatalf("ValidMessageID accepted %q", s)
		}
		if CheckHeaderValue("subject", s) == nil && !utf8.ValidString(s) {
			t.Fatalf("CheckHeaderValue accepted invalid UTF-8 %q", s)
		}
	})
}
