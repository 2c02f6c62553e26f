package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

// ledger is the authorization server's only memory of users, kept in a
// memory.Store: this process's own (the default, for one replica) or Redis
// (REDIS_URL: one memory for every replica). Its rules, each tested in
// ledger_test.go against both stores:
//
//  1. Single use. A code is redeemed once: it starts the sign-in (the
//     family of refresh tokens) derived from it. One that comes back is
//     refused and revokes the sign-in it started (RFC 6749 §4.1.2), and
//     is known as used until it expires even when that sign-in has ended.
//     The state of a provider round trip is used once in the same way
//     (once).
//  2. Refresh generations. Each sign-in has the generation its next
//     refresh must present. An older one is a reused token: the family is
//     revoked, so a stolen token and the one it was stolen from both stop
//     (OAuth 2.1 §4.3.1). Refreshes add nothing: memory grows with
//     sign-ins, not with refreshes.
//  3. Ending is for good. Every refresh token names the memory that
//     recorded its family (Grant.Ledger: the memory's id), and the memory
//     keeps every family it recorded until its newest token would expire.
//     So a family that a token of this memory names and the memory no
//     longer holds was ended here: refused. An ended sign-in thus takes no
//     room at all. With Redis the id is the server's own, kept there: a
//     Redis that lost its data (a flush, a restart without persistence)
//     has a new one, and its sign-ins are adopted once more (rule 6)
//     rather than all taken for ended.
//  4. Per account. One account holds at most perAccount entries: its live
//     sign-ins and the codes it redeemed that have not expired. A new
//     sign-in ends the account's least recently refreshed ones to make
//     room (rule 3: they stay ended); when the account's codes alone fill
//     it, the new sign-in waits until the oldest expires (a minute at
//     most). Only someone who can sign in as the account can cause
//     either, and no account can take more than its share.
//  5. Fails closed. When the memory cannot take a new entry (this
//     process's holds max live ones; Redis is full under noeviction,
//     slow or unreachable), a new code, state or unknown family is
//     refused with a temporary error (503) rather than anything live
//     being forgotten: forgetting would let a used token be used again.
//     Nothing is issued meanwhile.
//  6. Other memories. A family this memory does not hold, whose token
//     names another memory (another replica's, where replicas do not
//     share one; this process's before a restart), is accepted at the
//     generation its token carries and remembered from then on; so is a
//     token newer than the generation the memory holds. Generations only
//     grow, so a token a memory has not seen is a newer one: replicas that
//     do not share a memory never refuse each other's refreshes; and they
//     do not know what another one redeemed, revoked or ended
//     (docs/scaling.md).
type ledger struct {
	states     memory.Once
	families   memory.Generations
	perAccount int
}

var (
	errCodeUsed  = errors.New("the authorization code has already been used; the tokens issued for it are revoked")
	errReused    = errors.New("the refresh token has already been used (each refresh returns a new one); every token of this sign-in is now revoked: sign in again")
	errRevoked   = errors.New("this sign-in was revoked because one of its refresh tokens was used twice: sign in again")
	errEnded     = errors.New("this sign-in has ended (the account signed in from more clients than this server keeps, and this one was used least recently): sign in again")
	errStateUsed = errors.New("this sign-in link has already been used")
)

// laterError says the ledger cannot decide now: its memory (or the
// account's share of it) is full, or the shared memory does not answer.
// Nothing was recorded or issued; the request may be made again after
// RetryAfter.
type laterError struct {
	RetryAfter time.Duration
	account    bool // the account's share is full
	down       bool // the shared memory (Redis) did not answer
	err        error
}

func (e *laterError) Error() string {
	switch {
	case e.down:
		return "the sign-in memory this server shares with its replicas does not answer just now, so nothing was issued; try again in a few seconds"
	case e.account:
		return "this account has signed in too often in the last minute to take another sign-in now; try again later"
	}
	return "the server is handling too many sign-ins to take another now; try again later"
}

func (e *laterError) Unwrap() error { return e.err }

// page is the sentence of the sign-in pages.
func (e *laterError) page() string {
	if e.down {
		return "This server cannot check sign-ins just now (its shared memory does not answer). Wait a few seconds and start again."
	}
	return "This server is handling too many sign-ins just now. Wait a minute and start again."
}

func newLedger(s memory.Store, maxEntries, perAccount int) *ledger {
	return &ledger{
		states:     s.Once("oauth.states", memory.Bounds{Max: maxEntries}),
		families:   s.Generations("oauth.families", memory.Bounds{Max: maxEntries}),
		perAccount: max(perAccount, 2),
	}
}

// later turns a store's refusal into a laterError; other errors (a caller
// gone) pass.
func later(err error) error {
	d, ok := memory.RetryAfter(err)
	if !ok {
		return err
	}
	var full *memory.FullError
	return &laterError{RetryAfter: d, account: errors.As(err, &full) && full.Scope, down: errors.Is(err, memory.ErrUnavailable), err: err}
}

// once uses id (a provider state, valid until exp) once: errStateUsed when
// it was used before.
func (l *ledger) once(ctx context.Context, id string, exp time.Time) error {
	first, err := l.states.Use(ctx, "", id, exp)
	switch {
	case err != nil:
		return later(err)
	case !first:
		return errStateUsed
	}
	return nil
}

// familyOf is the sign-in a code starts: derived from the code, so that a
// code that comes back names the sign-in it started.
func familyOf(codeID string) string {
	sum := sha256.Sum256([]byte("mailbox-mcp sign-in of code\x00" + codeID))
	return hex.EncodeToString(sum[:16])
}

// exchange redeems code (valid until codeExp) for account, starting its
// sign-in (its first refresh token valid until famExp): the sign-in's
// family and the memory's id for its tokens. Nothing is recorded, and
// nothing ended, unless both can be.
func (l *ledger) exchange(ctx context.Context, code string, codeExp time.Time, account string, famExp time.Time) (family, id string, err error) {
	fam := familyOf(code)
	st, err := l.families.Start(ctx, account, fam, codeExp, famExp, l.perAccount)
	switch {
	case err != nil:
		return "", "", later(err)
	case st.Replayed:
		return "", "", errCodeUsed
	}
	return fam, st.ID, nil
}

// refresh checks generation gen of family fam (of account), named by a
// token that memory origin recorded, and records that the next refresh
// must present gen+1, until newExp. It returns the memory's id for the
// next token.
func (l *ledger) refresh(ctx context.Context, fam string, gen uint32, origin, account string, newExp time.Time) (string, error) {
	st, err := l.families.Advance(ctx, account, fam, gen, origin, newExp, l.perAccount)
	if err != nil {
		return "", later(err)
	}
	switch st.Outcome {
	case memory.Reused:
		return "", errReused
	case memory.Revoked:
		return "", errRevoked
	case memory.Evicted:
		return "", errEnded // rule 3
	}
	return st.ID, nil
}
