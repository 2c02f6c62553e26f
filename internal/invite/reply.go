package invite

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-ical"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Answers an attendee can give (RFC 5546 section 3.2.3, PARTSTAT).
const (
	Accepted  = "ACCEPTED"
	Declined  = "DECLINED"
	Tentative = "TENTATIVE"
)

// MaxComment is the longest comment a reply carries, in characters.
const MaxComment = 2000

// prodID names the gateway as the reply's producer.
const prodID = "-//mailbox-mcp//iTIP reply//EN"

// Answerable says why attendee cannot answer inv, or nil when they can:
// a readable invitation (REQUEST or ADD, not cancelled) with an organizer
// address, listing attendee, who does not organize it.
func (inv *Invite) Answerable(attendee string) error {
	switch {
	case inv == nil:
		return mailerr.New(mailerr.BadInput, "the message holds no meeting invitation (no text/calendar part)")
	case !inv.Readable():
		return mailerr.New(mailerr.BadInput, "the message's invitation cannot be read, so it cannot be answered: "+inv.Problem)
	case inv.Status == "cancelled":
		return mailerr.New(mailerr.BadInput, "the organizer cancelled this meeting: there is nothing to answer")
	case inv.Method != "REQUEST" && inv.Method != "ADD":
		what := map[string]string{"REPLY": "it is itself an answer to an invitation", "COUNTER": "it is an attendee's proposal of another time", "PUBLISH": "it is a calendar entry shared for information, not an invitation"}[inv.Method]
		if what == "" {
			what = "its method is " + strconv.Quote(inv.Method) + ", not REQUEST"
		}
		return mailerr.New(mailerr.BadInput, "the message cannot be answered as an invitation: "+what)
	case inv.UID == "":
		return mailerr.New(mailerr.BadInput, "the invitation has no UID, so an answer could not name the meeting")
	case inv.Organizer == nil || inv.Organizer.Email == "":
		return mailerr.New(mailerr.BadInput, "the invitation names no organizer address to send the answer to")
	case strings.EqualFold(inv.Organizer.Email, attendee):
		return mailerr.New(mailerr.BadInput, "you organize this meeting: there is no invitation of yours to answer")
	}
	if inv.attendeeProp(attendee) == nil {
		return mailerr.Newf(mailerr.BadInput, "%s is not among the invitation's attendees, so it has no answer to give (the invitation may have been forwarded to you; ask the organizer to invite you)", attendee)
	}
	return nil
}

// attendeeProp is attendee's ATTENDEE property in the event, nil if none.
func (inv *Invite) attendeeProp(attendee string) *ical.Prop {
	if !inv.Readable() || attendee == "" {
		return nil
	}
	for _, a := range inv.event.Props.Values(ical.PropAttendee) {
		if strings.EqualFold(mailto(a.Value), attendee) {
			return &a
		}
	}
	return nil
}

// Reply writes attendee's answer to inv (RFC 5546 section 3.2.3): a
// calendar with METHOD:REPLY and one VEVENT with the invitation's UID,
// SEQUENCE and RECURRENCE-ID, its start, end, summary and organizer (so
// that the organizer's calendar and a person reading it know which
// meeting), and only attendee's ATTENDEE, with partstat and, when given,
// comment. The time zones the copied times name are copied too. Lines are
// folded at 75 octets.
func (inv *Invite) Reply(attendee, partstat, comment string, now time.Time) ([]byte, error) {
	if err := inv.Answerable(attendee); err != nil {
		return nil, err
	}
	switch partstat {
	case Accepted, Declined, Tentative:
	default:
		return nil, mailerr.Newf(mailerr.BadInput, "the answer must be ACCEPTED, DECLINED or TENTATIVE, not %q", partstat)
	}
	if utf8.RuneCountInString(comment) > MaxComment {
		return nil, mailerr.Newf(mailerr.BadInput, "comment must be at most %d characters", MaxComment)
	}
	src := inv.event.Props
	ev := ical.NewEvent()
	ev.Props.Set(&ical.Prop{Name: ical.PropSequence, Params: ical.Params{}, Value: strconv.Itoa(inv.Sequence)})
	ev.Props.SetDateTime(ical.PropDateTimeStamp, now.UTC())
	tzids := map[string]bool{}
	for _, name := range []string{ical.PropRecurrenceID, ical.PropDateTimeStart, ical.PropDateTimeEnd, ical.PropDuration, ical.PropSummary, ical.PropOrganizer} {
		if p := src.Get(name); p != nil {
			cp := copyProp(p)
			ev.Props.Set(&cp)
			if tz := p.Params.Get(ical.ParamTimezoneID); tz != "" {
				tzids[tz] = true
			}
		}
	}
	// The UID is copied as written (SetText would escape a comma).
	if p := src.Get(ical.PropUID); p != nil {
		ev.Props.Set(&ical.Prop{Name: ical.PropUID, Params: ical.Params{}, Value: p.Value})
	}
	att := copyProp(inv.attendeeProp(attendee))
	att.Params.Set(ical.ParamParticipationStatus, partstat)
	att.Params.Del(ical.ParamRSVP)
	ev.Props.Set(&att)
	if c := strings.TrimSpace(comment); c != "" {
		ev.Props.SetText(ical.PropComment, strings.ReplaceAll(c, "\r\n", "\n"))
	}
	cal := ical.NewCalendar()
	cal.Props.SetText(ical.PropProductID, prodID)
	cal.Props.SetText(ical.PropVersion, "2.0")
	cal.Props.SetText(ical.PropMethod, "REPLY")
	for _, c := range inv.cal.Children {
		if c.Name == ical.CompTimezone && tzids[propValue(c, ical.PropTimezoneID)] {
			cal.Children = append(cal.Children, c)
		}
	}
	cal.Children = append(cal.Children, ev.Component)
	var buf bytes.Buffer
	if err := ical.NewEncoder(&buf).Encode(cal); err != nil {
		// A time zone the invitation defines in a way go-ical will not
		// write: the answer goes without it, its times in UTC.
		cal.Children = []*ical.Component{ev.Component}
		if uerr := inv.utcTimes(ev); uerr != nil {
			return nil, mailerr.Wrap(mailerr.BadInput, err, "the answer could not be written from this invitation")
		}
		buf.Reset()
		if err := ical.NewEncoder(&buf).Encode(cal); err != nil {
			return nil, mailerr.Wrap(mailerr.BadInput, err, "the answer could not be written from this invitation")
		}
	}
	return fold(buf.Bytes()), nil
}

