package tests

// Meeting invitations end to end: invitations made by a calendar library
// nobody here wrote (npm ical-generator, with a time zone and its
// VTIMEZONE, a weekly recurrence), delivered to Alice on Dovecot, read
// through the gateway, answered with smtp_respond_invite; the iTIP REPLY
// that reaches the organizer's mailbox is parsed by an independent parser
// (npm node-ical).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message/mail"

	"github.com/mailbox-mcp/mailbox-mcp/internal/invite"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// calendarTool runs tests/clients/calendar/calendar.mjs on the Node 22 of
// tests/clients/node22 (ical-generator and node-ical need Node >= 22).
type calendarTool struct{ node, dir string }

func calendarDir(t *testing.T) calendarTool {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("clients", "calendar"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ical-generator", "package.json")); err != nil {
		skipOrFail(t, "tests/clients/calendar has no node_modules: run `npm ci` there (scripts/test.sh does)")
	}
	node, _ := filepath.Abs(filepath.Join("clients", "node22", "node_modules", ".bin", "node"))
	if _, err := os.Stat(node); err != nil {
		skipOrFail(t, "no Node 22 in tests/clients/node22 (ical-generator and node-ical need it): run `npm ci` there (scripts/test.sh does on Linux x86-64)")
	}
	return calendarTool{node: node, dir: dir}
}

// parsedCalendar is what node-ical read of a calendar.
type parsedCalendar struct {
	Method string `json:"method"`
	Events []struct {
		UID       string `json:"uid"`
		Sequence  *int   `json:"sequence"`
		Summary   string `json:"summary"`
		Start     string `json:"start"`
		Organizer string `json:"organizer"`
		Attendees []struct {
			Email, Partstat, Cn string
		} `json:"attendees"`
		Comment string `json:"comment"`
	} `json:"events"`
}

func (c calendarTool) run(t *testing.T, in map[string]any) (made []string, parsed []parsedCalendar) {
	t.Helper()
	var out struct {
		Made   []string         `json:"made"`
		Parsed []parsedCalendar `json:"parsed"`
	}
	c.exec(t, in, &out)
	return out.Made, out.Parsed
}

// imipInvite is an invitation as a calendar service mails it: text, and
// the calendar (base64) as the other alternative (RFC 6047).
func imipInvite(from, to, subject, id, ics string) []byte {
	return []byte("From: " + from + "\r\nTo: " + to + "\r\nSubject: " + subject + "\r\nDate: " + time.Now().Format(time.RFC1123Z) +
		"\r\nMessage-ID: <" + id + ">\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=\"=_alt\"\r\n\r\n" +
		"--=_alt\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nYou are invited: " + subject + "\r\n" +
		"--=_alt\r\nContent-Type: text/calendar; charset=utf-8; method=REQUEST\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		strings.ReplaceAll(wrap76(base64.StdEncoding.EncodeToString([]byte(ics))), "\n", "\r\n") + "\r\n--=_alt--\r\n")
}

// calendarOf is the text/calendar part of raw and its method parameter.
func calendarOf(t *testing.T, raw []byte) (string, string) {
	t.Helper()
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			t.Fatalf("no text/calendar part in\n%s", raw)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h, ok := p.Header.(*mail.InlineHeader); ok {
			if ct, params, _ := h.ContentType(); ct == "text/calendar" {
				b, _ := io.ReadAll(p.Body)
				return string(b), params["method"]
			}
		}
	}
}

type readInvite struct {
	Invite *invite.Invite `json:"invite"`
	Text   string         `json:"text"`
}

