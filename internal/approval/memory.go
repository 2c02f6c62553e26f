package approval

import (
	"errors"
	"sync"
	"time"
)

// memory remembers, per account, the approvals waiting (made, neither
// used nor expired) and those used (until they expire, so that none is
// used twice). Each account has bounds of its own, maxPending waiting and
// maxUsed used: a full account refuses only itself, never another. The
// number of accounts is bounded too; since a state or a link is made only
// for credentials the mail server accepted, filling that takes as many
// real mailboxes. It fails closed: when it cannot remember a use it
// refuses it (ErrBusy) rather than forget one, which would let a state or
// a link be used twice.
//
// It is memory of this process only: a replica that did not see a use
// does not know of it, and a restart forgets (docs/scaling.md).
type memory struct {
	mu          sync.Mutex
	maxPending  int
	maxUsed     int
	maxAccounts int
	accounts    map[string]*accountMemory
	nextSweep   time.Time
}

type accountMemory struct {
	waiting map[string]int64 // id -> expiry, unix seconds
	used    map[string]int64
}

// errFull says the memory holds as many accounts as it may.
var errFull = errors.New("the gateway is handling too many approvals to take another now; try again in a minute")

func newMemory(maxPending int) *memory {
	return &memory{maxPending: maxPending, maxUsed: max(1000, 50*maxPending), maxAccounts: 100_000, accounts: map[string]*accountMemory{}}
}

// wait records id as waiting for account until exp, unless account has
// maxPending waiting already.
func (m *memory) wait(account, id string, exp, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, err := m.account(account, now)
	if err != nil {
		return err
	}
	if len(a.waiting) >= m.maxPending {
		sweep(a.waiting, now)
	}
	if len(a.waiting) >= m.maxPending {
		return &PendingError{Max: m.maxPending}
	}
	a.waiting[id] = exp.Unix()
	return nil
}

// use records id of account as used until exp; used is the error when it
// was used before.
func (m *memory) use(account, id string, exp, now time.Time, used error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, err := m.account(account, now)
	if err != nil {
		return err
	}
	if e, ok := a.used[id]; ok && now.Unix() < e {
		return used
	}
	if len(a.used) >= m.maxUsed {
		sweep(a.used, now)
		if len(a.used) >= m.maxUsed {
			return ErrBusy
		}
	}
	delete(a.waiting, id)
	a.used[id] = exp.Unix()
	return nil
}

// seen reports whether id of account was used.
func (m *memory) seen(account, id string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.accounts[account]
	if !ok {
		return false
	}
	e, ok := a.used[id]
	return ok && now.Unix() < e
}

func (m *memory) waiting(account string, now time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.accounts[account]
	if !ok {
		return 0
	}
	sweep(a.waiting, now)
	return len(a.waiting)
}

// account is account's memory, made if need be. When the memory holds
// maxAccounts it first forgets accounts with nothing live (a full sweep,
// at most once a second, so that refused requests cannot make it sweep
// on every call).
func (m *memory) account(name string, now time.Time) (*accountMemory, error) {
	if a, ok := m.accounts[name]; ok {
		return a, nil
	}
	if len(m.accounts) >= m.maxAccounts {
		if now.Before(m.nextSweep) {
			return nil, errFull
		}
		m.nextSweep = now.Add(time.Second)
		for k, a := range m.accounts {
			sweep(a.waiting, now)
			sweep(a.used, now)
			if len(a.waiting)+len(a.used) == 0 {
				delete(m.accounts, k)
			}
		}
		if len(m.accounts) >= m.maxAccounts {
			return nil, errFull
		}
	}
	a := &accountMemory{waiting: map[string]int64{}, used: map[string]int64{}}
	m.accounts[name] = a
	return a, nil
}

// sweep forgets the expired entries of ids.
func sweep(ids map[string]int64, now time.Time) {
	t := now.Unix()
	for k, e := range ids {
		if t >= e {
			delete(ids, k)
		}
	}
}
