package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
)

// WatchPool adds the IMAP connection pool's figures, read from stats at
// each scrape (the pool is not touched otherwise): connections idle and in
// use, the configured maximum, Gets waiting for a slot, and the pool's
// lifetime counters. waiters, when not nil, reports the long polls in
// progress (each holds a connection of its own outside the pool).
func (m *Metrics) WatchPool(maxConnections int, stats func() pool.Stats, waiters func() int) {
	if m == nil {
		return
	}
	m.reg.MustRegister(&poolCollector{max: maxConnections, stats: stats, waiters: waiters})
}

var (
	poolConnections = prometheus.NewDesc(namespace+"_pool_connections",
		"IMAP connections of the pool by state: idle, or in_use (leased, being checked, dialled or closed).", []string{"state"}, nil)
	poolMax = prometheus.NewDesc(namespace+"_pool_max_connections",
		"The most IMAP connections the pool holds (MAX_POOL_SIZE).", nil, nil)
	poolWaiting = prometheus.NewDesc(namespace+"_pool_waiting",
		"Calls waiting now for a pool slot.", nil, nil)
	poolEvents = prometheus.NewDesc(namespace+"_pool_events_total",
		"Pool events by kind: opened (dialled and logged in), reused (an idle connection served a call), discarded (broken or failed a health check), evicted (closed to make room for another user), expired (idle or lifetime limit), revalidated (closed because its login was too old), waited (a call had to wait for a slot), busy (a call gave up: the pool was full).",
		[]string{"event"}, nil)
	waitersDesc = prometheus.NewDesc(namespace+"_waiters",
		"Long polls waiting now for new mail (each on a connection of its own).", nil, nil)
)

// poolCollector reads the pool's Stats at scrape time.
type poolCollector struct {
	max     int
	stats   func() pool.Stats
	waiters func() int
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolConnections
	ch <- poolMax
	ch <- poolWaiting
	ch <- poolEvents
	if c.waiters != nil {
		ch <- waitersDesc
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	gauge(poolConnections, s.Idle, "idle")
	gauge(poolConnections, s.InUse, "in_use")
	gauge(poolMax, c.max)
	gauge(poolWaiting, s.Waiting)
	for event, n := range map[string]uint64{
		"opened": s.Opened, "reused": s.Reused, "discarded": s.Discarded, "evicted": s.Evicted,
		"expired": s.Expired, "revalidated": s.Revalidated, "waited": s.WaitedTotal, "busy": s.BusyErrors,
	} {
		ch <- prometheus.MustNewConstMetric(poolEvents, prometheus.CounterValue, float64(n), event)
	}
	if c.waiters != nil {
		gauge(waitersDesc, c.waiters())
	}
}
