package invite

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/emersion/go-ical"
)

// moment is one DTSTART, DTEND or RECURRENCE-ID read.
type moment struct {
	t        time.Time
	date     bool   // a DATE: a whole day
	floating bool   // no zone: the reader's local time
	unknown  bool   // a TZID nothing defines: shown as written
	zone     string // UTC, an IANA name, or the calendar's own TZID
}

var errBadTime = errors.New("not a valid date or time")

// moment reads a DATE or DATE-TIME property of inv's calendar (RFC 5545
// section 3.3.4 and 3.3.5): UTC, with a TZID, or floating.
func (inv *Invite) moment(p *ical.Prop) (moment, error) {
	v := strings.TrimSpace(p.Value)
	var m moment
	var err error
	switch {
	case strings.EqualFold(p.Params.Get(ical.ParamValue), "DATE") || len(v) == len(layoutDate):
		m.date = true
		m.t, err = time.Parse(layoutDate, v)
	case len(v) == len(layoutUTC) && (v[len(v)-1] == 'Z' || v[len(v)-1] == 'z'):
		m.zone = "UTC"
		m.t, err = time.Parse(layoutUTC, strings.ToUpper(v))
	case len(v) == len(layoutLocal):
		var wall time.Time
		if wall, err = time.Parse(layoutLocal, v); err != nil {
			break
		}
		tzid := p.Params.Get(ical.ParamTimezoneID)
		switch loc := inv.zoneOf(tzid, wall); {
		case tzid == "":
			m.floating, m.t = true, wall
		case loc == nil:
			m.unknown, m.t, m.zone = true, wall, oneLine(tzid, 100)
		default:
			m.t = time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), 0, loc)
			m.zone = oneLine(tzid, 100)
			if l := ianaZone(strings.TrimSpace(tzid)); l == nil && loc.String() != tzid {
				m.zone = oneLine(loc.String(), 100) // found behind a prefix
			}
		}
	default:
		err = errBadTime
	}
	if err != nil {
		return moment{}, errBadTime
	}
	if y := m.t.Year(); y < 1900 || y > 2200 {
		return moment{}, errBadTime
	}
	return m, nil
}

// local is m in its own zone: RFC 3339 with the offset when the zone is
// known, the date alone for a day, the wall clock alone otherwise.
func (m moment) local() string {
	switch {
	case m.date:
		return m.t.Format(time.DateOnly)
	case m.floating || m.unknown:
		return m.t.Format("2006-01-02T15:04:05")
	}
	return m.t.Format(time.RFC3339)
}

// utc is m in UTC, "" when its zone is not known.
func (m moment) utc() string {
	if m.date || m.floating || m.unknown {
		return ""
	}
	return m.t.UTC().Format(time.RFC3339)
}

// when reads DTSTART and DTEND (or DURATION) into the Invite's times.
func (inv *Invite) when(ev *ical.Event, problems *[]string) {
	sp := ev.Props.Get(ical.PropDateTimeStart)
	if sp == nil {
		if inv.Method != "CANCEL" && inv.Method != "REPLY" {
			*problems = append(*problems, "It gives no start time.")
		}
		return
	}
	start, err := inv.moment(sp)
	if err != nil {
		*problems = append(*problems, fmt.Sprintf("Its start time %s is not a valid date or time.", quote(sp.Value)))
		return
	}
	end, ok := inv.endOf(ev, start, problems)
	inv.AllDay = start.date
	inv.Start, inv.StartUTC = start.local(), start.utc()
	inv.TimeZone = start.zone
	if start.unknown {
		*problems = append(*problems, fmt.Sprintf("Its time zone %s is unknown and the invitation does not define it: the times are shown as written, without a zone.", quote(start.zone)))
		inv.TimeZone = ""
	}
	if ok {
		if start.date {
			last := end
			if end.t.After(start.t) {
				last.t = end.t.AddDate(0, 0, -1) // DTEND of a day is exclusive
			}
			inv.End = last.local()
			end = last
		} else {
			inv.End, inv.EndUTC = end.local(), end.utc()
		}
	}
	inv.When = describeWhen(start, end, ok)
}

// endOf is the event's end: DTEND, else DTSTART plus DURATION, else one
// day for a date and the start itself for a time (RFC 5545 section 3.6.1).
func (inv *Invite) endOf(ev *ical.Event, start moment, problems *[]string) (moment, bool) {
	if ep := ev.Props.Get(ical.PropDateTimeEnd); ep != nil {
		end, err := inv.moment(ep)
		if err != nil {
			*problems = append(*problems, fmt.Sprintf("Its end time %s is not a valid date or time.", quote(ep.Value)))
			return moment{}, false
		}
		if end.t.Before(start.t) {
			*problems = append(*problems, "It ends before it starts.")
			return moment{}, false
		}
		return end, true
	}
	end := start
	if dp := ev.Props.Get(ical.PropDuration); dp != nil {
		d, err := dp.Duration()
		if err != nil || d < 0 || d > 10*365*24*time.Hour {
			*problems = append(*problems, fmt.Sprintf("Its duration %s is not valid.", quote(dp.Value)))
			return moment{}, false
		}
		if start.date {
			end.t = start.t.AddDate(0, 0, int(d/(24*time.Hour)))
		} else {
			end.t = start.t.Add(d)
		}
		return end, true
	}
	if start.date {
		end.t = start.t.AddDate(0, 0, 1)
	}
	return end, true
}

// describeWhen writes start and end for a person: "Wed 4 Mar 2026,
// 09:00–10:00 Europe/Berlin (08:00–09:00 UTC)".
func describeWhen(start, end moment, hasEnd bool) string {
	const day = "Mon 2 Jan 2006"
	if start.date {
		if !hasEnd || !end.t.After(start.t) {
			return start.t.Format(day) + " (all day)"
		}
		return start.t.Format(day) + " to " + end.t.Format(day) + " (all day)"
	}
	zone := start.zone
	switch {
	case start.floating:
		zone = "(local time)"
	case start.unknown:
		zone = "(time zone " + start.zone + " unknown)"
	}
	var b strings.Builder
	b.WriteString(start.t.Format(day + ", 15:04"))
	sameDay := hasEnd && end.t.Year() == start.t.Year() && end.t.YearDay() == start.t.YearDay()
	switch {
	case hasEnd && sameDay && !end.t.Equal(start.t):
		b.WriteString("–" + end.t.Format("15:04"))
	case hasEnd && !sameDay:
		b.WriteString(" to " + end.t.Format(day+", 15:04"))
	}
	b.WriteString(" " + zone)
	if u := start.utc(); u != "" && start.zone != "UTC" {
		su, eu := start.t.UTC(), end.t.UTC()
		b.WriteString(" (" + su.Format("15:04"))
		if hasEnd && !end.t.Equal(start.t) {
			if eu.YearDay() == su.YearDay() {
				b.WriteString("–" + eu.Format("15:04"))
			} else {
				b.WriteString(" to " + eu.Format(day+", 15:04"))
			}
		}
		if su.YearDay() != start.t.YearDay() {
			b.WriteString(" on " + su.Format(day))
		}
		b.WriteString(" UTC)")
	}
	return b.String()
}

// startMoment is the event's start, zero when it has none that reads.
func (inv *Invite) startMoment(ev *ical.Event) moment {
	if sp := ev.Props.Get(ical.PropDateTimeStart); sp != nil {
		if m, err := inv.moment(sp); err == nil {
			return m
		}
	}
	return moment{}
}

// quote is a sender's value in a sentence: one line, short, quoted.
func quote(v string) string {
	return fmt.Sprintf("%q", oneLine(v, 40))
}
