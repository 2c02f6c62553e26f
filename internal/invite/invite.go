// Package invite reads meeting invitations and writes the answers to them:
// iCalendar (RFC 5545) carried in mail as iTIP (RFC 5546) over iMIP
// (RFC 6047). Parse turns the bytes of a text/calendar part into the facts
// a reader needs (method, what, when in its zone and in UTC, where, who,
// how it repeats, the conferencing link); Reply writes an attendee's
// answer (METHOD:REPLY). Calendars come from strangers: Parse never fails
// a read, bounds what it hands to the decoder (github.com/emersion/go-ical)
// and recovers its panics, and every text it returns is sanitised
// (mailmsg) but still written by the sender. It does no I/O and names no
// tool.
package invite

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-ical"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Caps on what an Invite carries.
const (
	maxLine        = 500  // summary, location, names
	maxDescription = 2000 // characters of the description
	maxAttendees   = 100
	maxURL         = 2000
)

// Invite is a calendar part read for a person.
type Invite struct {
	Method string `json:"method" desc:"the iTIP method: REQUEST (an invitation, or an update of one), CANCEL, REPLY (an attendee's answer), COUNTER (an attendee proposes another time), PUBLISH (shared for information), ADD, REFRESH or DECLINECOUNTER; empty when the calendar names none"`
	Status string `json:"status" desc:"invitation, update (a later version of an invitation: it replaces those with a lower sequence), cancelled, reply, counter, published, or unreadable"`
	Note   string `json:"note,omitempty" desc:"what the status means here, in a sentence: what was cancelled, what changed, who answered what"`

	Summary  string `json:"summary,omitempty" desc:"the meeting's title"`
	When     string `json:"when,omitempty" desc:"start and end in words, in the meeting's time zone and in UTC"`
	Start    string `json:"start,omitempty" desc:"start in the meeting's time zone (RFC 3339 with its offset), or its first day (YYYY-MM-DD) when all_day; without offset when the time is floating (the reader's local time) or its zone is unknown"`
	End      string `json:"end,omitempty" desc:"end, as start; for an all-day meeting its last day (inclusive)"`
	StartUTC string `json:"start_utc,omitempty" desc:"start in UTC (RFC 3339), when its zone is known"`
	EndUTC   string `json:"end_utc,omitempty" desc:"end in UTC, when its zone is known"`
	TimeZone string `json:"time_zone,omitempty" desc:"the zone the times are written in: an IANA name, UTC, or the invitation's own name for it (its definition, VTIMEZONE, was used); empty for floating times"`
	AllDay   bool   `json:"all_day,omitempty" desc:"true for a meeting of whole days"`

	Location    string `json:"location,omitempty" desc:"where, as the organizer wrote it"`
	Description string `json:"description,omitempty" desc:"the organizer's description (at most 2000 characters)"`
	Conference  string `json:"conference,omitempty" desc:"the link to join the call (Meet, Teams, Zoom, Webex...), from the calendar's conference properties or its location or description: written by the sender like the body; check where it leads before opening it"`

	Organizer     *Person    `json:"organizer,omitempty" desc:"who organizes it, and where answers go"`
	Attendees     []Attendee `json:"attendees,omitempty" desc:"the invited people and rooms with their answers (at most 100)"`
	AttendeeCount int        `json:"attendee_count,omitempty" desc:"how many attendees the invitation lists"`
	You           *Attendee  `json:"you,omitempty" desc:"the reader's own entry among the attendees, when the reader is one"`

	Recurrence     string `json:"recurrence,omitempty" desc:"how it repeats, in words"`
	RecurrenceRule string `json:"recurrence_rule,omitempty" desc:"the RRULE as written"`
	Occurrence     string `json:"occurrence,omitempty" desc:"set when the message is about one occurrence of a repeating meeting: that occurrence's original start (RECURRENCE-ID)"`

	UID      string `json:"uid,omitempty" desc:"the meeting's UID: every message about one meeting carries the same"`
	Sequence int    `json:"sequence" desc:"the revision: the organizer raises it with every change that matters"`

	Problem string `json:"problem,omitempty" desc:"what could not be read, in a sentence; the rest of the message is read as usual"`

	cal   *ical.Calendar
	event *ical.Event
	zones map[zoneKey]*time.Location // zoneOf's answers for this calendar
}

