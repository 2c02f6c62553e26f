package mailbox

import (
	"net/mail"
	"testing"
	"time"
)

// BenchmarkEnvelopeDate measures a cost inside go-imap (docs/benchmarks.md,
// "What it would take upstream"): imapclient's readEnvelope parses every
// envelope date with net/mail.ParseDate, which tries layouts without a day
// of the week first, so the usual "Mon, 2 Jan ..." date fails up to 24
// layouts, each allocating a time.ParseError. "dow-first" is the same
// parse trying the RFC 5322 form with the day first.
func BenchmarkEnvelopeDate(b *testing.B) {
	date := "Mon, 02 Nov 2026 09:30:00 +0100"
	want, err := mail.ParseDate(date)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		parse func(string) (time.Time, error)
	}{
		{"net-mail", mail.ParseDate},
		{"dow-first", func(s string) (time.Time, error) {
			if t, err := time.Parse("Mon, 2 Jan 2006 15:04:05 -0700", s); err == nil {
				return t, nil
			}
			return mail.ParseDate(s)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if t, err := c.parse(date); err != nil || !t.Equal(want) {
					b.Fatalf("%v %v", t, err)
				}
			}
		})
	}
}