func TestInviteAnsweredToOrganizer(t *testing.T) {
	cal := calendarDir(t)
	s := sendStack(t) // carol organizes
	g := startGateway(t, s, smtpEnv(s)...)
	ac := mailtest.MCPClient(t, g.URL, userHeaders(s, alice), "")
	da, dc := direct(t, s, alice), direct(t, s, carol)

	// Three invitations from ical-generator, each in a zone of its own.
	cases := []struct {
		response, partstat, zone, start, end, startUTC, subject string
		weekly                                                  map[string]any
		recurrence                                              string
	}{
		{"accept", "ACCEPTED", "Europe/Berlin", "2026-04-06T09:00:00", "2026-04-06T09:30:00", "2026-04-06T07:00:00Z", "Accepted",
			map[string]any{"count": 6, "byDay": []string{"mo", "we"}}, "every week on Monday and Wednesday, 6 times"},
		{"decline", "DECLINED", "America/New_York", "2026-11-02T10:00:00", "2026-11-02T11:00:00", "2026-11-02T15:00:00Z", "Declined", nil, ""},
		{"tentative", "TENTATIVE", "Asia/Kolkata", "2026-05-05T14:30:00", "2026-05-05T15:00:00", "2026-05-05T09:00:00Z", "Tentative",
			map[string]any{"count": 3}, "every week on Tuesday, 3 times"},
	}
	var invs []map[string]any
	for i, c := range cases {
		inv := map[string]any{"uid": fmt.Sprintf("team-sync-%d-%d@example.test", i, time.Now().UnixNano()), "sequence": i,
			"start": c.start, "end": c.end, "timezone": c.zone, "summary": "Team sync " + c.response, "location": "Room Ada",
			"organizer":   map[string]any{"name": "Carol Organizer", "email": carol},
			"attendees":   []any{map[string]any{"name": "Alice Martin", "email": alice}, map[string]any{"name": "Bob", "email": mailtest.Bob}},
			"description": "Agenda: status; https://meet.google.com/abc-defg-hij"}
		if c.weekly != nil {
			inv["weekly"] = c.weekly
		}
		invs = append(invs, inv)
	}
	made, _ := cal.run(t, map[string]any{"make": invs})
	for i, c := range cases {
		t.Run(c.response, func(t *testing.T) {
			id := fmt.Sprintf("invite-%d-%d@example.test", i, time.Now().UnixNano())
			uid := appendUID(t, da, "INBOX", imipInvite("Carol Organizer <"+carol+">", alice, "Invitation: Team sync", id, made[i]), nil, time.Time{})

			var r readInvite
			mailtest.Decode(t, mailtest.Call(t, ac, "imap_read_email", map[string]any{"uid": int(uid)}), &r)
			inv := r.Invite
			if inv == nil || inv.Problem != "" {
				t.Fatalf("invite: %+v\n%s", inv, made[i])
			}
			if inv.Method != "REQUEST" || inv.StartUTC != c.startUTC || inv.TimeZone != c.zone || inv.Recurrence != c.recurrence ||
				inv.UID != invs[i]["uid"] || inv.Sequence != i || inv.Organizer.Email != carol || inv.AttendeeCount != 2 ||
				inv.You == nil || inv.You.Status != "needs-action" || inv.Conference != "https://meet.google.com/abc-defg-hij" {
				t.Fatalf("invite read wrong: %+v (you %+v)\n%s", inv, inv.You, made[i])
			}

			res := sendCall(t, ac, "smtp_respond_invite", map[string]any{"uid": int(uid), "response": c.response, "comment": "Thanks, " + c.response + "!"})
			if !res.SentCopy.Saved || res.Original == nil || !res.Original.Answered {
				t.Fatalf("result: %+v", res)
			}
			got := findByMessageID(t, dc, "INBOX", res.MessageID)
			if irt, _ := got.hdr.MsgIDList("In-Reply-To"); len(irt) != 1 || irt[0] != id {
				t.Errorf("In-Reply-To %v, want %s", irt, id)
			}
			if subj, _ := got.hdr.Subject(); subj != c.subject+": Team sync "+c.response {
				t.Errorf("subject %q", subj)
			}
			ics, method := calendarOf(t, got.raw)
			_, parsed := cal.run(t, map[string]any{"parse": []string{ics}})
			p := parsed[0]
			if method != "REPLY" || p.Method != "REPLY" || len(p.Events) != 1 {
				t.Fatalf("method %q / %q, %d events:\n%s", method, p.Method, len(p.Events), ics)
			}
			ev := p.Events[0]
			if ev.UID != invs[i]["uid"] || ev.Sequence == nil || *ev.Sequence != i || ev.Start != strings.Replace(c.startUTC, "Z", ".000Z", 1) || ev.Organizer != carol {
				t.Errorf("node-ical read uid %q sequence %v start %q organizer %q:\n%s", ev.UID, ev.Sequence, ev.Start, ev.Organizer, ics)
			}
			if len(ev.Attendees) != 1 || ev.Attendees[0].Email != alice || ev.Attendees[0].Partstat != c.partstat || ev.Comment != "Thanks, "+c.response+"!" {
				t.Errorf("node-ical read attendees %+v comment %q, want only %s %s", ev.Attendees, ev.Comment, alice, c.partstat)
			}
			// The invitation is flagged answered; the Sent copy carries the
			// same REPLY.
			if fl := flagsOfUID(t, da, "INBOX", uid); !containsFold(fl, `\answered`) {
				t.Errorf("invitation flags %v", fl)
			}
			sent := findByMessageID(t, da, "Sent", res.MessageID)
			if sics, _ := calendarOf(t, sent.raw); sics != ics {
				t.Errorf("the Sent copy's calendar differs")
			}
		})
	}
}

