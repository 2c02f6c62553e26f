package invite

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-ical"
	"github.com/teambition/rrule-go"
)

// A date-time's zone comes from its TZID parameter: an IANA name (also
// behind a "/" prefix, as some producers write it), else the VTIMEZONE of
// the same calendar that defines it (Outlook names zones "W. Europe
// Standard Time" and always sends the definition), else it is unknown.

const (
	layoutDate     = "20060102"
	layoutLocal    = "20060102T150405"
	layoutUTC      = "20060102T150405Z"
	maxTZIDLength  = 200
	maxZoneLookups = 8
)

// ianaZones remembers what time.LoadLocation said of a name: a
// *time.Location, or nil for a name it does not know (a failed lookup
// reads the Go installation's zoneinfo.zip, about 100 µs). Unknown names
// are remembered up to maxUnknownZones: senders choose them.
var (
	ianaZones    sync.Map
	unknownZones atomic.Int32
)

const maxUnknownZones = 4096

// ianaZone loads name from the time zone database, never the process's
// own zone ("Local") and never a name with a path in it.
func ianaZone(name string) *time.Location {
	if name == "" || len(name) > 64 || strings.EqualFold(name, "local") || strings.Contains(name, "..") || strings.HasPrefix(name, "/") {
		return nil
	}
	if l, ok := ianaZones.Load(name); ok {
		return l.(*time.Location)
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		if unknownZones.Add(1) <= maxUnknownZones {
			ianaZones.Store(name, (*time.Location)(nil))
		}
		return nil
	}
	ianaZones.Store(name, l)
	return l
}

// zoneKey is one question to zoneOf.
type zoneKey struct {
	tzid string
	wall time.Time
}

// zoneOf finds the location of tzid for the wall time wall (whose own
// location is meaningless) in inv's calendar: a *time.Location, or nil
// when the zone is unknown. The answers are kept for the calendar's other
// times (a VTIMEZONE's rules take some work to apply).
func (inv *Invite) zoneOf(tzid string, wall time.Time) *time.Location {
	k := zoneKey{tzid, wall}
	if l, ok := inv.zones[k]; ok {
		return l
	}
	l := zoneOf(inv.cal, tzid, wall)
	if inv.zones == nil {
		inv.zones = map[zoneKey]*time.Location{}
	}
	if len(inv.zones) < 64 {
		inv.zones[k] = l
	}
	return l
}

func zoneOf(cal *ical.Calendar, tzid string, wall time.Time) *time.Location {
	if len(tzid) > maxTZIDLength {
		return nil
	}
	name := strings.TrimSpace(tzid)
	// "/Europe/Berlin", "/mozilla.org/20050126_1/Europe/Berlin",
	// "/citadel.org/20190914_1/Europe/Berlin": try the name, then what
	// follows each slash.
	for i, tries := 0, 0; tries < maxZoneLookups; tries++ {
		if l := ianaZone(name[i:]); l != nil {
			return l
		}
		j := strings.IndexByte(name[i:], '/')
		if j < 0 {
			break
		}
		i += j + 1
	}
	if off, ok := vtimezoneOffset(cal, tzid, wall); ok {
		return time.FixedZone(tzid, off)
	}
	return nil
}

