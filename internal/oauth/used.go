package oauth

import (
	"container/heap"
	"sync"
	"time"
)

// usedSet remembers the ids of codes and refresh tokens this process has
// exchanged, until each would have expired anyway, so that a second use
// is refused. It is memory of this process only: a replica that did not
// see the first use does not know of it (see docs/configuration.md), and
// a restart forgets. It is bounded: when full, the entries closest to
// expiry are forgotten first.
type usedSet struct {
	mu  sync.Mutex
	max int
	ids map[string]time.Time
	exp expiryHeap
}

func newUsedSet(max int) *usedSet { return &usedSet{max: max, ids: map[string]time.Time{}} }

// Use marks id used until expires and reports whether it was unused.
func (u *usedSet) Use(id string, expires, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for len(u.exp) > 0 && (!u.exp[0].at.After(now) || len(u.exp) >= u.max) {
		e := heap.Pop(&u.exp).(entry)
		delete(u.ids, e.id)
	}
	if _, ok := u.ids[id]; ok {
		return false
	}
	u.ids[id] = expires
	heap.Push(&u.exp, entry{id, expires})
	return true
}

type entry struct {
	id string
	at time.Time
}

type expiryHeap []entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