func containsFold(list []string, want string) bool {
	for _, s := range list {
		if strings.EqualFold(s, want) {
			return true
		}
	}
	return false
}

// What cannot be answered is refused with a sentence, and nothing leaves;
// broken or hostile calendars still give the message.
func TestInviteRefusalsAndHostileCalendars(t *testing.T) {
	s := sendStack(t)
	g := startGateway(t, s, smtpEnv(s)...)
	ac := mailtest.MCPClient(t, g.URL, userHeaders(s, alice), "")
	da := direct(t, s, alice)
	ics := func(method, attendee, extra string) string {
		return "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nMETHOD:" + method + "\r\nBEGIN:VEVENT\r\nUID:r-" + method + "@example.test\r\nDTSTAMP:20260101T000000Z\r\n" +
			"DTSTART:20260601T090000Z\r\nDTEND:20260601T100000Z\r\nSUMMARY:Review\r\nORGANIZER;CN=Carol:mailto:" + carol + "\r\nATTENDEE;PARTSTAT=NEEDS-ACTION:mailto:" + attendee + "\r\n" + extra + "END:VEVENT\r\nEND:VCALENDAR\r\n"
	}
	add := func(name, calendar string) imap.UID {
		return appendUID(t, da, "INBOX", imipInvite("Carol <"+carol+">", alice, name, name+"@example.test", calendar), nil, time.Time{})
	}
	// Hostile calendars (appended first, so that the gateway's view of
	// INBOX has them): a sentence in invite.problem, and the rest of the
	// message read as usual.
	deep := "BEGIN:VCALENDAR\r\n" + strings.Repeat("BEGIN:X\r\n", 5000) + strings.Repeat("END:X\r\n", 5000) + "END:VCALENDAR\r\n"
	hostile := []struct {
		name, ics, problem string
		uid                imap.UID
	}{
		{name: "huge", ics: ics("REQUEST", alice, "DESCRIPTION:"+strings.Repeat("x", 2<<20)+"\r\n"), problem: "larger than"},
		{name: "deeply nested", ics: deep, problem: "nested"},
		{name: "invalid dates", ics: strings.Replace(ics("REQUEST", alice, ""), "DTSTART:20260601T090000Z", "DTSTART:20261345T996100Z", 1), problem: "not a valid date"},
		{name: "unknown zone", ics: strings.Replace(ics("REQUEST", alice, ""), "DTSTART:20260601T090000Z", "DTSTART;TZID=Mars/Olympus_Mons:20260601T090000", 1), problem: "unknown"},
		{name: "decoder panic", ics: "BEGIN:VCALENDAR\r\nX;A=\"b\"c:d\r\nEND:VCALENDAR\r\n", problem: "malformed"},
	}
	for i := range hostile {
		hostile[i].uid = add("hostile-"+strings.ReplaceAll(hostile[i].name, " ", "-"), hostile[i].ics)
	}
	plain := appendUID(t, da, "INBOX", []byte("From: Carol <"+carol+">\r\nTo: "+alice+"\r\nSubject: no invite\r\nMessage-ID: <plain@example.test>\r\n\r\nLunch?\r\n"), nil, time.Time{})
	sentBefore := count(t, s, alice, "Sent")
	for _, c := range []struct {
		name string
		uid  imap.UID
		want string
	}{
		{"no invitation", plain, "holds no meeting invitation"},
		{"not an attendee", add("forwarded", ics("REQUEST", mailtest.Bob, "")), alice + " is not among the invitation's attendees"},
		{"cancelled", add("cancel", ics("CANCEL", alice, "")), "cancelled this meeting"},
		{"a reply", add("reply", ics("REPLY", alice, "")), "itself an answer"},
		{"broken", add("broken", "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nATTENDEE;CN=x\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"), "cannot be read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := mailtest.Call(t, ac, "smtp_respond_invite", map[string]any{"uid": int(c.uid), "response": "accept"})
			if !res.IsError || !strings.Contains(mailtest.Text(res), c.want) {
				t.Fatalf("got %v %q, want a sentence with %q", res.IsError, mailtest.Text(res), c.want)
			}
			if fl := flagsOfUID(t, da, "INBOX", c.uid); containsFold(fl, `\answered`) {
				t.Errorf("flagged answered: %v", fl)
			}
		})
	}
	if n := count(t, s, alice, "Sent"); n != sentBefore {
		t.Errorf("%d messages were filed in Sent by refused answers", n-sentBefore)
	}
	if n := delivered(t, s, carol, "Review", 0); n != 0 {
		t.Errorf("%d answers reached the organizer", n)
	}

}

