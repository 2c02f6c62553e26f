package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Local is this process's own memory: the default for one replica, and
// what every memory was before REDIS_URL. Each memory is bounded
// (Bounds); a single-use memory (Once, Generations) or a capped set
// (Slots) that is full of live entries refuses with *FullError rather
// than forget one, while a Counter or a Bucket that is full forgets its
// soonest-expiring entries (a limit can only loosen by it, never refuse
// someone else).
type Local struct {
	now func() time.Time

	mu       sync.Mutex
	memories map[string]any // kind + name -> memory, so a name is one memory
}

// NewLocal makes a Local store; now is its clock (nil: time.Now).
func NewLocal(now func() time.Time) *Local {
	if now == nil {
		now = time.Now
	}
	return &Local{now: now, memories: map[string]any{}}
}

func (l *Local) Status() Status { return Status{Up: true} }
func (l *Local) Close() error   { return nil }

// Entries is how many entries the memories named name hold (expired ones
// not yet forgotten included): what their Bounds cap.
func (l *Local) Entries(name string) int {
	l.mu.Lock()
	var ms []interface{ entries() int }
	for k, m := range l.memories {
		if _, n, _ := strings.Cut(k, ":"); n == name {
			ms = append(ms, m.(interface{ entries() int }))
		}
	}
	l.mu.Unlock()
	n := 0
	for _, m := range ms {
		n += m.entries()
	}
	return n
}

func (s *scoped) entries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

func (c *localCounter) entries() int { return c.t.len() }
func (b *localBucket) entries() int  { return b.t.len() }

func (t *table[V]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.items)
}

// named returns the memory of kind and name, made by mk the first time.
func named[T any](l *Local, kind, name string, mk func() T) T {
	mustName(name)
	l.mu.Lock()
	defer l.mu.Unlock()
	k := kind + ":" + name
	if m, ok := l.memories[k]; ok {
		return m.(T)
	}
	m := mk()
	l.memories[k] = m
	return m
}

func (b Bounds) max() int {
	if b.Max <= 0 {
		return DefaultMax
	}
	return b.Max
}

// retryAt is how long until t, at least a second and at most an hour:
// a Retry-After for people.
func retryAt(t, now time.Time) time.Duration {
	if t.IsZero() {
		return time.Hour
	}
	return min(max(t.Sub(now), time.Second), time.Hour)
}

// --- Once and Slots: entries by scope, each with its expiry ---------------------

// scoped holds entries by scope, each until its expiry, bounded in all by
// max. Its caller holds mu.
type scoped struct {
	mu        sync.Mutex
	max       int
	scopes    map[string]map[string]time.Time // scope -> id -> expiry
	total     int
	nextSweep time.Time
	soonest   time.Time // the earliest expiry the last full sweep kept
}

func newScoped(max int) scoped { return scoped{max: max, scopes: map[string]map[string]time.Time{}} }

func (s *scoped) add(scope, id string, exp time.Time) {
	if s.scopes[scope] == nil {
		s.scopes[scope] = map[string]time.Time{}
	}
	s.scopes[scope][id] = exp
	s.total++
}

func (s *scoped) forget(scope, id string) {
	delete(s.scopes[scope], id)
	s.total--
	if len(s.scopes[scope]) == 0 {
		delete(s.scopes, scope)
	}
}

// sweepScope forgets scope's expired entries and returns the soonest
// expiry of those left.
func (s *scoped) sweepScope(scope string, now time.Time) time.Time {
	var soonest time.Time
	for id, e := range s.scopes[scope] {
		if !now.Before(e) {
			s.forget(scope, id)
		} else if soonest.IsZero() || e.Before(soonest) {
			soonest = e
		}
	}
	return soonest
}

