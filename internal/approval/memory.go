package approval

import (
	"context"
	"errors"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

// ledger remembers, per account, the approvals waiting (made, neither
// used nor expired) and those used (until they expire, so that none is
// used twice), in a memory.Store: this process's own (the default, for
// one replica) or Redis (REDIS_URL), where every replica sees what any
// used. Each account has bounds of its own, maxPending waiting and, in
// this process's memory, 50 times as many used (at least minUsed): a
// full account refuses only itself, never another. This process's
// memory is bounded in all too; since a state or a link is made only for
// credentials the mail server accepted, filling that takes as many real
// mailboxes. It fails closed:
// when it cannot remember a use (full, or Redis does not answer) it
// refuses it rather than forget one, which would let a state or a link
// be used twice.
type ledger struct {
	waiting    memory.Slots
	used       memory.Once
	maxPending int
}

// Bounds of this process's memory: approvals waiting and used, in all
// (each entry about 100 bytes), and used ones of one account.
const (
	maxEntries = 1_000_000
	minUsed    = 1000
)

func newLedger(s memory.Store, maxPending int) *ledger {
	return &ledger{
		waiting:    s.Slots("approval.pending", memory.Bounds{Max: maxEntries}),
		used:       s.Once("approval.used", memory.Bounds{Max: maxEntries, PerScope: max(minUsed, 50*maxPending)}),
		maxPending: maxPending,
	}
}

// UnavailableError says an approval could not be made, checked or used
// just now: the memory that keeps them single-use is full, or does not
// answer. Nothing was done; RetryAfter says when to try again.
type UnavailableError struct {
	RetryAfter time.Duration
	err        error
}

func (e *UnavailableError) Error() string {
	var full *memory.FullError
	switch {
	case errors.As(e.err, &full) && full.Scope:
		return "this mailbox has answered too many approvals in the last minutes for the gateway to track another, so nothing was done; try again later"
	case errors.As(e.err, &full):
		return "the gateway is handling too many approvals to take another now, so nothing was done; try again in a minute"
	}
	return "the gateway cannot check approvals just now (the memory it shares with its other replicas does not answer), so nothing was done; try again in a few seconds"
}

func (e *UnavailableError) Unwrap() error { return e.err }

// unavailable turns a store's refusal into an UnavailableError; other
// errors (a caller gone) pass.
func unavailable(err error) error {
	if d, ok := memory.RetryAfter(err); ok {
		return &UnavailableError{RetryAfter: d, err: err}
	}
	return err
}

// wait records id as waiting for account until exp, unless account has
// maxPending waiting already.
func (m *ledger) wait(ctx context.Context, account, id string, exp time.Time) error {
	t, err := m.waiting.Take(ctx, account, id, exp, m.maxPending)
	switch {
	case err != nil:
		return unavailable(err)
	case !t.OK:
		return &PendingError{Max: m.maxPending}
	}
	return nil
}

// use records id of account as used until exp; used is the error when it
// was used before.
func (m *ledger) use(ctx context.Context, account, id string, exp time.Time, used error) error {
	first, err := m.used.Use(ctx, account, id, exp)
	switch {
	case err != nil:
		return unavailable(err)
	case !first:
		return used
	}
	// No longer waiting. A release that fails leaves the slot to expire
	// with the approval: the account may have one fewer for that long.
	m.waiting.Release(ctx, account, id)
	return nil
}

// seen reports whether id of account was used.
func (m *ledger) seen(ctx context.Context, account, id string) (bool, error) {
	seen, err := m.used.Seen(ctx, account, id)
	if err != nil {
		return false, unavailable(err)
	}
	return seen, nil
}

// pending is how many approvals account has waiting.
func (m *ledger) pending(ctx context.Context, account string) (int, error) {
	n, err := m.waiting.Count(ctx, account)
	if err != nil {
		return 0, unavailable(err)
	}
	return n, nil
}
