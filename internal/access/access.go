// Package access owns the permission model: the three levels of change a
// tool may make to a mailbox (read, organize, full), set by the operator
// (MAILBOX_ACCESS) and narrowed per token, whether a caller may send, and
// which changes a person must approve first (APPROVAL).
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
	// Approval is what a person must approve for calls with the token,
	// besides what the operator's APPROVAL asks: a token can be stricter,
	// never looser.
	Approval Approval
}

// Narrowed reports whether the scope takes anything away (or asks for
// more approval).
func (s Scope) Narrowed() bool { return s.Level != 0 || s.NoSend || s.Approval != 0 }

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
	if s.Approval != 0 {
		parts = append(parts, "approval "+s.Approval.String())
	}
	if len(parts) == 0 {
		return "unrestricted"
	}
	return strings.Join(parts, ", ")
}

// Approval is which kinds of change a person must approve before they
// happen (APPROVAL, and stricter per token): a set of bits. The zero
// Approval asks for nothing.
type Approval uint8

const (
	// ApproveSend: every message that leaves (send, reply, forward, a
	// draft sent).
	ApproveSend Approval = 1 << iota
	// ApproveDestructive: what cannot be undone or empties a folder
	// (permanent deletion, deleting a folder, pruning agent mail).
	ApproveDestructive
	// ApproveAll is both.
	ApproveAll = ApproveSend | ApproveDestructive
)

// ParseApproval reads a policy as the operator and the token tools take
// it: off, send, destructive or all.
func ParseApproval(s string) (Approval, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "off", "":
		return 0, nil
	case "send":
		return ApproveSend, nil
	case "destructive":
		return ApproveDestructive, nil
	case "all":
		return ApproveAll, nil
	}
	return 0, fmt.Errorf("expected off, send, destructive or all, got %q", s)
}

func (a Approval) String() string {
	switch a {
	case 0:
		return "off"
	case ApproveSend:
		return "send"
	case ApproveDestructive:
		return "destructive"
	}
	return "all"
}

// Covers reports whether a asks for approval of every kind in need.
func (a Approval) Covers(need Approval) bool { return need != 0 && a&need == need }