// Person is an organizer or attendee.
type Person struct {
	Name  string `json:"name,omitempty" desc:"display name (CN)"`
	Email string `json:"email,omitempty" desc:"address (from its mailto: URI)"`
}

// Attendee is one entry of the attendee list.
type Attendee struct {
	Person
	Status string `json:"status" desc:"needs-action, accepted, declined, tentative, delegated (or what the invitation says)"`
	Role   string `json:"role,omitempty" desc:"required, optional, chair or non-participant"`
	Kind   string `json:"kind,omitempty" desc:"room, resource or group when not a person"`
	RSVP   bool   `json:"rsvp,omitempty" desc:"the organizer asks for an answer"`
}

// Parse reads data, the content of a text/calendar part (transfer
// encoding undone, UTF-8). It never fails: what cannot be read is said in
// Problem.
func Parse(data []byte) *Invite {
	inv := &Invite{}
	cal, err := decode(data)
	if err != nil {
		inv.Status = "unreadable"
		inv.Problem = "The invitation's calendar data could not be read: " + reason(err) + "."
		return inv
	}
	inv.cal = cal
	inv.Method = method(cal)
	events := cal.Events()
	if len(events) == 0 {
		inv.Status = "unreadable"
		inv.Problem = "The calendar part holds no event (VEVENT)."
		return inv
	}
	ev := &events[0]
	for i := range events {
		if events[i].Props.Get(ical.PropRecurrenceID) == nil {
			ev = &events[i]
			break
		}
	}
	inv.event = ev
	var problems []string
	inv.read(ev, &problems)
	inv.status(ev)
	if len(problems) > 0 {
		inv.Problem = strings.Join(problems, " ")
	}
	return inv
}

// decode hands data to go-ical within the guard's bounds, turning a
// panic of the decoder into an error.
func decode(data []byte) (cal *ical.Calendar, err error) {
	if !utf8.Valid(data) {
		data = bytes.ToValidUTF8(data, []byte("\uFFFD"))
	}
	if err := guard(data); err != nil {
		return nil, err
	}
	defer func() {
		if recover() != nil {
			cal, err = nil, errors.New("a line is malformed")
		}
	}()
	return ical.NewDecoder(bytes.NewReader(data)).Decode()
}

// reason is an error of decode for a person: the guard's own words, or
// the decoder's, sanitised and short (they may quote the sender).
func reason(err error) string {
	msg := strings.TrimPrefix(err.Error(), "ical: ")
	if errors.Is(err, errRefused) {
		msg = strings.TrimPrefix(msg, errRefused.Error()+": ")
	}
	if msg == "EOF" || msg == "unexpected EOF" {
		msg = "it ends before the calendar does"
	}
	msg = mailmsg.SanitizeLine(msg)
	if utf8.RuneCountInString(msg) > 120 {
		msg, _, _ = mailmsg.Truncate(msg, 0, 119)
		msg += "…"
	}
	return msg
}

func method(cal *ical.Calendar) string {
	m := strings.ToUpper(strings.TrimSpace(text(cal.Props.Get(ical.PropMethod))))
	if len(m) > 20 || strings.Trim(m, "ABCDEFGHIJKLMNOPQRSTUVWXYZ-") != "" {
		return ""
	}
	return m
}

// read fills in the event's facts, adding what cannot be read to problems.
func (inv *Invite) read(ev *ical.Event, problems *[]string) {
	p := ev.Props
	inv.Summary = oneLine(text(p.Get(ical.PropSummary)), maxLine)
	inv.Location = oneLine(text(p.Get(ical.PropLocation)), maxLine)
	if d := mailmsg.Sanitize(text(p.Get(ical.PropDescription))); strings.TrimSpace(d) != "" {
		inv.Description = capText(strings.TrimSpace(d), maxDescription)
	}
	inv.UID = oneLine(propValue(ev.Component, ical.PropUID), maxLine)
	if s := propValue(ev.Component, ical.PropSequence); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < 1e9 {
			inv.Sequence = n
		} else {
			*problems = append(*problems, "Its sequence number is not a number.")
		}
	}
	inv.Organizer = person(p.Get(ical.PropOrganizer))
	for _, a := range p.Values(ical.PropAttendee) {
		inv.AttendeeCount++
		if len(inv.Attendees) < maxAttendees {
			inv.Attendees = append(inv.Attendees, attendee(&a))
		}
	}
	inv.when(ev, problems)
	if r := p.Get(ical.PropRecurrenceRule); r != nil {
		inv.RecurrenceRule = oneLine(r.Value, maxLine)
		inv.Recurrence = describeRule(r.Value, inv.startMoment(ev), len(p.Values(ical.PropExceptionDates)))
	}
	if rid := p.Get(ical.PropRecurrenceID); rid != nil {
		if m, err := inv.moment(rid); err == nil {
			inv.Occurrence = m.local()
		} else {
			inv.Occurrence = oneLine(rid.Value, 40)
		}
	}
	inv.Conference = conference(ev)
}