// utcTimes rewrites ev's DTSTART, DTEND and RECURRENCE-ID that name a
// time zone in UTC.
func (inv *Invite) utcTimes(ev *ical.Event) error {
	for _, name := range []string{ical.PropRecurrenceID, ical.PropDateTimeStart, ical.PropDateTimeEnd} {
		p := ev.Props.Get(name)
		if p == nil || p.Params.Get(ical.ParamTimezoneID) == "" {
			continue
		}
		m, err := inv.moment(p)
		if err != nil || m.unknown {
			return fmt.Errorf("%s has no known zone", name)
		}
		ev.Props.SetDateTime(name, m.t.UTC())
	}
	return nil
}

func copyProp(p *ical.Prop) ical.Prop {
	cp := ical.Prop{Name: p.Name, Value: p.Value, Params: ical.Params{}}
	for k, v := range p.Params {
		cp.Params[k] = append([]string(nil), v...)
	}
	return cp
}

// fold folds the lines of an encoded calendar at 75 octets, between
// characters (RFC 5545 section 3.1).
func fold(b []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\r\n")) {
		body := bytes.TrimSuffix(line, []byte("\r\n"))
		first := true
		for len(body) > 0 {
			limit := 75
			if !first {
				limit = 74 // the leading space counts
				out.WriteString("\r\n ")
			}
			n := min(limit, len(body))
			for n < len(body) && n > 0 && !utf8.RuneStart(body[n]) {
				n--
			}
			out.Write(body[:n])
			body = body[n:]
			first = false
		}
		if bytes.HasSuffix(line, []byte("\r\n")) {
			out.WriteString("\r\n")
		}
	}
	return out.Bytes()
}

// Title is what a person approves before the answer in data (a REPLY
// that Reply wrote) goes out: "Accept Design review on Wed 4 Mar 2026,
// 09:00 Europe/Berlin from Priya Natarajan"; "" when data is not one.
func Title(data []byte) string {
	r := Parse(data)
	if !r.Readable() || r.Method != "REPLY" || len(r.Attendees) != 1 {
		return ""
	}
	verb := map[string]string{"accepted": "Accept", "declined": "Decline", "tentative": "Tentatively accept"}[r.Attendees[0].Status]
	if verb == "" {
		return ""
	}
	t := verb + " " + strconv.Quote(r.Summary)
	if r.Summary == "" {
		t = verb + " the meeting"
	}
	if sp := r.event.Props.Get(ical.PropDateTimeStart); sp != nil {
		if m, err := r.moment(sp); err == nil {
			t += " on " + startText(m)
		}
	}
	if r.Organizer != nil {
		t += " from " + who(*r.Organizer)
	}
	return t
}

// ReplyText is the plain text beside a reply: who answered what, and the
// comment.
func (inv *Invite) ReplyText(name, partstat, comment string) string {
	verb := map[string]string{Accepted: "accepted", Declined: "declined", Tentative: "tentatively accepted"}[partstat]
	what := strconv.Quote(inv.Summary)
	if inv.Summary == "" {
		what = "the meeting"
	}
	s := fmt.Sprintf("%s has %s the invitation to %s", name, verb, what)
	if inv.When != "" {
		s += " (" + inv.When + ")"
	}
	s += "."
	if c := strings.TrimSpace(comment); c != "" {
		s += "\n\n" + c
	}
	return s + "\n"
}

// SubjectPrefix is the word a reply's subject starts with, as calendar
// apps write it ("Accepted: Design review").
func SubjectPrefix(partstat string) string {
	return map[string]string{Accepted: "Accepted", Declined: "Declined", Tentative: "Tentative"}[partstat]
}

func startText(m moment) string {
	switch {
	case m.date:
		return m.t.Format("Mon 2 Jan 2006")
	case m.floating:
		return m.t.Format("Mon 2 Jan 2006, 15:04")
	}
	return m.t.Format("Mon 2 Jan 2006, 15:04") + " " + m.zone
}
