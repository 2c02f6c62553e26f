// Package memory owns the gateway's shared memories: what makes a thing
// single-use (an approval's nonce, an authorization code, a refresh
// token's generation) and what limits (rate buckets, login back-off
// counts, work in progress). Each is a small interface with two stores:
// Local, this process's own memory (bounded; the default for one
// replica), and Redis (or Valkey), one memory for every replica that
// shares the server (REDIS_URL).
//
// The packages that need a memory (oauth, approval, guard) name it and
// use it; they never see which store answers. What a store cannot do is
// explicit: a Local memory that is full answers a *FullError (it never
// forgets a live entry to make room where single use depends on it), and
// a Redis store that cannot answer within its timeout answers an error
// that wraps ErrUnavailable. Single-use memories (Once, Generations)
// always fail closed; limits (Counter, Bucket, Slots) fail as the
// operator chose (FailClosed, or FailOpen: this replica's own memory
// stands in until Redis answers again).
//
// Nothing it sends to Redis is usable by someone reading a dump: every
// key is an HMAC of its identifiers under a key derived from
// ENCRYPTION_KEY, values are counts, times and flags. It knows nothing of
// tokens, mail or HTTP.
package memory

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Once remembers that something was used, until it expires.
type Once interface {
	// Use records id (in scope) as used until exp and reports whether
	// this was its first use: false means it was used before and has not
	// expired, and nothing changes.
	Use(ctx context.Context, scope, id string, exp time.Time) (first bool, err error)
	// Seen reports whether id (in scope) is recorded as used and not
	// expired. It changes nothing.
	Seen(ctx context.Context, scope, id string) (bool, error)
}

// Counter keeps counts that expire: failures, proofs, deadlines.
// A count is never negative: a key whose count falls to 0 is forgotten.
type Counter interface {
	// Add adds delta to key's count and returns the count after it; the
	// key then lives ttl from now (ttl must be positive).
	Add(ctx context.Context, key string, delta int64, ttl time.Duration) (int64, error)
	// Raise sets key's count to v when v is greater (a deadline that only
	// moves later), returns the count after it, and makes the key live
	// ttl from now.
	Raise(ctx context.Context, key string, v int64, ttl time.Duration) (int64, error)
	// Get returns the counts of keys, 0 for a key that is not there.
	Get(ctx context.Context, keys ...string) ([]int64, error)
	// Delete forgets keys.
	Delete(ctx context.Context, keys ...string) error
}

// Rate is a token bucket's rule: Burst tokens at most, refilled at
// PerMinute tokens a minute.
type Rate struct {
	PerMinute float64
	Burst     int
}

// Bucket is a set of token buckets, one per key.
type Bucket interface {
	// Take takes one token from key's bucket and returns 0, or, when the
	// bucket is empty, takes nothing and returns how long until a token
	// is there.
	Take(ctx context.Context, key string, r Rate) (wait time.Duration, err error)
}

// Taken is the answer of Slots.Take.
type Taken struct {
	OK    bool          // the member holds a slot (now, or already)
	Count int           // the scope's members after the call
	Retry time.Duration // when refused: until the scope's soonest member expires
}

// Slots are capped sets of members that expire one by one: pending
// approvals of an account, logins in progress. A member that is never
// released (its replica died) frees its slot when it expires.
type Slots interface {
	// Take gives member a slot in scope until exp, unless scope already
	// has limit live members; a member that holds one keeps it and gets
	// the later of its expiries.
	Take(ctx context.Context, scope, member string, exp time.Time, limit int) (Taken, error)
	// Release frees member's slot.
	Release(ctx context.Context, scope, member string) error
	// Count is the number of scope's live members.
	Count(ctx context.Context, scope string) (int, error)
}

// Outcome is what Generations.Advance found and did.
type Outcome int