// status sets Status and Note from the method, the sequence and the
// event's own STATUS.
func (inv *Invite) status(ev *ical.Event) {
	what := "this meeting"
	if inv.Occurrence != "" {
		what = "the occurrence of " + inv.Occurrence + " of this repeating meeting"
	}
	cancelled := strings.EqualFold(text(ev.Props.Get(ical.PropStatus)), "CANCELLED")
	switch {
	case inv.Method == "CANCEL" || cancelled && inv.Method == "REQUEST":
		inv.Status = "cancelled"
		inv.Note = "The organizer cancelled " + what + "."
	case inv.Method == "REQUEST" && inv.Sequence > 0:
		inv.Status = "update"
		inv.Note = fmt.Sprintf("This updates an earlier invitation to %s (sequence %d): it replaces every version with a lower sequence.", what, inv.Sequence)
	case inv.Method == "REQUEST" || inv.Method == "ADD":
		inv.Status = "invitation"
		if inv.Occurrence != "" {
			inv.Note = "This invitation is about " + what + "."
		}
	case inv.Method == "REPLY":
		inv.Status = "reply"
		var parts []string
		for _, a := range inv.Attendees {
			parts = append(parts, fmt.Sprintf("%s: %s", who(a.Person), a.Status))
		}
		inv.Note = "An answer to an invitation you sent (" + strings.Join(parts, "; ") + ")."
	case inv.Method == "COUNTER":
		inv.Status = "counter"
		inv.Note = "An attendee proposes another time for " + what + ": " + inv.When + "."
	case inv.Method == "PUBLISH":
		inv.Status = "published"
		inv.Note = "A calendar entry shared for information: there is nothing to answer."
	default:
		inv.Status = strings.ToLower(inv.Method)
	}
}

// MarkReader sets You to the attendee whose address is one of addrs
// (compared without case).
func (inv *Invite) MarkReader(addrs ...string) {
	inv.You = nil
	for _, a := range inv.Attendees {
		for _, self := range addrs {
			if a.Email != "" && strings.EqualFold(a.Email, strings.TrimSpace(self)) {
				you := a
				inv.You = &you
				return
			}
		}
	}
}

// Readable reports whether the calendar was read (an event was found).
func (inv *Invite) Readable() bool { return inv != nil && inv.event != nil }

func who(p Person) string {
	if p.Name != "" && p.Email != "" {
		return p.Name + " <" + p.Email + ">"
	}
	if p.Name != "" {
		return p.Name
	}
	return p.Email
}

// text is a property's TEXT value unescaped (the raw value when it does
// not unescape).
func text(p *ical.Prop) string {
	if p == nil {
		return ""
	}
	if t, err := p.Text(); err == nil {
		return t
	}
	return p.Value
}

func oneLine(s string, n int) string {
	return capText(mailmsg.SanitizeLine(strings.TrimSpace(s)), n)
}

func capText(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	s, _, _ = mailmsg.Truncate(s, 0, n-1)
	return s + "…"
}

// person reads an ORGANIZER or ATTENDEE property.
func person(p *ical.Prop) *Person {
	if p == nil {
		return nil
	}
	out := &Person{Name: oneLine(p.Params.Get(ical.ParamCommonName), maxLine), Email: mailto(p.Value)}
	if out.Email == "" {
		out.Email = mailto("mailto:" + p.Params.Get(ical.ParamEmail))
	}
	if out.Name == "" && out.Email == "" {
		return nil
	}
	return out
}

