package oauth

import (
	"errors"
	"sync"
	"time"
)

// ledger is the authorization server's only memory of users. Its rules,
// each tested in ledger_test.go (a shared store must keep the same ones):
//
//  1. Single use. A code this process redeemed is remembered until it
//     expires; one that comes back is refused and revokes the sign-in it
//     started (RFC 6749 §4.1.2). The state of a provider round trip is
//     used once in the same way (once).
//  2. Refresh generations. Each sign-in (the family of refresh tokens
//     that descends from one code) has the generation its next refresh
//     must present. An older one is a reused token: the family is
//     revoked, so a stolen token and the one it was stolen from both stop
//     (OAuth 2.1 §4.3.1). Refreshes add nothing: memory grows with
//     sign-ins, not with refreshes.
//  3. Ending is for good. Every refresh token this process issues names
//     this ledger (id, sealed in the token as Grant.Ledger), and the
//     ledger keeps every family it issued a live token for until that
//     token would expire. So a family that a token of this ledger names
//     and the ledger no longer holds was ended here: refused. (Before,
//     forgetting a family made its tokens "unknown", and an unknown
//     family was accepted again.)
//  4. Per account. One account holds at most perAccount entries: its live
//     sign-ins and the codes it redeemed that have not expired. A new
//     sign-in ends the account's least recently refreshed ones to make
//     room (rule 3: they stay ended); when the account's codes alone fill
//     it, the new sign-in waits until the oldest expires (a minute at
//     most). Only someone who can sign in as the account can cause
//     either, and no account can take more than its share of max.
//  5. Fails closed. When it holds max entries and none has expired, a new
//     code, state or unknown family is refused with a fullError (a
//     temporary error) rather than anything live being forgotten:
//     forgetting would let a used token be used again.
//  6. Other replicas. A family this ledger never saw (another replica's
//     sign-in, or one from before a restart: its tokens name another
//     ledger) is accepted at the generation its token carries and
//     remembered from then on. Generations only grow, so a token a
//     replica has not seen is a newer one: replicas never refuse each
//     other's refreshes; and a replica does not know what another one
//     redeemed, revoked or ended (docs/scaling.md).
type ledger struct {
	id         string // names this ledger in the tokens it lets be issued (rule 3)
	mu         sync.Mutex
	max        int
	perAccount int
	used       map[string]use // codes redeemed and provider states used
	families   map[string]*family
	accounts   map[string]*account
	nextSweep  time.Time
	soonest    int64 // the earliest expiry seen by the last sweep
}

// use is a code this process exchanged (until when, and the sign-in it
// started, revoked if the code comes back) or a provider state it used
// (family "").
type use struct {
	expires int64
	family  string
}

type family struct {
	next    uint32 // the generation the next refresh must present
	revoked bool
	account string
	expires int64 // when the newest refresh token issued for it expires
}

// account is what one account holds: its live families, least recently
// refreshed first, and the expiries of the codes it redeemed.
type account struct {
	families []string
	codes    []int64
}

func (a *account) held() int { return len(a.families) + len(a.codes) }

// dropExpiredCodes forgets the account's codes that have expired.
func (a *account) dropExpiredCodes(now int64) {
	kept := a.codes[:0]
	for _, exp := range a.codes {
		if now < exp {
			kept = append(kept, exp)
		}
	}
	a.codes = kept
}

var (
	errCodeUsed  = errors.New("the authorization code has already been used; the tokens issued for it are revoked")
	errReused    = errors.New("the refresh token has already been used (each refresh returns a new one); every token of this sign-in is now revoked: sign in again")
	errRevoked   = errors.New("this sign-in was revoked because one of its refresh tokens was used twice: sign in again")
	errEnded     = errors.New("this sign-in has ended (the account signed in from more clients than this server keeps, and this one was used least recently): sign in again")
	errStateUsed = errors.New("this sign-in link has already been used")
)

// fullError says the ledger (or an account's share of it) cannot take a
// new entry until RetryAfter.
type fullError struct {
	RetryAfter time.Duration
	account    bool
}

func (e *fullError) Error() string {
	if e.account {
		return "this account has signed in too often in the last minute to take another sign-in now; try again later"
	}
	return "the server is handling too many sign-ins to take another now; try again later"
}

func newLedger(maxEntries, perAccount int) *ledger {
	return &ledger{id: randomHex()[:16], max: maxEntries, perAccount: max(perAccount, 2),
		used: map[string]use{}, families: map[string]*family{}, accounts: map[string]*account{}}
}

// size is the number of entries (codes, states and families).
func (l *ledger) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.used) + len(l.families)
}

// once uses id (a provider state, valid until exp) once: errStateUsed when
// it was used before.
func (l *ledger) once(id string, exp, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u, ok := l.used[id]; ok && now.Unix() < u.expires {
		return errStateUsed
	}
	if err := l.room(1, now); err != nil {
		return err
	}
	l.used[id] = use{expires: exp.Unix()}
	return nil
}