// room makes space for one more entry by forgetting expired ones (a full
// sweep at most once a second, so that refused requests cannot make every
// call sweep); it never forgets a live one, and says when to retry.
func (s *scoped) room(now time.Time) error {
	if s.total < s.max {
		return nil
	}
	if !now.Before(s.nextSweep) {
		s.nextSweep = now.Add(time.Second)
		s.soonest = time.Time{}
		for sc := range s.scopes {
			if t := s.sweepScope(sc, now); !t.IsZero() && (s.soonest.IsZero() || t.Before(s.soonest)) {
				s.soonest = t
			}
		}
	}
	if s.total < s.max {
		return nil
	}
	return &FullError{RetryAfter: retryAt(s.soonest, now)}
}

func (l *Local) Once(name string, b Bounds) Once {
	return named(l, "once", name, func() *localOnce {
		return &localOnce{now: l.now, perScope: b.PerScope, scoped: newScoped(b.max())}
	})
}

type localOnce struct {
	now      func() time.Time
	perScope int
	scoped
}

func (o *localOnce) Use(_ context.Context, scope, id string, exp time.Time) (bool, error) {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if e, ok := o.scopes[scope][id]; ok {
		if now.Before(e) {
			return false, nil
		}
		o.forget(scope, id)
	}
	if !now.Before(exp) {
		return true, nil // already expired: there is nothing to remember
	}
	if o.perScope > 0 && len(o.scopes[scope]) >= o.perScope {
		soonest := o.sweepScope(scope, now)
		if len(o.scopes[scope]) >= o.perScope {
			return false, &FullError{RetryAfter: retryAt(soonest, now), Scope: true}
		}
	}
	if err := o.room(now); err != nil {
		return false, err
	}
	o.add(scope, id, exp)
	return true, nil
}

func (o *localOnce) Seen(_ context.Context, scope, id string) (bool, error) {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.scopes[scope][id]
	return ok && now.Before(e), nil
}

// --- Counter --------------------------------------------------------------------

func (l *Local) Counter(name string, b Bounds) Counter {
	return named(l, "counter", name, func() *localCounter {
		return &localCounter{now: l.now, t: newTable[int64](b.max())}
	})
}

type localCounter struct {
	now func() time.Time
	t   *table[int64]
}

func (c *localCounter) Add(_ context.Context, key string, delta int64, ttl time.Duration) (int64, error) {
	return c.update(key, ttl, func(v int64) int64 { return v + delta })
}

func (c *localCounter) Raise(_ context.Context, key string, v int64, ttl time.Duration) (int64, error) {
	return c.update(key, ttl, func(old int64) int64 { return max(old, v) })
}

// update sets key's count to next of its count (0 when absent) and its
// lifetime to ttl; a count of 0 or less is no entry.
func (c *localCounter) update(key string, ttl time.Duration, next func(int64) int64) (int64, error) {
	if ttl <= 0 {
		return 0, errTTL
	}
	now := c.now()
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	e := c.t.lookup(key, now)
	var old int64
	if e != nil {
		old = e.v
	}
	n := next(old)
	if n <= 0 {
		delete(c.t.items, key)
		return 0, nil
	}
	if e == nil {
		e = c.t.insert(key, 0, now)
	}
	e.v, e.expires = n, now.Add(ttl)
	return n, nil
}

func (c *localCounter) Get(_ context.Context, keys ...string) ([]int64, error) {
	now := c.now()
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	out := make([]int64, len(keys))
	for i, k := range keys {
		if e := c.t.lookup(k, now); e != nil {
			out[i] = e.v
		}
	}
	return out, nil
}

func (c *localCounter) Delete(_ context.Context, keys ...string) error {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	for _, k := range keys {
		delete(c.t.items, k)
	}
	return nil
}

// --- Bucket -------------------------------------------------------------------------

func (l *Local) Bucket(name string, b Bounds) Bucket {
	return named(l, "bucket", name, func() *localBucket {
		return &localBucket{now: l.now, t: newTable[*rate.Limiter](b.max())}
	})
}

type localBucket struct {
	now func() time.Time
	t   *table[*rate.Limiter]
}

