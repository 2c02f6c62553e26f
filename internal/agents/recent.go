package agents

import (
	"sync"
	"sync/atomic"
	"time"
)

// recent remembers, for a while, that something was done for a key (a
// folder known to exist, an agent's last call recorded), so that it is not
// done again on every call. Past max entries, those older than ttl are
// swept: they would be done again anyway, so the memory holds about what
// the last ttl saw.
type recent struct {
	ttl time.Duration
	max int64
	m   sync.Map // key -> time.Time
	n   atomic.Int64
}

// fresh reports whether k was marked less than ttl before now.
func (r *recent) fresh(k any, now time.Time) bool {
	t, ok := r.m.Load(k)
	return ok && now.Sub(t.(time.Time)) < r.ttl
}

// mark records k at now.
func (r *recent) mark(k any, now time.Time) {
	if _, loaded := r.m.Swap(k, now); loaded || r.n.Add(1) <= r.max {
		return
	}
	r.m.Range(func(key, v any) bool {
		if now.Sub(v.(time.Time)) >= r.ttl && r.m.CompareAndDelete(key, v) {
			r.n.Add(-1)
		}
		return true
	})
}
