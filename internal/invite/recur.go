package invite

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/teambition/rrule-go"
)

// describeRule writes an RRULE (RFC 5545 section 3.3.10) in words: the
// rules calendar apps make ("every 2 weeks on Monday and Wednesday, until
// Tue 30 Jun 2026", "every month on the last Friday, 6 times"); any other
// is given as written. start is the event's start (its weekday, day and
// month are the rule's defaults); exceptions counts EXDATEs.
func describeRule(rule string, start moment, exceptions int) string {
	raw := "repeats by the rule " + oneLine(rule, 200)
	opt, err := rrule.StrToROption(strings.TrimPrefix(strings.TrimSpace(rule), "RRULE:"))
	if err != nil {
		return raw
	}
	if len(opt.Bysetpos)+len(opt.Byyearday)+len(opt.Byweekno)+len(opt.Byhour)+len(opt.Byminute)+len(opt.Bysecond)+len(opt.Byeaster) > 0 {
		return raw
	}
	n := opt.Interval
	if n < 1 {
		n = 1
	}
	every := func(unit string) string {
		if n == 1 {
			return "every " + unit
		}
		return "every " + strconv.Itoa(n) + " " + unit + "s"
	}
	var s string
	switch opt.Freq {
	case rrule.DAILY:
		if len(opt.Bymonthday)+len(opt.Bymonth) > 0 {
			return raw
		}
		s = every("day")
		if len(opt.Byweekday) > 0 {
			days, ok := weekdays(opt.Byweekday, false)
			if !ok {
				return raw
			}
			s += " on " + days
		}
	case rrule.WEEKLY:
		if len(opt.Bymonthday)+len(opt.Bymonth) > 0 {
			return raw
		}
		s = every("week")
		switch {
		case len(opt.Byweekday) > 0:
			days, ok := weekdays(opt.Byweekday, false)
			if !ok {
				return raw
			}
			s += " on " + days
		case !start.t.IsZero():
			s += " on " + start.t.Weekday().String()
		}
	case rrule.MONTHLY:
		if len(opt.Bymonth) > 0 {
			return raw
		}
		s = every("month")
		switch {
		case len(opt.Bymonthday) > 0 && len(opt.Byweekday) == 0:
			s += " on " + monthDays(opt.Bymonthday)
		case len(opt.Byweekday) > 0 && len(opt.Bymonthday) == 0:
			days, ok := weekdays(opt.Byweekday, true)
			if !ok {
				return raw
			}
			s += " on " + days
		case len(opt.Bymonthday)+len(opt.Byweekday) > 0:
			return raw
		case !start.t.IsZero():
			s += " on day " + strconv.Itoa(start.t.Day())
		}
	case rrule.YEARLY:
		s = every("year")
		switch {
		case len(opt.Bymonth) == 1 && len(opt.Bymonthday) == 1 && len(opt.Byweekday) == 0:
			s += fmt.Sprintf(" on %d %s", opt.Bymonthday[0], monthName(opt.Bymonth[0]))
		case len(opt.Bymonth) == 1 && len(opt.Byweekday) > 0 && len(opt.Bymonthday) == 0:
			days, ok := weekdays(opt.Byweekday, true)
			if !ok {
				return raw
			}
			s += " on " + days + " of " + monthName(opt.Bymonth[0])
		case len(opt.Bymonth)+len(opt.Bymonthday)+len(opt.Byweekday) > 0:
			return raw
		case !start.t.IsZero():
			s += " on " + start.t.Format("2 January")
		}
	default:
		return raw
	}
	switch {
	case opt.Count > 0:
		s += ", " + strconv.Itoa(opt.Count) + " times"
	case !opt.Until.IsZero():
		s += ", until " + opt.Until.Format("Mon 2 Jan 2006")
	}
	switch exceptions {
	case 0:
	case 1:
		s += ", except on one date"
	default:
		s += fmt.Sprintf(", except on %d dates", exceptions)
	}
	return s
}

var ordinals = map[int]string{1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", -1: "last", -2: "second to last"}

// weekdays names BYDAY values ("Monday and Wednesday", "the last
// Friday"); an ordinal (2TU) is allowed only where nth says, and only
// those ordinals.
func weekdays(ws []rrule.Weekday, nth bool) (string, bool) {
	var names []string
	for _, w := range ws {
		name := time.Weekday((w.Day() + 1) % 7).String()
		if n := w.N(); n != 0 {
			o, ok := ordinals[n]
			if !nth || !ok {
				return "", false
			}
			name = "the " + o + " " + name
		}
		names = append(names, name)
	}
	if len(ws) == 5 && !nth && isWorkweek(ws) {
		return "weekdays (Monday to Friday)", true
	}
	return joinAnd(names), true
}

func isWorkweek(ws []rrule.Weekday) bool {
	seen := 0
	for _, w := range ws {
		if w.Day() > 4 || w.N() != 0 {
			return false
		}
		seen |= 1 << w.Day()
	}
	return seen == 0x1f
}

func monthDays(days []int) string {
	var names []string
	for _, d := range days {
		switch {
		case d == -1:
			names = append(names, "the last day")
		case d < 0:
			names = append(names, fmt.Sprintf("the %d. day from the end", -d))
		default:
			names = append(names, "day "+strconv.Itoa(d))
		}
	}
	return joinAnd(names)
}

func monthName(m int) string {
	if m < 1 || m > 12 {
		return "month " + strconv.Itoa(m)
	}
	return time.Month(m).String()
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
