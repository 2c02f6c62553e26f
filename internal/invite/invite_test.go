package invite

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func crlf(s string) []byte {
	return []byte(strings.ReplaceAll(strings.TrimLeft(s, "\n"), "\n", "\r\n"))
}

// As Google Calendar writes an invitation (trimmed): UTC times, the Meet
// link in X-GOOGLE-CONFERENCE, attendees with their answers.
var googleInvite = crlf(`
BEGIN:VCALENDAR
PRODID:-//Google Inc//Google Calendar 70.9054//EN
VERSION:2.0
CALSCALE:GREGORIAN
METHOD:REQUEST
BEGIN:VEVENT
DTSTART:20260304T090000Z
DTEND:20260304T100000Z
DTSTAMP:20260301T120000Z
ORGANIZER;CN=Priya Natarajan:mailto:priya@example.com
UID:abc123@google.com
ATTENDEE;CUTYPE=INDIVIDUAL;ROLE=REQ-PARTICIPANT;PARTSTAT=ACCEPTED;RSVP=TRUE
 ;CN=Priya Natarajan;X-NUM-GUESTS=0:mailto:priya@example.com
ATTENDEE;CUTYPE=INDIVIDUAL;ROLE=REQ-PARTICIPANT;PARTSTAT=NEEDS-ACTION;RSVP=
 TRUE;CN=alice@example.org;X-NUM-GUESTS=0:mailto:alice@example.org
ATTENDEE;CUTYPE=ROOM;ROLE=NON-PARTICIPANT;PARTSTAT=ACCEPTED;CN=Room Ada:mailto:room-ada@example.com
X-GOOGLE-CONFERENCE:https://meet.google.com/abc-defg-hij
DESCRIPTION:Agenda:\n1. the new design\n2. questions\, answers
LOCATION:Room Ada
SEQUENCE:0
STATUS:CONFIRMED
SUMMARY:Design review
TRANSP:OPAQUE
END:VEVENT
END:VCALENDAR
`)