func (b *localBucket) Take(_ context.Context, key string, r Rate) (time.Duration, error) {
	if r.PerMinute <= 0 {
		return 0, nil
	}
	burst := max(r.Burst, 1)
	now := b.now()
	// A bucket refills completely in burst/rate; an entry idle that long
	// is the same as a new one, so it may expire then.
	full := time.Duration(float64(burst) / r.PerMinute * float64(time.Minute))
	b.t.mu.Lock()
	e := b.t.lookup(key, now)
	if e == nil {
		e = b.t.insert(key, rate.NewLimiter(rate.Limit(r.PerMinute/60), burst), now)
	}
	e.expires = now.Add(full)
	lim := e.v
	b.t.mu.Unlock()
	if lim.Limit() != rate.Limit(r.PerMinute/60) || lim.Burst() != burst {
		lim.SetLimitAt(now, rate.Limit(r.PerMinute/60))
		lim.SetBurstAt(now, burst)
	}
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return time.Minute, nil
	}
	wait := res.DelayFrom(now)
	if wait > 0 {
		res.CancelAt(now) // a refused request takes nothing
	}
	return wait, nil
}

// --- Slots ------------------------------------------------------------------------------

func (l *Local) Slots(name string, b Bounds) Slots {
	return named(l, "slots", name, func() *localSlots {
		return &localSlots{now: l.now, scoped: newScoped(b.max())}
	})
}

type localSlots struct {
	now func() time.Time
	scoped
}

func (s *localSlots) Take(_ context.Context, scope, member string, exp time.Time, limit int) (Taken, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	soonest := s.sweepScope(scope, now)
	members := s.scopes[scope]
	if e, ok := members[member]; ok {
		if exp.After(e) {
			members[member] = exp
		}
		return Taken{OK: true, Count: len(members)}, nil
	}
	if !now.Before(exp) {
		return Taken{Count: len(members)}, nil // a slot that would already be free
	}
	if len(members) >= limit {
		return Taken{Count: len(members), Retry: retryAt(soonest, now)}, nil
	}
	if err := s.room(now); err != nil {
		return Taken{}, err
	}
	s.add(scope, member, exp)
	return Taken{OK: true, Count: len(s.scopes[scope])}, nil
}

func (s *localSlots) Release(_ context.Context, scope, member string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.scopes[scope][member]; ok {
		s.forget(scope, member)
	}
	return nil
}

func (s *localSlots) Count(_ context.Context, scope string) (int, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepScope(scope, now)
	return len(s.scopes[scope]), nil
}

// --- Generations ----------------------------------------------------------------------

func (l *Local) Generations(name string, b Bounds) Generations {
	return named(l, "generations", name, func() *localGenerations {
		return &localGenerations{now: l.now, b: b, id: newID(), families: map[string]*family{},
			starts: map[string]time.Time{}, groups: map[string]*group{}}
	})
}

type family struct {
	next    uint32
	revoked bool
	group   string
	expires time.Time
}

// group is what one group holds: its families, least recently refreshed
// first, and its starts that may still count.
type group struct {
	families []string
	starts   []start
}

type start struct {
	family  string
	expires time.Time
}

func (g *group) held() int { return len(g.families) + len(g.starts) }

type localGenerations struct {
	now       func() time.Time
	b         Bounds
	id        string // this memory's identity: new with the process
	mu        sync.Mutex
	families  map[string]*family
	starts    map[string]time.Time // family -> until when its start is remembered and counts
	groups    map[string]*group
	nextSweep time.Time
	soonest   time.Time
}

