package metrics

import (
	"slices"
	"sync"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// labelSet is the fixed set of values a label may take; anything else is
// recorded as "other", so no caller-supplied text can become a label.
type labelSet struct {
	mu   sync.RWMutex
	vals map[string]bool
}

func newLabelSet(vals ...string) *labelSet {
	s := &labelSet{vals: make(map[string]bool, len(vals))}
	for _, v := range vals {
		s.vals[v] = true
	}
	return s
}

func (s *labelSet) add(v string) {
	s.mu.Lock()
	s.vals[v] = true
	s.mu.Unlock()
}

// of is v when it is in the set, else "other".
func (s *labelSet) of(v string) string {
	s.mu.RLock()
	ok := s.vals[v]
	s.mu.RUnlock()
	if ok {
		return v
	}
	return other
}

func (s *labelSet) values() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.vals))
	for v := range s.vals {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

var (
	protocols     = newLabelSet("imap", "smtp")
	oauthEvents   = newLabelSet("authorize", "token", "refresh")
	oauthOutcomes = newLabelSet("ok", "refused", "error")
	// outcomes are "ok" and the mailerr kind names.
	outcomes = newLabelSet(append(kindNames(), "ok")...)
	// failureClasses add mailerr.Cause's classes of connection failures.
	failureClasses = newLabelSet(append(kindNames(), "ok", "dns", "dial_refused", "dial_unreachable", "tls", "auth", "timeout", "closed")...)
)

// kindNames are the names of every mailerr.Kind (they are numbered from
// zero without gaps).
func kindNames() []string {
	var names []string
	for k := mailerr.Kind(0); k.String() != ""; k++ {
		names = append(names, k.String())
	}
	return names
}

// class is the failure class of err for a label: "ok" for nil, the class
// mailerr.Cause names, else the error's kind.
func class(err error) string {
	if err == nil {
		return "ok"
	}
	if c := mailerr.Cause(err); c != "" {
		return failureClasses.of(c)
	}
	return failureClasses.of(mailerr.KindOf(err).String())
}
