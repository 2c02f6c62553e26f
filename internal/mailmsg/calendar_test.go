package mailmsg

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/emersion/go-message/mail"
)

// A meeting answer goes as multipart/alternative: the text, then the
// iCalendar object with its method (RFC 6047 section 2.4), 7-bit on the
// wire; read back as a draft it is the same calendar again.
func TestComposeCalendar(t *testing.T) {
	ics := "BEGIN:VCALENDAR\r\nMETHOD:REPLY\r\nBEGIN:VEVENT\r\nSUMMARY:Besprechung für Jürgen\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
	for _, html := range []string{"", "<p>Accepted</p>"} {
		raw, _, err := Compose(Draft{From: Address{Email: "a@example.org"}, To: []Address{{Email: "o@example.org"}},
			Subject: "Accepted: Besprechung", Text: "Alice has accepted.", HTML: html,
			Calendar: &Calendar{Method: "reply", Data: []byte(ics)}})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range raw {
			if b >= 0x80 {
				t.Fatal("8-bit byte on the wire")
			}
		}
		mr, err := mail.CreateReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if ct, _, _ := mr.Header.ContentType(); ct != "multipart/alternative" {
			t.Errorf("top content type %s", ct)
		}
		var types []string
		var got []byte
		var method string
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			h := p.Header.(*mail.InlineHeader)
			ct, params, _ := h.ContentType()
			types = append(types, ct)
			if ct == "text/calendar" {
				got, _ = io.ReadAll(p.Body)
				method = params["method"]
			}
		}
		want := "text/plain,text/calendar"
		if html != "" {
			want = "text/plain,text/html,text/calendar"
		}
		if strings.Join(types, ",") != want || string(got) != ics || method != "REPLY" {
			t.Errorf("parts %v method %q calendar %q", types, method, got)
		}
		d, err := ParseDraft(raw)
		if err != nil {
			t.Fatal(err)
		}
		if d.Calendar == nil || string(d.Calendar.Data) != ics || d.Calendar.Method != "REPLY" || len(d.Attachments) != 0 {
			t.Errorf("draft read back: calendar %+v, %d attachments", d.Calendar, len(d.Attachments))
		}
	}
	if _, _, err := Compose(Draft{From: Address{Email: "a@example.org"}, To: []Address{{Email: "o@example.org"}}, Text: "x",
		Calendar: &Calendar{Method: "REPLY\r\nBcc: x@y", Data: []byte(ics)}}); err == nil {
		t.Error("a method with a line break was written")
	}
}

func TestDecodeRaw(t *testing.T) {
	got, w := DecodeRaw([]byte("U1VNTUFSWTpN/GxsZXINCiBmb2xkZWQ="), "base64", "iso-8859-1")
	if got != "SUMMARY:Müller\r\n folded" || len(w) != 0 {
		t.Errorf("%q %v", got, w)
	}
}
