// Package access owns the permission model: the three levels of change a
// tool may make to a mailbox (read, organize, full), set by the operator
// (MAILBOX_ACCESS) and narrowed per token, and whether a caller may send.
// It decides nothing about tools; it only orders the levels and says what
// a scope allows.
package access

import (
	"fmt"
	"strings"
)

// Level is how much a caller may change. The zero Level is "not set" (no
// narrowing), so a token made before scopes existed allows what the
// operator allows.
type Level uint8

const (
	// Read looks; the only changes are \Seen on what a consuming tool
	// returns and \Answered by a reply.
	Read Level = iota + 1
	// Organize also sets flags and keywords, moves, trashes, creates and
	// renames folders, and saves and sends drafts.
	Organize
	// Full also deletes for good: expunge and delete folder.
	Full
)

// Levels are the levels, lowest first.
var Levels = []Level{Read, Organize, Full}

func (l Level) String() string {
	switch l {
	case Read:
		return "read"
	case Organize:
		return "organize"
	case Full:
		return "full"
	}
	return "unset"
}

// Parse reads a level name as the operator and the token tools take it.
func Parse(s string) (Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "read":
		return Read, nil
	case "organize":
		return Organize, nil
	case "full":
		return Full, nil
	}
	return 0, fmt.Errorf("expected read, organize or full, got %q", s)
}

// Scope is what a token narrows the operator's permissions to. The zero
// Scope narrows nothing.
type Scope struct {
	// Level is the most the token allows; 0 leaves the operator's level.
	Level Level
	// NoSend forbids sending mail with the token.
	NoSend bool
}

// Narrowed reports whether the scope takes anything away.
func (s Scope) Narrowed() bool { return s.Level != 0 || s.NoSend }

// Effective is the level a caller with scope s has under the operator's
// level: the lower of the two.
func (s Scope) Effective(operator Level) Level {
	if s.Level != 0 && s.Level < operator {
		return s.Level
	}
	return operator
}

// String describes the scope for a person: "organize, no sending".
func (s Scope) String() string {
	var parts []string
	if s.Level != 0 {
		parts = append(parts, s.Level.String())
	}
	if s.NoSend {
		parts = append(parts, "no sending")
	}
	if len(parts) == 0 {
		return "unrestricted"
	}
	return strings.Join(parts, ", ")
}
