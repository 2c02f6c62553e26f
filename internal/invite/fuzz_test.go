package invite

import (
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzParse: any bytes give an Invite (a sentence for what cannot be
// read), valid UTF-8 in every field, and a Reply that never panics; what
// Reply writes parses again as a REPLY.
func FuzzParse(f *testing.F) {
	f.Add(googleInvite)
	f.Add(outlookInvite)
	f.Add([]byte("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nATTENDEE;CN=x\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"))
	f.Add([]byte("BEGIN:VCALENDAR\r\nMETHOD:REQUEST\r\nBEGIN:VEVENT\r\nUID:a\r\nDTSTART;TZID=X:20260101T100000\r\nRRULE:FREQ=MONTHLY;BYDAY=2TU\r\nORGANIZER:mailto:o@x\r\nATTENDEE:mailto:a@x\r\nEND:VEVENT\r\nBEGIN:VTIMEZONE\r\nTZID:X\r\nBEGIN:STANDARD\r\nDTSTART:16010101T000000\r\nTZOFFSETTO:+0100\r\nTZOFFSETFROM:+0200\r\nRRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\nEND:VCALENDAR\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv := Parse(data)
		inv.MarkReader("a@x")
		for _, s := range []string{inv.Summary, inv.Location, inv.Description, inv.When, inv.Note, inv.Problem, inv.Conference, inv.Recurrence, inv.UID} {
			if !utf8.ValidString(s) {
				t.Fatalf("invalid UTF-8: %q", s)
			}
		}
		if !inv.Readable() && inv.Problem == "" {
			t.Fatal("unreadable without a sentence")
		}
		out, err := inv.Reply("a@x", Accepted, "ok", time.Unix(1e9, 0))
		if err != nil {
			return
		}
		if r := Parse(out); r.Method != "REPLY" || len(r.Attendees) != 1 {
			t.Fatalf("the reply does not read back: %+v\n%s", r, out)
		}
	})
}