func (g *localGenerations) Start(_ context.Context, grp, fam string, startExp, exp time.Time, limit int) (Started, error) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.lookup(fam, now)
	if e, ok := g.starts[fam]; f != nil || ok && now.Before(e) {
		if f != nil {
			f.revoked = true
		}
		return Started{ID: g.id, Replayed: true}, nil
	}
	n := 1 // the family, and its start while that counts
	if now.Before(startExp) {
		n = 2
	}
	ended, err := g.makeRoom(grp, n, limit, now)
	if err != nil {
		return Started{ID: g.id}, err
	}
	gr := g.groupOf(grp)
	if now.Before(startExp) {
		g.starts[fam] = startExp
		gr.starts = append(gr.starts, start{fam, startExp})
	}
	g.families[fam] = &family{group: grp, expires: exp}
	gr.families = append(gr.families, fam)
	return Started{ID: g.id, Ended: ended}, nil
}

func (g *localGenerations) Advance(_ context.Context, grp, fam string, gen uint32, id string, exp time.Time, limit int) (Step, error) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.lookup(fam, now)
	if f == nil {
		if id == g.id {
			return Step{Evicted, g.id}, nil
		}
		if _, err := g.makeRoom(grp, 1, limit, now); err != nil {
			return Step{ID: g.id}, err
		}
		g.families[fam] = &family{next: gen + 1, group: grp, expires: exp}
		gr := g.groupOf(grp)
		gr.families = append(gr.families, fam)
		return Step{Adopted, g.id}, nil
	}
	switch {
	case f.revoked:
		return Step{Revoked, g.id}, nil
	case gen < f.next:
		f.revoked = true
		return Step{Reused, g.id}, nil
	}
	out := Advanced
	if gen > f.next {
		out = Ahead
	}
	f.next = gen + 1
	if exp.After(f.expires) {
		f.expires = exp
	}
	g.touch(fam, f.group)
	return Step{out, g.id}, nil
}

// lookup returns fam's live entry, forgetting an expired one.
func (g *localGenerations) lookup(fam string, now time.Time) *family {
	f, ok := g.families[fam]
	if !ok {
		return nil
	}
	if !now.Before(f.expires) {
		g.drop(fam)
		return nil
	}
	return f
}

func (g *localGenerations) groupOf(name string) *group {
	gr := g.groups[name]
	if gr == nil {
		gr = &group{}
		g.groups[name] = gr
	}
	return gr
}

// makeRoom makes room for n new entries of group grp: its expired starts
// go, then its least recently refreshed families end (dropped: a token
// naming this memory then finds them Evicted), and the whole memory must
// have room for what remains. It returns how many families it ended; on
// an error nothing has ended.
func (g *localGenerations) makeRoom(grp string, n, limit int, now time.Time) (int, error) {
	over := func() (int, error) {
		gr := g.groups[grp]
		if gr == nil || limit <= 0 {
			return 0, nil
		}
		g.dropExpiredStarts(gr, now)
		k := gr.held() + n - limit
		if k <= 0 {
			return 0, nil
		}
		if k > len(gr.families) {
			// Its starts alone fill its share: wait for the oldest.
			var oldest time.Time
			for _, st := range gr.starts {
				if oldest.IsZero() || st.expires.Before(oldest) {
					oldest = st.expires
				}
			}
			return 0, &FullError{RetryAfter: retryAt(oldest, now), Scope: true}
		}
		return k, nil
	}
	k, err := over()
	if err != nil {
		return 0, err
	}
	if err := g.room(n-k, now); err != nil {
		return 0, err
	}
	k, _ = over() // the sweep in room may have made room in the group
	ended := 0
	for range k {
		old := g.groups[grp].families[0]
		if g.lookup(old, now) != nil {
			g.drop(old)
			ended++
		}
	}
	return ended, nil
}

// dropExpiredStarts forgets gr's starts that no longer count.
func (g *localGenerations) dropExpiredStarts(gr *group, now time.Time) {
	kept := gr.starts[:0]
	for _, st := range gr.starts {
		switch {
		case now.Before(st.expires):
			kept = append(kept, st)
		case g.starts[st.family].Equal(st.expires): // not started again since
			delete(g.starts, st.family)
		}
	}
	clear(gr.starts[len(kept):])
	gr.starts = kept
}