// mailto is the address of a mailto: calendar address, "" for anything
// else.
func mailto(v string) string {
	v = strings.TrimSpace(v)
	if len(v) < 7 || !strings.EqualFold(v[:7], "mailto:") {
		return ""
	}
	a := strings.TrimSpace(v[7:])
	if i := strings.IndexByte(a, '?'); i >= 0 {
		a = a[:i]
	}
	if len(a) > 254 || !strings.Contains(a, "@") || strings.ContainsAny(a, " \t<>\"") {
		return ""
	}
	return mailmsg.SanitizeLine(a)
}

var partstats = map[string]string{"NEEDS-ACTION": "needs-action", "ACCEPTED": "accepted", "DECLINED": "declined", "TENTATIVE": "tentative", "DELEGATED": "delegated", "COMPLETED": "completed", "IN-PROCESS": "in-process"}
var roles = map[string]string{"REQ-PARTICIPANT": "required", "OPT-PARTICIPANT": "optional", "CHAIR": "chair", "NON-PARTICIPANT": "non-participant"}
var kinds = map[string]string{"ROOM": "room", "RESOURCE": "resource", "GROUP": "group"}

func attendee(p *ical.Prop) Attendee {
	a := Attendee{Status: "needs-action"}
	if pp := person(p); pp != nil {
		a.Person = *pp
	}
	if s := strings.ToUpper(p.Params.Get(ical.ParamParticipationStatus)); s != "" {
		if v, ok := partstats[s]; ok {
			a.Status = v
		} else {
			a.Status = oneLine(strings.ToLower(s), 40)
		}
	}
	if r := strings.ToUpper(p.Params.Get(ical.ParamRole)); r != "" {
		if v, ok := roles[r]; ok {
			a.Role = v
		}
	}
	a.Kind = kinds[strings.ToUpper(p.Params.Get(ical.ParamCalendarUserType))]
	a.RSVP = strings.EqualFold(p.Params.Get(ical.ParamRSVP), "TRUE")
	return a
}

// Conferencing links: the properties calendar apps put them in, in order
// of trust, then a link to a known meeting service in the location or the
// description.
var conferenceProps = []string{ical.PropConference, "X-GOOGLE-CONFERENCE", "X-MICROSOFT-SKYPETEAMSMEETINGURL", "X-MICROSOFT-ONLINEMEETINGEXTERNALLINK"}

var urlPattern = regexp.MustCompile(`https://[^\s<>"'()\[\]{}\\^` + "`" + `|]+`)

var meetingHosts = []string{"meet.google.com", "zoom.us", "zoom.com", "teams.microsoft.com", "teams.live.com", "webex.com", "whereby.com", "meet.jit.si", "gotomeeting.com", "bluejeans.com", "chime.aws", "meet.lync.com", "skype.com", "zoomgov.com", "around.co", "meet.goto.com"}

func conference(ev *ical.Event) string {
	for _, name := range conferenceProps {
		for _, p := range ev.Props.Values(name) {
			if u := httpsURL(p.Value); u != "" {
				return u
			}
		}
	}
	for _, name := range []string{ical.PropLocation, ical.PropURL, ical.PropDescription} {
		for _, m := range urlPattern.FindAllString(text(ev.Props.Get(name)), 50) {
			if u := httpsURL(m); u != "" && meetingLink(u) {
				return u
			}
		}
	}
	return ""
}

// httpsURL is v when it is one https URL (trailing punctuation removed).
func httpsURL(v string) string {
	v = strings.TrimRight(strings.TrimSpace(v), ".,;:!?")
	if len(v) > maxURL || !strings.HasPrefix(strings.ToLower(v), "https://") || urlPattern.FindString(v) != v {
		return ""
	}
	return mailmsg.SanitizeLine(v)
}

func meetingLink(u string) bool {
	host := strings.ToLower(u[len("https://"):])
	if i := strings.IndexAny(host, "/?#"); i >= 0 {
		host = host[:i]
	}
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		return false // credentials in a link: not a meeting service's
	}
	host, _, _ = strings.Cut(host, ":")
	for _, h := range meetingHosts {
		if host == h || strings.HasSuffix(host, "."+h) {
			return true
		}
	}
	return false
}

// Unreadable is an Invite whose calendar was not read, for the reason
// given (a sentence).
func Unreadable(problem string) *Invite {
	return &Invite{Status: "unreadable", Problem: problem}
}
