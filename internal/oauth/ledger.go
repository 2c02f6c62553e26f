package oauth

import (
	"errors"
	"sync"
	"time"
)

// ledger is the authorization server's only memory of users: which codes
// this process has redeemed (a code that comes back revokes the sign-in it
// started), and for each sign-in (the family of refresh
// tokens that descends from one code) the generation its next refresh must
// present. A refresh token of an older generation is a reused one: the
// family is revoked, so a stolen token and the one it was stolen from
// both stop working (OAuth 2.1 §4.3.1). Refreshes add nothing: memory
// grows with sign-ins, not with refreshes.
//
// It fails closed. When it holds max entries and none has expired, a new
// code or an unknown family is refused with errFull (a temporary error)
// rather than forgetting an entry that has not expired: forgetting would
// let a used token be used again. One account holds at most perAccount
// families; its own least recently refreshed one makes room for a new
// sign-in, which weakens nothing for anyone else (only someone who can
// sign in as that account can cause it).
//
// It is memory of this process only: a replica that did not see a
// refresh does not know of it, and a restart forgets (docs/scaling.md).
// Generations only grow, so a token a replica has not seen is a newer one
// and is accepted there: replicas never refuse each other's refreshes.
type ledger struct {
	mu         sync.Mutex
	max        int
	perAccount int
	codes      map[string]redeemed
	families   map[string]*family
	accounts   map[string][]string // account -> its families, oldest refresh first
	nextSweep  time.Time
	soonest    int64 // the earliest expiry seen by the last sweep
}

// redeemed is a code this process exchanged: until when, and the sign-in
// it started (revoked if the code comes back: RFC 6749 §4.1.2).
type redeemed struct {
	expires int64
	family  string
}

type family struct {
	next    uint32 // the generation the next refresh must present
	revoked bool
	account string
	expires int64
}

var (
	errCodeUsed = errors.New("the authorization code has already been used; the tokens issued for it are revoked")
	errReused   = errors.New("the refresh token has already been used (each refresh returns a new one); every token of this sign-in is now revoked: sign in again")
	errRevoked  = errors.New("this sign-in was revoked because one of its refresh tokens was used twice: sign in again")
)

// fullError says the ledger cannot take a new entry until RetryAfter.
type fullError struct{ RetryAfter time.Duration }

func (e *fullError) Error() string {
	return "the server is handling too many sign-ins to take another now; try again later"
}

func newLedger(max, perAccount int) *ledger {
	return &ledger{max: max, perAccount: perAccount, codes: map[string]redeemed{}, families: map[string]*family{}, accounts: map[string][]string{}}
}

// size is the number of entries (codes and families).
func (l *ledger) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.codes) + len(l.families)
}

// exchange redeems code id (valid until codeExp) and starts family fam of
// account (its first refresh token valid until famExp). Nothing is
// recorded unless both can be.
func (l *ledger) exchange(code string, codeExp time.Time, fam, account string, famExp, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.codes[code]; ok && now.Unix() < r.expires {
		if f, ok := l.families[r.family]; ok {
			f.revoked = true
		}
		return errCodeUsed
	}
	if err := l.room(2, now); err != nil {
		return err
	}
	l.codes[code] = redeemed{codeExp.Unix(), fam}
	l.start(fam, account, 0, famExp, now)
	return nil
}

// refresh checks generation gen of family fam (of account) and records
// that the next refresh must present gen+1, until newExp.
func (l *ledger) refresh(fam string, gen uint32, account string, newExp, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.families[fam]
	if ok && now.Unix() >= f.expires {
		l.drop(fam)
		ok = false
	}
	if !ok {
		// Unknown here: a restart, another replica's sign-in, or a family
		// forgotten after it expired. Remembered from now on.
		if err := l.room(1, now); err != nil {
			return err
		}
		l.start(fam, account, gen+1, newExp, now)
		return nil
	}
	switch {
	case f.revoked:
		return errRevoked
	case gen < f.next:
		f.revoked = true
		return errReused
	}
	f.next = gen + 1
	f.expires = max(f.expires, newExp.Unix())
	l.touch(fam, f.account)
	return nil
}

// start records a family, making room among the account's own families.
func (l *ledger) start(fam, account string, next uint32, exp, now time.Time) {
	if fams := l.accounts[account]; l.perAccount > 0 && len(fams) >= l.perAccount {
		l.drop(fams[0])
	}
	l.families[fam] = &family{next: next, account: account, expires: exp.Unix()}
	l.accounts[account] = append(l.accounts[account], fam)
}

// touch moves fam to the end of its account's list (most recently used).
func (l *ledger) touch(fam, account string) {
	fams := l.accounts[account]
	for i, f := range fams {
		if f == fam {
			copy(fams[i:], fams[i+1:])
			fams[len(fams)-1] = fam
			return
		}
	}
}

func (l *ledger) drop(fam string) {
	f, ok := l.families[fam]
	if !ok {
		return
	}
	delete(l.families, fam)
	fams := l.accounts[f.account]
	for i, x := range fams {
		if x == fam {
			fams = append(fams[:i], fams[i+1:]...)
			break
		}
	}
	if len(fams) == 0 {
		delete(l.accounts, f.account)
	} else {
		l.accounts[f.account] = fams
	}
}

// room makes space for n entries by forgetting expired ones (a full sweep,
// at most once a second so that refused requests cannot make the server
// sweep on every call); it never forgets a live one.
func (l *ledger) room(n int, now time.Time) error {
	if len(l.codes)+len(l.families)+n <= l.max {
		return nil
	}
	if !now.Before(l.nextSweep) {
		l.nextSweep = now.Add(time.Second)
		t := now.Unix()
		l.soonest = 0
		for id, r := range l.codes {
			if t >= r.expires {
				delete(l.codes, id)
			} else if l.soonest == 0 || r.expires < l.soonest {
				l.soonest = r.expires
			}
		}
		for id, f := range l.families {
			if t >= f.expires {
				l.drop(id)
			} else if l.soonest == 0 || f.expires < l.soonest {
				l.soonest = f.expires
			}
		}
		if len(l.codes)+len(l.families)+n <= l.max {
			return nil
		}
	}
	wait := time.Hour
	if l.soonest != 0 {
		wait = time.Unix(l.soonest, 0).Sub(now)
	}
	return &fullError{RetryAfter: min(max(wait, time.Second), time.Hour)}
}