// drop forgets family fam: it has expired, or it ends.
func (g *localGenerations) drop(fam string) {
	f, ok := g.families[fam]
	if !ok {
		return
	}
	delete(g.families, fam)
	gr := g.groups[f.group]
	if gr == nil {
		return
	}
	for i, x := range gr.families {
		if x == fam {
			gr.families = append(gr.families[:i], gr.families[i+1:]...)
			break
		}
	}
	if gr.held() == 0 {
		delete(g.groups, f.group)
	}
}

// touch moves fam to the end of its group (most recently refreshed).
func (g *localGenerations) touch(fam, grp string) {
	fams := g.groups[grp].families
	for i, f := range fams {
		if f == fam {
			copy(fams[i:], fams[i+1:])
			fams[len(fams)-1] = fam
			return
		}
	}
}

// size is what the memory holds: families and starts. Its caller holds
// mu.
func (g *localGenerations) size() int { return len(g.families) + len(g.starts) }

func (g *localGenerations) entries() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.size()
}

// room makes space for n entries by forgetting expired ones (a full
// sweep, at most once a second, so that refused requests cannot make
// every call sweep); it never forgets a live one.
func (g *localGenerations) room(n int, now time.Time) error {
	if g.size()+n <= g.b.max() {
		return nil
	}
	if !now.Before(g.nextSweep) {
		g.nextSweep = now.Add(time.Second)
		g.soonest = time.Time{}
		soon := func(t time.Time) {
			if g.soonest.IsZero() || t.Before(g.soonest) {
				g.soonest = t
			}
		}
		for id, f := range g.families {
			if !now.Before(f.expires) {
				g.drop(id)
			} else {
				soon(f.expires)
			}
		}
		for name, gr := range g.groups {
			if g.dropExpiredStarts(gr, now); gr.held() == 0 {
				delete(g.groups, name)
			}
			for _, st := range gr.starts {
				soon(st.expires)
			}
		}
		if g.size()+n <= g.b.max() {
			return nil
		}
	}
	return &FullError{RetryAfter: retryAt(g.soonest, now)}
}

// newID is a memory's identity: 64 random bits, hex.
func newID() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic("memory: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// --- the table of Counter and Bucket -------------------------------------------------------

// table is a map with per-entry expiry and a cap on its size. When full
// it drops expired entries, then the soonest-expiring of a sample: no
// input can make it grow without bound.
type table[V any] struct {
	mu    sync.Mutex
	max   int
	items map[string]*entry[V]
}

type entry[V any] struct {
	v       V
	expires time.Time
}

func newTable[V any](max int) *table[V] {
	return &table[V]{max: max, items: map[string]*entry[V]{}}
}

// lookup returns the live entry for key, dropping an expired one.
func (t *table[V]) lookup(key string, now time.Time) *entry[V] {
	e, ok := t.items[key]
	if !ok {
		return nil
	}
	if !now.Before(e.expires) {
		delete(t.items, key)
		return nil
	}
	return e
}

func (t *table[V]) insert(key string, v V, now time.Time) *entry[V] {
	if len(t.items) >= t.max {
		t.makeRoom(now)
	}
	e := &entry[V]{v: v}
	t.items[key] = e
	return e
}

// makeRoom sweeps expired entries (at most a few thousand per call, so
// one insert never stalls the others for long); if none was found, it
// evicts the entry that expires first among a random sample (Go's map
// order).
func (t *table[V]) makeRoom(now time.Time) {
	const sweep, sample = 4096, 32
	freed, seen := 0, 0
	var oldestKey string
	var oldest time.Time
	for k, e := range t.items {
		if !now.Before(e.expires) {
			delete(t.items, k)
			freed++
		} else if seen < sample && (oldestKey == "" || e.expires.Before(oldest)) {
			oldestKey, oldest = k, e.expires
		}
		seen++
		if seen >= sweep {
			break
		}
	}
	if freed == 0 && oldestKey != "" {
		delete(t.items, oldestKey)
	}
}