func TestParseGoogleInvite(t *testing.T) {
	inv := Parse(googleInvite)
	inv.MarkReader("Alice@Example.org")
	if inv.Problem != "" {
		t.Fatalf("problem: %s", inv.Problem)
	}
	for _, c := range []struct{ name, got, want string }{
		{"method", inv.Method, "REQUEST"}, {"status", inv.Status, "invitation"}, {"summary", inv.Summary, "Design review"},
		{"start", inv.Start, "2026-03-04T09:00:00Z"}, {"start_utc", inv.StartUTC, "2026-03-04T09:00:00Z"},
		{"end", inv.End, "2026-03-04T10:00:00Z"}, {"zone", inv.TimeZone, "UTC"}, {"location", inv.Location, "Room Ada"},
		{"conference", inv.Conference, "https://meet.google.com/abc-defg-hij"}, {"uid", inv.UID, "abc123@google.com"},
		{"organizer", inv.Organizer.Email, "priya@example.com"}, {"description", inv.Description, "Agenda:\n1. the new design\n2. questions, answers"},
		{"when", inv.When, "Wed 4 Mar 2026, 09:00–10:00 UTC"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if inv.You == nil || inv.You.Status != "needs-action" || !inv.You.RSVP || inv.You.Role != "required" {
		t.Errorf("you = %+v", inv.You)
	}
	if len(inv.Attendees) != 3 || inv.Attendees[2].Kind != "room" || inv.Attendees[0].Status != "accepted" {
		t.Errorf("attendees = %+v", inv.Attendees)
	}
}

// As Outlook writes one: a Windows zone name with its VTIMEZONE, a
// weekly recurrence, the Teams link in its own property.
var outlookInvite = crlf(`
BEGIN:VCALENDAR
METHOD:REQUEST
PRODID:Microsoft Exchange Server 2010
VERSION:2.0
BEGIN:VTIMEZONE
TZID:W. Europe Standard Time
BEGIN:STANDARD
DTSTART:16010101T030000
TZOFFSETFROM:+0200
TZOFFSETTO:+0100
RRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=-1SU;BYMONTH=10
END:STANDARD
BEGIN:DAYLIGHT
DTSTART:16010101T020000
TZOFFSETFROM:+0100
TZOFFSETTO:+0200
RRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=-1SU;BYMONTH=3
END:DAYLIGHT
END:VTIMEZONE
BEGIN:VEVENT
ORGANIZER;CN=Marco Rossi:mailto:marco@example.com
ATTENDEE;ROLE=REQ-PARTICIPANT;PARTSTAT=NEEDS-ACTION;RSVP=TRUE;CN=Alice Martin:mailto:alice@example.org
RRULE:FREQ=WEEKLY;UNTIL=20260630T070000Z;INTERVAL=2;BYDAY=MO,WE;WKST=MO
EXDATE;TZID=W. Europe Standard Time:20260413T090000
UID:040000008200E00074C5B7101A82E008
SUMMARY;LANGUAGE=en-US:Team sync
DTSTART;TZID=W. Europe Standard Time:20260406T090000
DTEND;TZID=W. Europe Standard Time:20260406T093000
LOCATION;LANGUAGE=en-US:Microsoft Teams Meeting
X-MICROSOFT-SKYPETEAMSMEETINGURL:https://teams.microsoft.com/l/meetup-join/19%3ameeting_x%40thread.v2/0
SEQUENCE:2
DTSTAMP:20260401T101010Z
END:VEVENT
END:VCALENDAR
`)

func TestParseOutlookInvite(t *testing.T) {
	inv := Parse(outlookInvite)
	if inv.Problem != "" {
		t.Fatalf("problem: %s", inv.Problem)
	}
	// 6 April 2026 is after the last Sunday of March: summer time, +02:00.
	for _, c := range []struct{ name, got, want string }{
		{"start", inv.Start, "2026-04-06T09:00:00+02:00"}, {"start_utc", inv.StartUTC, "2026-04-06T07:00:00Z"},
		{"end_utc", inv.EndUTC, "2026-04-06T07:30:00Z"}, {"zone", inv.TimeZone, "W. Europe Standard Time"},
		{"status", inv.Status, "update"},
		{"recurrence", inv.Recurrence, "every 2 weeks on Monday and Wednesday, until Tue 30 Jun 2026, except on one date"},
		{"conference", inv.Conference, "https://teams.microsoft.com/l/meetup-join/19%3ameeting_x%40thread.v2/0"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if !strings.Contains(inv.Note, "sequence 2") {
		t.Errorf("note = %q", inv.Note)
	}
	// In winter the same zone is +01:00.
	winter := bytes.ReplaceAll(outlookInvite, []byte("20260406T09"), []byte("20260112T09"))
	if got := Parse(winter).StartUTC; got != "2026-01-12T08:00:00Z" {
		t.Errorf("winter start_utc = %q", got)
	}
}

func TestParseIANAZoneAllDayAndCancel(t *testing.T) {
	ics := crlf(`
BEGIN:VCALENDAR
VERSION:2.0
PRODID:x
METHOD:REQUEST
BEGIN:VEVENT
UID:u1
DTSTAMP:20260101T000000Z
DTSTART;TZID=/mozilla.org/20050126_1/America/New_York:20260704T180000
DURATION:PT2H
SUMMARY:Fireworks
END:VEVENT
END:VCALENDAR
`)
	inv := Parse(ics)
	if inv.StartUTC != "2026-07-04T22:00:00Z" || inv.EndUTC != "2026-07-05T00:00:00Z" || inv.TimeZone != "America/New_York" {
		t.Errorf("got %s..%s in %s", inv.StartUTC, inv.EndUTC, inv.TimeZone)
	}
	allDay := crlf(`
BEGIN:VCALENDAR
VERSION:2.0
PRODID:x
METHOD:CANCEL
BEGIN:VEVENT
UID:u2
DTSTAMP:20260101T000000Z
DTSTART;VALUE=DATE:20260801
DTEND;VALUE=DATE:20260804
SUMMARY:Holiday
SEQUENCE:1
END:VEVENT
END:VCALENDAR
`)
	inv = Parse(allDay)
	if !inv.AllDay || inv.Start != "2026-08-01" || inv.End != "2026-08-03" || inv.StartUTC != "" {
		t.Errorf("all day: %+v", inv)
	}
	if inv.Status != "cancelled" || !strings.Contains(inv.Note, "cancelled") {
		t.Errorf("cancel: status %q note %q", inv.Status, inv.Note)
	}
	if inv.When != "Sat 1 Aug 2026 to Mon 3 Aug 2026 (all day)" {
		t.Errorf("when = %q", inv.When)
	}
}

// Broken and hostile calendars give a sentence, never a panic or a hang.
func TestParseHostile(t *testing.T) {
	deep := "BEGIN:VCALENDAR\r\n" + strings.Repeat("BEGIN:X\r\n", 10000) + strings.Repeat("END:X\r\n", 10000) + "END:VCALENDAR\r\n"
	longParam := "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nATTENDEE;CN=" + strings.Repeat("a", 1<<19) + ":mailto:a@b\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
	cases := []struct {
		name, ics, problem string
	}{
		{"huge", strings.Repeat("X", MaxBytes+1), "larger than"},
		{"deep", deep, "nested"},
		{"long parameter", longParam, "parameters are longer"},
		{"decoder panic: no colon after a parameter", "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nATTENDEE;CN=x\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n", "malformed"},
		{"decoder panic: text after a quoted parameter", "BEGIN:VCALENDAR\r\nX;A=\"b\"c:d\r\nEND:VCALENDAR\r\n", "malformed"},
		{"not a calendar", "hello", "could not be read"},
		{"cut short", "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\n", "ends before"},
		{"no event", "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nEND:VCALENDAR\r\n", "no event"},
		{"invalid date", "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:x\r\nDTSTART:20261399T250000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n", "not a valid date"},
		{"unknown zone", "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:x\r\nDTSTART;TZID=Mars/Olympus:20260101T100000\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n", "unknown"},
		{"local zone name", "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:x\r\nDTSTART;TZID=Local:20260101T100000\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n", "unknown"},
		{"path as zone", "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:x\r\nDTSTART;TZID=../../../etc/passwd:20260101T100000\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n", "unknown"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			inv := Parse([]byte(c.ics))
			if !strings.Contains(inv.Problem, c.problem) {
				t.Errorf("problem = %q, want it to say %q", inv.Problem, c.problem)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
}

func TestRecurrenceInWords(t *testing.T) {
	start := moment{t: time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)} // a Wednesday
	for rule, want := range map[string]string{
		"FREQ=WEEKLY":                          "every week on Wednesday",
		"FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR":     "every week on weekdays (Monday to Friday)",
		"FREQ=DAILY;COUNT=5":                   "every day, 5 times",
		"FREQ=DAILY;INTERVAL=3":                "every 3 days",
		"FREQ=MONTHLY;BYDAY=-1FR":              "every month on the last Friday",
		"FREQ=MONTHLY;BYDAY=2TU;COUNT=6":       "every month on the second Tuesday, 6 times",
		"FREQ=MONTHLY":                         "every month on day 4",
		"FREQ=MONTHLY;BYMONTHDAY=15":           "every month on day 15",
		"FREQ=YEARLY":                          "every year on 4 March",
		"FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU":    "every year on the last Sunday of October",
		"FREQ=WEEKLY;UNTIL=20260630T000000Z":   "every week on Wednesday, until Tue 30 Jun 2026",
		"FREQ=MONTHLY;BYDAY=MO,TU;BYSETPOS=-1": "repeats by the rule FREQ=MONTHLY;BYDAY=MO,TU;BYSETPOS=-1",
		"FREQ=HOURLY":                          "repeats by the rule FREQ=HOURLY",
		"nonsense":                             "repeats by the rule nonsense",
	} {
		if got := describeRule(rule, start, 0); got != want {
			t.Errorf("%s: %q, want %q", rule, got, want)
		}
	}
}

func TestReply(t *testing.T) {
	inv := Parse(outlookInvite)
	now := time.Date(2026, 4, 2, 8, 0, 0, 0, time.UTC)
	data, err := inv.Reply("alice@example.org", Tentative, "I may be ten minutes late; a long line of text that certainly needs folding at seventy-five octets, with ümlauts.", now)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(data, []byte("\r\n")) {
		if len(line) > 75 {
			t.Errorf("line longer than 75 octets: %q", line)
		}
	}
	r := Parse(data)
	if r.Problem != "" || r.Method != "REPLY" || r.UID != inv.UID || r.Sequence != 2 {
		t.Fatalf("reply: %+v", r)
	}
	if len(r.Attendees) != 1 || r.Attendees[0].Email != "alice@example.org" || r.Attendees[0].Status != "tentative" || r.Attendees[0].RSVP {
		t.Errorf("attendees = %+v", r.Attendees)
	}
	if r.StartUTC != inv.StartUTC || r.Organizer.Email != "marco@example.com" {
		t.Errorf("start %s organizer %+v", r.StartUTC, r.Organizer)
	}
	if !bytes.Contains(unfold(data), []byte("COMMENT:I may be ten minutes late\\; a long line")) {
		t.Errorf("no comment in\n%s", data)
	}
	if !bytes.Contains(data, []byte("BEGIN:VTIMEZONE")) {
		t.Errorf("the zone the times name is not carried:\n%s", data)
	}
	if got := Title(data); got != `Tentatively accept "Team sync" on Mon 6 Apr 2026, 09:00 W. Europe Standard Time from Marco Rossi <marco@example.com>` {
		t.Errorf("title = %q", got)
	}
}

func TestReplyRefusals(t *testing.T) {
	inv := Parse(googleInvite)
	for _, c := range []struct{ who, partstat, want string }{
		{"bob@example.org", Accepted, "not among the invitation's attendees"},
		{"priya@example.com", Accepted, "you organize"},
		{"alice@example.org", "MAYBE", "must be ACCEPTED"},
	} {
		if _, err := inv.Reply(c.who, c.partstat, "", time.Now()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want %q", c.who, c.partstat, err, c.want)
		}
	}
	cancel := Parse(bytes.Replace(googleInvite, []byte("METHOD:REQUEST"), []byte("METHOD:CANCEL"), 1))
	if _, err := cancel.Reply("alice@example.org", Accepted, "", time.Now()); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("cancel: %v", err)
	}
	var none *Invite
	if err := none.Answerable("a@b"); err == nil || !strings.Contains(err.Error(), "no meeting invitation") {
		t.Errorf("nil: %v", err)
	}
}

func unfold(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\r\n "), nil) }

// BenchmarkParse: reading an Outlook invitation (a VTIMEZONE, a weekly
// recurrence) and writing an answer to it.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		inv := Parse(outlookInvite)
		if _, err := inv.Reply("alice@example.org", Accepted, "", time.Unix(1e9, 0)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseHostile: the largest calendar the guard lets through,
// one long description (the work is linear in it).
func BenchmarkParseHostile(b *testing.B) {
	big := bytes.Replace(googleInvite, []byte("DESCRIPTION:Agenda"), append([]byte("DESCRIPTION:"), bytes.Repeat([]byte("x"), MaxBytes-len(googleInvite)-100)...), 1)
	b.ReportAllocs()
	b.SetBytes(int64(len(big)))
	for b.Loop() {
		if inv := Parse(big); inv.Problem != "" {
			b.Fatal(inv.Problem)
		}
	}
}