// exchange redeems code (valid until codeExp) and starts family fam of
// account (its first refresh token valid until famExp). Nothing is
// recorded, and nothing ended, unless both can be.
func (l *ledger) exchange(code string, codeExp time.Time, fam, account string, famExp, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u, ok := l.used[code]; ok && now.Unix() < u.expires {
		if f, ok := l.families[u.family]; ok {
			f.revoked = true
		}
		return errCodeUsed
	}
	if err := l.makeRoom(account, 2, now); err != nil {
		return err
	}
	l.used[code] = use{codeExp.Unix(), fam}
	a := l.accountOf(account)
	a.codes = append(a.codes, codeExp.Unix())
	l.start(fam, account, 0, famExp)
	return nil
}

// refresh checks generation gen of family fam (of account), named by a
// token that ledger origin let be issued, and records that the next
// refresh must present gen+1, until newExp.
func (l *ledger) refresh(fam string, gen uint32, origin, account string, newExp, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.families[fam]
	if ok && now.Unix() >= f.expires {
		l.drop(fam)
		ok = false
	}
	if !ok {
		if origin == l.id {
			return errEnded // rule 3
		}
		// Unknown here (rule 6): remembered from now on.
		if err := l.makeRoom(account, 1, now); err != nil {
			return err
		}
		l.start(fam, account, gen+1, newExp)
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

// makeRoom makes room for n new entries of account: its expired codes go,
// then its least recently refreshed families end (rule 4), and the whole
// ledger must have room for what remains (rule 5). On an error nothing
// has ended.
func (l *ledger) makeRoom(acct string, n int, now time.Time) error {
	t := now.Unix()
	ends := func() (int, *fullError) {
		a := l.accounts[acct]
		if a == nil {
			return 0, nil
		}
		a.dropExpiredCodes(t)
		over := a.held() + n - l.perAccount
		if over <= 0 {
			return 0, nil
		}
		if over > len(a.families) {
			// Its codes alone fill its share: wait for the oldest.
			oldest := a.codes[0]
			for _, exp := range a.codes {
				oldest = min(oldest, exp)
			}
			wait := time.Unix(oldest, 0).Sub(now)
			return 0, &fullError{RetryAfter: min(max(wait, time.Second), time.Hour), account: true}
		}
		return over, nil
	}
	k, full := ends()
	if full != nil {
		return full
	}
	if err := l.room(n-k, now); err != nil {
		return err
	}
	k, _ = ends() // the sweep in room may have made room in the account
	a := l.accounts[acct]
	for range k {
		l.drop(a.families[0]) // ended for good (rule 3)
	}
	return nil
}

func (l *ledger) accountOf(acct string) *account {
	a := l.accounts[acct]
	if a == nil {
		a = &account{}
		l.accounts[acct] = a
	}
	return a
}

// start records a family as its account's most recently used.
func (l *ledger) start(fam, acct string, next uint32, exp time.Time) {
	l.families[fam] = &family{next: next, account: acct, expires: exp.Unix()}
	a := l.accountOf(acct)
	a.families = append(a.families, fam)
}

// touch moves fam to the end of its account's list (most recently used).
func (l *ledger) touch(fam, acct string) {
	fams := l.accounts[acct].families
	for i, f := range fams {
		if f == fam {
			copy(fams[i:], fams[i+1:])
			fams[len(fams)-1] = fam
			return
		}
	}
}

// drop forgets family fam: it has expired, or it ends (rule 3).
func (l *ledger) drop(fam string) {
	f, ok := l.families[fam]
	if !ok {
		return
	}
	delete(l.families, fam)
	a := l.accounts[f.account]
	for i, x := range a.families {
		if x == fam {
			a.families = append(a.families[:i], a.families[i+1:]...)
			break
		}
	}
	if a.held() == 0 {
		delete(l.accounts, f.account)
	}
}

// room makes space for n entries by forgetting expired ones (a full sweep,
// at most once a second so that refused requests cannot make the server
// sweep on every call); it never forgets a live one.
func (l *ledger) room(n int, now time.Time) error {
	if len(l.used)+len(l.families)+n <= l.max {
		return nil
	}
	if !now.Before(l.nextSweep) {
		l.nextSweep = now.Add(time.Second)
		t := now.Unix()
		l.soonest = 0
		soon := func(exp int64) {
			if l.soonest == 0 || exp < l.soonest {
				l.soonest = exp
			}
		}
		for id, u := range l.used {
			if t >= u.expires {
				delete(l.used, id)
			} else {
				soon(u.expires)
			}
		}
		for id, f := range l.families {
			if t >= f.expires {
				l.drop(id)
			} else {
				soon(f.expires)
			}
		}
		for id, a := range l.accounts {
			if a.dropExpiredCodes(t); a.held() == 0 {
				delete(l.accounts, id)
			}
		}
		if len(l.used)+len(l.families)+n <= l.max {
			return nil
		}
	}
	wait := time.Hour
	if l.soonest != 0 {
		wait = time.Unix(l.soonest, 0).Sub(now)
	}
	return &fullError{RetryAfter: min(max(wait, time.Second), time.Hour)}
}
