package invite

import (
	"bytes"
	"errors"
	"fmt"
)

// Bounds on what is handed to go-ical, whose decoder recurses once per
// nested component, builds each parameter value a byte at a time (time
// quadratic in its length) and panics on some malformed lines: a calendar
// outside them is refused before it is decoded, with a sentence.
const (
	// MaxBytes is the largest calendar part read; a real invitation,
	// time zones and a few hundred attendees included, is far smaller.
	MaxBytes = 1 << 20
	// maxDepth is the deepest nesting of components (VCALENDAR, VEVENT,
	// VALARM is 3; VTIMEZONE, STANDARD 3).
	maxDepth = 6
	// maxComponents caps BEGIN lines.
	maxComponents = 2000
	// maxParams caps the name and parameters of one content line (the
	// part before the value); maxParamWork caps the sum of their squares,
	// the work go-ical's parameter decoding does.
	maxParams    = 2048
	maxParamWork = 64 << 20
)

// errRefused wraps the reason a calendar is not decoded.
var errRefused = errors.New("refused")

// guard checks data against the bounds above, unfolding lines as
// RFC 5545 section 3.1 does (a line starting with a space or tab continues
// the one before).
func guard(data []byte) error {
	if len(data) > MaxBytes {
		return fmt.Errorf("%w: it is larger than %d KiB", errRefused, MaxBytes>>10)
	}
	depth, components, work := 0, 0, 0
	check := func(line []byte) error {
		n := paramsLength(line)
		if n > maxParams {
			return fmt.Errorf("%w: a property's parameters are longer than %d bytes", errRefused, maxParams)
		}
		if work += n * n / 2; work > maxParamWork {
			return fmt.Errorf("%w: its properties have too many parameters", errRefused)
		}
		name := line
		if n < len(line) {
			name = line[:n]
		}
		switch {
		case hasName(name, "BEGIN"):
			depth++
			components++
			if depth > maxDepth {
				return fmt.Errorf("%w: its components are nested more than %d deep", errRefused, maxDepth)
			}
			if components > maxComponents {
				return fmt.Errorf("%w: it has more than %d components", errRefused, maxComponents)
			}
		case hasName(name, "END"):
			depth--
		}
		return nil
	}
	var logical []byte
	for _, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			logical = append(logical, line[1:]...)
			if len(logical) > MaxBytes {
				return fmt.Errorf("%w: a line is too long", errRefused)
			}
			continue
		}
		if len(logical) > 0 {
			if err := check(logical); err != nil {
				return err
			}
		}
		logical = append(logical[:0], line...)
	}
	if len(logical) > 0 {
		return check(logical)
	}
	return nil
}

// paramsLength is the length of a content line's name and parameters:
// up to the first colon outside double quotes (the whole line if none).
func paramsLength(line []byte) int {
	quoted := false
	for i, c := range line {
		switch {
		case c == '"':
			quoted = !quoted
		case c == ':' && !quoted:
			return i
		}
	}
	return len(line)
}

// hasName reports whether the name part of a content line (before any
// parameters) is name, in any case.
func hasName(line []byte, name string) bool {
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	return bytes.EqualFold(bytes.TrimSpace(line), []byte(name))
}