// vtimezoneOffset is the UTC offset (seconds) the calendar's VTIMEZONE
// named tzid gives at wall time: that of the observance (STANDARD or
// DAYLIGHT) with the latest onset at or before it (RFC 5545 section
// 3.6.5).
func vtimezoneOffset(cal *ical.Calendar, tzid string, wall time.Time) (int, bool) {
	if cal == nil {
		return 0, false
	}
	w := naive(wall)
	for _, c := range cal.Children {
		if c.Name != ical.CompTimezone || c.Props.Get(ical.PropTimezoneID) == nil || c.Props.Get(ical.PropTimezoneID).Value != tzid {
			continue
		}
		var best time.Time
		bestOff, found := 0, false
		earliest, earliestFrom := time.Time{}, 0
		for _, o := range c.Children {
			if o.Name != ical.CompTimezoneStandard && o.Name != ical.CompTimezoneDaylight {
				continue
			}
			to, okTo := parseOffset(propValue(o, ical.PropTimezoneOffsetTo))
			from, okFrom := parseOffset(propValue(o, ical.PropTimezoneOffsetFrom))
			start, err := time.Parse(layoutLocal, propValue(o, ical.PropDateTimeStart))
			if !okTo || err != nil {
				continue
			}
			if okFrom && (earliest.IsZero() || start.Before(earliest)) {
				earliest, earliestFrom = start, from
			}
			if onset, ok := lastOnset(o, start, w); ok && (!found || onset.After(best)) {
				best, bestOff, found = onset, to, true
			}
		}
		if found {
			return bestOff, true
		}
		if !earliest.IsZero() {
			return earliestFrom, true // before every onset
		}
		return 0, false
	}
	return 0, false
}

// lastOnset is the latest onset of observance o at or before w, all in
// naive local time: its DTSTART, its RDATEs, and its yearly RRULE (a
// zone's rules repeat yearly; any other frequency is ignored, and so is a
// rule that would be walked through more than a thousand years).
func lastOnset(o *ical.Component, start, w time.Time) (time.Time, bool) {
	var best time.Time
	found := false
	consider := func(t time.Time) {
		if !t.After(w) && (!found || t.After(best)) {
			best, found = t, true
		}
	}
	consider(start)
	for _, p := range o.Props.Values(ical.PropRecurrenceDates) {
		for _, v := range strings.Split(p.Value, ",") {
			if t, err := time.Parse(layoutLocal, strings.TrimSpace(v)); err == nil {
				consider(t)
			}
		}
	}
	if p := o.Props.Get(ical.PropRecurrenceRule); p != nil && w.After(start) && w.Year()-start.Year() <= 1000 {
		if opt, err := rrule.StrToROption(p.Value); err == nil && opt.Freq == rrule.YEARLY && opt.Interval <= 1 {
			// rrule-go walks at most about 292 years (a time.Duration)
			// from DTSTART, and Outlook starts its zones in 1601: a rule
			// without COUNT starts the year before w instead, which gives
			// the same onsets from then on (a yearly rule has one in it).
			opt.Dtstart = start
			if opt.Count == 0 && w.Year()-start.Year() > 1 {
				opt.Dtstart = time.Date(w.Year()-1, start.Month(), start.Day(), start.Hour(), start.Minute(), start.Second(), 0, time.UTC)
			} else if w.Year()-start.Year() > 250 {
				return best, found
			}
			if !opt.Until.IsZero() {
				opt.Until = naive(opt.Until)
			}
			if r, err := rrule.NewRRule(*opt); err == nil {
				if t := r.Before(w, true); !t.IsZero() {
					consider(t)
				}
			}
		}
	}
	return best, found
}

// naive is t's wall clock as a UTC time, for comparing local times.
func naive(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

func propValue(c *ical.Component, name string) string {
	if p := c.Props.Get(name); p != nil {
		return strings.TrimSpace(p.Value)
	}
	return ""
}

// parseOffset reads a UTC offset, "+0100", "-0500", "+053000".
func parseOffset(s string) (int, bool) {
	if len(s) != 5 && len(s) != 7 || s[0] != '+' && s[0] != '-' {
		return 0, false
	}
	n := 0
	for _, part := range []string{s[1:3], s[3:5], s[5:]} {
		if part == "" {
			continue
		}
		v, err := strconv.Atoi(part)
		if err != nil || v < 0 || v > 59 {
			return 0, false
		}
		n = n*60 + v
	}
	if len(s) == 5 {
		n *= 60
	}
	if n > 18*3600 {
		return 0, false
	}
	if s[0] == '-' {
		n = -n
	}
	return n, true
}
