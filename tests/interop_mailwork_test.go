package tests

// The interop matrix's mail work: on every server, a read of an
// invitation from a mailing list with Authentication-Results (the header
// fields and the calendar part come through each server's FETCH); where
// SMTP exists, the answer reaches the organizer's mailbox on the same
// server as an iTIP REPLY, and the list's mailto unsubscribe arrives.

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

const interopAuthServID = "interop.example.test"

// interopInvite is the matrix's invitation: from a list, signed, with the
// server's user invited and its organizer (or a stand-in) organizing.
func (m *matrix) interopInvite() []byte {
	org := m.srv.organizer
	if org == "" {
		org = "organizer@example.org"
	}
	ics := "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//interop//EN\r\nMETHOD:REQUEST\r\nBEGIN:VEVENT\r\nUID:matrix-" + m.srv.name + "@example.org\r\nSEQUENCE:1\r\n" +
		"DTSTAMP:20260101T000000Z\r\nDTSTART;TZID=Europe/Berlin:20260706T100000\r\nDTEND;TZID=Europe/Berlin:20260706T110000\r\nSUMMARY:Matrix review\r\n" +
		"RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=3\r\nORGANIZER;CN=Olga Organizer:mailto:" + org + "\r\n" +
		"ATTENDEE;CN=Interop;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:" + m.srv.user + "\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
	return []byte("Authentication-Results: " + interopAuthServID + "; dkim=pass header.d=example.org; spf=pass smtp.mailfrom=example.org; dmarc=pass header.from=example.org\r\n" +
		"Authentication-Results: forged.example; dkim=fail header.d=example.org\r\n" +
		"From: Olga Organizer <olga@example.org>\r\nTo: " + m.srv.user + "\r\nSubject: Matrix invitation\r\nDate: " + time.Now().Format(time.RFC1123Z) +
		"\r\nMessage-ID: <matrix-invite@example.org>\r\nList-Id: Matrix <matrix.example.org>\r\nList-Unsubscribe: <mailto:" + org + "?subject=unsubscribe%20matrix-" + m.srv.name + ">\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=mx\r\n\r\n--mx\r\nContent-Type: text/plain\r\n\r\nJoin the matrix review.\r\n" +
		"--mx\r\nContent-Type: text/calendar; charset=utf-8; method=REQUEST\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		strings.ReplaceAll(wrap76(base64.StdEncoding.EncodeToString([]byte(ics))), "\n", "\r\n") + "\r\n--mx--\r\n")
}

func (m *matrix) setupMailWork(t *testing.T, d *imapclient.Client) {
	m.uids["invite"] = appendUID(t, d, "INBOX", m.interopInvite(), nil, time.Time{})
}

func (m *matrix) readMailWork(t *testing.T) {
	res := m.call(t, m.me, "imap_read_email", map[string]any{"uid": m.uids["invite"]})
	inv, un, auth := obj(res["invite"]), obj(res["unsubscribe"]), obj(res["authentication"])
	if str(inv["start_utc"]) != "2026-07-06T08:00:00Z" || str(inv["recurrence"]) != "every week on Monday, 3 times" || num(inv["sequence"]) != 1 ||
		str(inv["uid"]) != "matrix-"+m.srv.name+"@example.org" {
		t.Errorf("invite: %v", inv)
	}
	// The reader's own entry, where the login is an address (on Cyrus and
	// Courier it is a bare user name, which no attendee can be).
	if you := obj(inv["you"]); strings.Contains(m.srv.user, "@") != (str(you["status"]) == "needs-action") {
		t.Errorf("you: %v (login %s)", you, m.srv.user)
	}
	if len(list(un["mailto"])) != 1 || un["one_click"] != false {
		t.Errorf("unsubscribe: %v", un)
	}
	if str(auth["verdict"]) != "pass" || num(auth["ignored"]) != 1 {
		t.Errorf("authentication: %v", auth)
	}
}

// respondInvite: the REPLY reaches the organizer's mailbox on the same
// server, threaded; the invitation is flagged \Answered.
func (m *matrix) respondInvite(t *testing.T) {
	res := m.call(t, m.me, "smtp_respond_invite", map[string]any{"uid": m.uids["invite"], "response": "tentative", "comment": "matrix"})
	got := m.arrived(t, str(res["message_id"]))
	ics, method := calendarOf(t, got.raw)
	if method != "REPLY" || !strings.Contains(ics, "PARTSTAT=TENTATIVE") || !strings.Contains(ics, "UID:matrix-"+m.srv.name+"@example.org") || !strings.Contains(ics, "SEQUENCE:1") {
		t.Errorf("the reply's calendar (%s):\n%s", method, ics)
	}
	if irt, _ := got.hdr.MsgIDList("In-Reply-To"); len(irt) != 1 || irt[0] != "matrix-invite@example.org" {
		t.Errorf("In-Reply-To %v", irt)
	}
	if f := flagsOfUID(t, m.srv.dial(t), "INBOX", m.uids["invite"]); !containsFold(f, `\answered`) {
		t.Errorf("invitation flags: %v", f)
	}
}

// unsubscribe: the list's mailto unsubscribe arrives with its subject.
func (m *matrix) unsubscribe(t *testing.T) {
	res := m.call(t, m.me, "mail_unsubscribe", map[string]any{"uid": m.uids["invite"]})
	if str(res["method"]) != "mailto" || res["done"] != true {
		t.Fatalf("result: %v", res)
	}
	got := m.arrived(t, str(obj(res["sent"])["message_id"]))
	if subj, _ := got.hdr.Subject(); subj != "unsubscribe matrix-"+m.srv.name {
		t.Errorf("subject %q", subj)
	}
}

// arrived waits for message id in the organizer's INBOX.
func (m *matrix) arrived(t *testing.T, id string) stored {
	t.Helper()
	c := m.srv.organizerDial(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
			t.Fatal(err)
		}
		d, err := c.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: id}}}, nil).Wait()
		if err != nil {
			t.Fatal(err)
		}
		if uids := d.AllUIDs(); len(uids) == 1 {
			return fetchStored(t, c, uids[0])
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message %s at %s", id, m.srv.organizer)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