// Idempotency and approval work as for smtp_reply_email: a repeated key
// sends once; under APPROVAL=send the person sees "Accept <summary> on
// <date> from <organizer>", nothing leaves until they approve, and the
// answer held as a draft goes out with its calendar intact.
func TestInviteIdempotentAndApproved(t *testing.T) {
	s := sendStack(t)
	da, dc := direct(t, s, alice), direct(t, s, carol)
	ics := "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nMETHOD:REQUEST\r\nBEGIN:VTIMEZONE\r\nTZID:W. Europe Standard Time\r\nBEGIN:STANDARD\r\nDTSTART:16010101T030000\r\nTZOFFSETFROM:+0200\r\nTZOFFSETTO:+0100\r\nRRULE:FREQ=YEARLY;BYDAY=-1SU;BYMONTH=10\r\nEND:STANDARD\r\nBEGIN:DAYLIGHT\r\nDTSTART:16010101T020000\r\nTZOFFSETFROM:+0100\r\nTZOFFSETTO:+0200\r\nRRULE:FREQ=YEARLY;BYDAY=-1SU;BYMONTH=3\r\nEND:DAYLIGHT\r\nEND:VTIMEZONE\r\n" +
		"BEGIN:VEVENT\r\nUID:once@example.test\r\nSEQUENCE:3\r\nDTSTAMP:20260101T000000Z\r\nDTSTART;TZID=W. Europe Standard Time:20260610T140000\r\nDTEND;TZID=W. Europe Standard Time:20260610T150000\r\nSUMMARY:Budget review\r\n" +
		"ORGANIZER;CN=Carol Organizer:mailto:" + carol + "\r\nATTENDEE;CN=Alice;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:" + alice + "\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
	uid := appendUID(t, da, "INBOX", imipInvite("Carol <"+carol+">", alice, "Invitation: Budget review", "budget@example.test", ics), nil, time.Time{})

	t.Run("idempotency_key", func(t *testing.T) {
		g := startGateway(t, s, smtpEnv(s)...)
		ac := mailtest.MCPClient(t, g.URL, userHeaders(s, alice), "")
		args := map[string]any{"uid": int(uid), "response": "decline", "idempotency_key": "budget-answer-1"}
		first := sendCall(t, ac, "smtp_respond_invite", args)
		again := sendCall(t, ac, "smtp_respond_invite", args)
		if first.Duplicate || !again.Duplicate || again.MessageID != first.MessageID {
			t.Fatalf("first %+v\nagain %+v", first, again)
		}
		findByMessageID(t, dc, "INBOX", first.MessageID) // exactly one: it fails on two
	})
	t.Run("approval", func(t *testing.T) {
		g := startGateway(t, s, smtpEnv(s, "APPROVAL=send")...)
		ac := mailtest.MCPClient(t, g.URL, userHeaders(s, alice), "")
		res := mailtest.Call(t, ac, "smtp_respond_invite", map[string]any{"uid": int(uid), "response": "accept", "comment": "Approved answer"})
		var pending struct {
			Approval struct {
				URL          string `json:"url"`
				DraftsFolder string `json:"drafts_folder"`
				DraftUID     uint32 `json:"draft_uid"`
			} `json:"approval"`
		}
		mailtest.Decode(t, res, &pending)
		if pending.Approval.URL == "" {
			t.Fatalf("no approval link: %s", mailtest.Text(res))
		}
		held := fetchIn(t, da, pending.Approval.DraftsFolder, imap.UID(pending.Approval.DraftUID))
		if _, method := calendarOf(t, held.raw); method != "REPLY" {
			t.Fatalf("the held draft lost its calendar")
		}
		// The person signs in on the page (the model, holding only the
		// link, would see a sign-in form).
		p := signInAs(t, pending.Approval.URL, alice, s.Users[alice])
		want := `Accept "Budget review" on Wed 10 Jun 2026, 14:00 W. Europe Standard Time from Carol Organizer <` + carol + `>?`
		if !strings.Contains(p.page, want) {
			t.Fatalf("the page does not say %q:\n%s", want, p.page)
		}
		if n := delivered(t, s, carol, "Budget review", 1); n != 1 { // the declined answer above
			t.Fatalf("%d answers before approving, want the 1 declined earlier", n)
		}
		if status, body := p.answer(t, "approve"); status != 200 {
			t.Fatalf("approve: %d %s", status, body)
		}
		if n := delivered(t, s, carol, "Accepted: Budget review", 1); n != 1 {
			t.Fatalf("%d accepted answers delivered, want 1", n)
		}
		uids := searchUIDs(t, dc, "INBOX", &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "Accepted: Budget review"}}})
		got := fetchIn(t, dc, "INBOX", uids[0])
		if ics, method := calendarOf(t, got.raw); method != "REPLY" || !strings.Contains(ics, "PARTSTAT=ACCEPTED") || !strings.Contains(ics, "COMMENT:Approved answer") {
			t.Errorf("the approved answer's calendar:\n%s", ics)
		}
	})
}

// fetchIn is fetchStored of uid in folder.
func fetchIn(t *testing.T, d *imapclient.Client, folder string, uid imap.UID) stored {
	t.Helper()
	if _, err := d.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatalf("EXAMINE %s: %v", folder, err)
	}
	return fetchStored(t, d, uid)
}

// run runs calendar.mjs with in on stdin and decodes what it prints.
func (c calendarTool) exec(t *testing.T, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.node, "calendar.mjs")
	cmd.Dir, cmd.Stdin = c.dir, bytes.NewReader(b)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "NO_UPDATE_NOTIFIER=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node calendar.mjs: %v\n%s", err, tail(stderr.String(), 4000))
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("calendar.mjs printed no JSON (%v): %s\n%s", err, tail(stdout.String(), 2000), tail(stderr.String(), 2000))
	}
}