// Outcomes of Generations.Advance. Advanced, Adopted and Ahead accept the
// refresh (Accepted); the others refuse it and change nothing but what
// they say.
const (
	// Advanced: gen was the next generation; the next is now gen+1.
	Advanced Outcome = iota + 1
	// Adopted: the family was unknown and its token names another
	// memory (its family was started where this memory does not reach,
	// or before it lost what it held); it is recorded now with gen+1 as
	// the next generation.
	Adopted
	// Reused: gen is older than the next generation: a used token came
	// back. The family is revoked now.
	Reused
	// Revoked: the family was revoked before (a reuse, or its start
	// replayed); nothing changes.
	Revoked
	// Evicted: the token names this memory, which no longer holds its
	// family: it was ended here to make room for a newer sign-in of its
	// group.
	Evicted
	// Ahead: gen is newer than the next generation this memory holds:
	// another replica's refreshes where replicas do not share the
	// memory, or a write a shared one lost. Generations only grow and a
	// token cannot be forged, so it is a newer token: the next is now
	// gen+1.
	Ahead
)

// Accepted says whether the refresh may go on.
func (o Outcome) Accepted() bool { return o == Advanced || o == Adopted || o == Ahead }

func (o Outcome) String() string {
	switch o {
	case Advanced:
		return "advanced"
	case Adopted:
		return "adopted"
	case Reused:
		return "reused"
	case Revoked:
		return "revoked"
	case Evicted:
		return "evicted"
	case Ahead:
		return "ahead"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Started is what Generations.Start did.
type Started struct {
	// ID is the memory's identity, for the family's tokens to name.
	ID string
	// Replayed: the family had been started before (its start came back,
	// as a code redeemed twice): nothing started, and the family, if the
	// memory still holds it, is revoked now.
	Replayed bool
	// Ended is how many of the group's families were ended to make room.
	Ended int
}

// Step is what Generations.Advance found and did.
type Step struct {
	Outcome Outcome
	// ID is the memory's identity, for the next token to name.
	ID string
}

// Generations remembers, for each family of refresh tokens (the tokens
// that descend from one sign-in), the generation its next refresh must
// present, and whether the family was revoked. Every method is one
// atomic step, so two replicas refreshing one family at once accept only
// one.
//
// Families belong to a group (an account), which holds at most limit
// entries: its families and its recent starts (each counting until its
// startExp: the lifetime of the code that started it). A new family ends
// the group's least recently refreshed ones to make room; when the
// group's starts alone fill it, the new family is refused with a
// *FullError of the scope until the oldest start expires. So one group
// never holds more than limit, however fast it signs in.
//
// An ended family takes no room at all. The memory has an ID, a new one
// whenever it begins empty (a new process's Local store, a Redis that
// lost its data), which Start and Advance return for the family's tokens
// to carry. A token that names this memory's ID, of a family it no longer
// holds, was ended here (Evicted); one that names another ID is adopted.
// A flushed Redis thus forgets who was ended (each such sign-in comes
// back once) rather than ending every sign-in.
type Generations interface {
	// Start records family, new, in group: its next generation 0, alive
	// until exp; its start counts in the group until startExp. A family
	// starts once: a second Start of it, while the memory holds it or its
	// start, is a replay (Started.Replayed). A caller that derives family
	// from the one-time thing that starts it (a code) thus learns of the
	// thing's reuse, and ends what it started.
	Start(ctx context.Context, group, family string, startExp, exp time.Time, limit int) (Started, error)
	// Advance checks that gen is family's next generation and makes the
	// next one gen+1, the family then alive until exp at least. id is the
	// memory ID the token names. An unknown family with another id is
	// adopted as if started with gen (making room in its group as Start
	// does).
	Advance(ctx context.Context, group, family string, gen uint32, id string, exp time.Time, limit int) (Step, error)
}

// Bounds cap a Local memory (a Redis store ignores them: the server's
// maxmemory is the operator's bound). Zero means DefaultMax entries in
// all and no cap per scope.
type Bounds struct {
	Max      int // entries in all
	PerScope int // entries of one scope (Once, Slots) or group (Generations)
}

// DefaultMax is the number of entries of a memory whose Bounds.Max is 0.
const DefaultMax = 100_000

// Store makes named memories. A name ([a-z0-9.-], up to 32 characters)
// says whose memory it is ("approval.used", "oauth.states"): the same
// name on two replicas is the same memory when the store is shared.
type Store interface {
	Once(name string, b Bounds) Once
	Counter(name string, b Bounds) Counter
	Bucket(name string, b Bounds) Bucket
	Slots(name string, b Bounds) Slots
	Generations(name string, b Bounds) Generations
	// Status says whether the store answers (for /health and metrics).
	Status() Status
	// Close stops the store's background work and closes its connections.
	Close() error
}

// Status is a store's health.
type Status struct {
	Shared bool      // Redis: one memory for all replicas
	Up     bool      // it answers (always true for Local)
	Since  time.Time // when Up last changed (zero: never)
	Cause  string    // why it is down: a class, never an address or secret
}

// ErrUnavailable is wrapped by every error of a store that could not
// answer in time (a shared store unreachable, slow, or refusing): the
// decision it was asked for was not made.
var ErrUnavailable = errors.New("the shared memory (Redis) is unavailable")

// FullError says a memory is full of live entries: the decision is
// refused rather than made by forgetting one. Scope says it is one
// scope's (or group's) share that is full, not the whole memory: a Local
// memory's Bounds.PerScope, or a group of Generations whose starts fill
// it (in either store).
type FullError struct {
	RetryAfter time.Duration
	Scope      bool
}

func (e *FullError) Error() string {
	what := "the gateway's memory for this"
	if e.Scope {
		what = "this account's share of the gateway's memory for this"
	}
	return fmt.Sprintf("%s is full; retry in %s", what, e.RetryAfter.Round(time.Second))
}

// unavailableRetry is the Retry-After of an ErrUnavailable: the store
// re-checks the server every quarter second, so it is back soon after
// the server is.
const unavailableRetry = 5 * time.Second

// RetryAfter reports whether err is a store's temporary refusal (full or
// unavailable) and when to retry: what a caller turns into 503 with
// Retry-After.
func RetryAfter(err error) (time.Duration, bool) {
	var full *FullError
	switch {
	case errors.As(err, &full):
		return full.RetryAfter, true
	case errors.Is(err, ErrUnavailable):
		return unavailableRetry, true
	}
	return 0, false
}

// FailPolicy is what a limit does when the shared store cannot answer.
type FailPolicy int

const (
	// FailClosed refuses: the limit's answer is an ErrUnavailable error.
	FailClosed FailPolicy = iota
	// FailOpen lets this replica's own memory answer until the shared
	// store is back: each replica then allows what the operator set.
	FailOpen
)

// ParseFailPolicy reads REDIS_FAIL's value.
func ParseFailPolicy(s string) (FailPolicy, error) {
	switch s {
	case "closed":
		return FailClosed, nil
	case "open":
		return FailOpen, nil
	}
	return 0, fmt.Errorf("expected closed or open, got %q", s)
}

// Observer learns how each operation of a shared store ended, for
// metrics: its name (one of Ops), its result ("ok", or one of Results)
// and how long it took (0 for ResultDown: not tried). It is never told
// keys or values.
type Observer interface {
	ObserveMemory(op, result string, took time.Duration)
}

// Ops are the operation names an Observer is told.
var Ops = []string{
	"once.use", "once.seen", "counter.add", "counter.raise", "counter.get", "counter.delete",
	"bucket.take", "slots.take", "slots.release", "slots.count",
	"generations.start", "generations.advance", "ping",
}

// Results are the results an Observer is told besides "ok".
var Results = []string{ResultTimeout, ResultUnreachable, ResultRefused, ResultDown}

// validName reports whether a memory's name is usable as a key segment.
func validName(name string) bool {
	if name == "" || len(name) > 32 {
		return false
	}
	for _, r := range name {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

func mustName(name string) {
	if !validName(name) {
		panic(fmt.Sprintf("memory: invalid name %q: [a-z0-9.-], up to 32 characters", name))
	}
}

// errTTL is a programming error: a Counter operation without a lifetime
// would make a key that never goes away.
var errTTL = errors.New("memory: ttl must be positive")
