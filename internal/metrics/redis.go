package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// redisBuckets are the latency buckets of shared-memory operations: a
// loopback or LAN round trip is 0.1-1 ms; the store gives up at
// REDIS_TIMEOUT (200 ms by default).
var redisBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .2, .5, 1}

// redisMetrics are the shared memory's series, made by WatchRedis.
type redisMetrics struct {
	ops, results *labelSet
	calls        *prometheus.CounterVec
	seconds      *prometheus.HistogramVec
}

// WatchRedis adds the shared memory's series (REDIS_URL): operations by
// op and result (ok, or how they failed: timeout, unreachable, refused,
// down = not tried while the server is away), their latency, and
// whether the server answers (read from up at each scrape). ops and
// results are the only values their labels take.
func (m *Metrics) WatchRedis(ops, results []string, up func() bool) {
	if m == nil {
		return
	}
	r := &redisMetrics{ops: newLabelSet(ops...), results: newLabelSet(append(results, "ok")...)}
	r.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "redis_operations_total",
		Help: "Operations on the shared memory (REDIS_URL) by op and result: ok, timeout (no answer within REDIS_TIMEOUT), unreachable (no connection), refused (the server answered an error: out of memory, read-only, wrong password), down (not tried: the server was away).",
	}, []string{"op", "result"})
	r.seconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "redis_operation_duration_seconds",
		Help:    "Duration of the shared memory's operations by op, successful or not (one round trip each).",
		Buckets: redisBuckets,
	}, []string{"op"})
	upGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "redis_up",
		Help: "1 while the shared memory (REDIS_URL) answers, 0 while single-use decisions are refused and limits fail as REDIS_FAIL says.",
	}, func() float64 {
		if up() {
			return 1
		}
		return 0
	})
	m.reg.MustRegister(r.calls, r.seconds, upGauge)
	for _, op := range ops {
		r.calls.WithLabelValues(op, "ok")
		r.seconds.WithLabelValues(op)
	}
	m.redisMu.Lock()
	m.redis = r
	m.redisMu.Unlock()
}

// ObserveMemory records one operation of the shared memory. It makes
// *Metrics a memory.Observer.
func (m *Metrics) ObserveMemory(op, result string, took time.Duration) {
	if m == nil {
		return
	}
	m.redisMu.RLock()
	r := m.redis
	m.redisMu.RUnlock()
	if r == nil {
		return
	}
	op = r.ops.of(op)
	r.calls.WithLabelValues(op, r.results.of(result)).Inc()
	if took > 0 {
		r.seconds.WithLabelValues(op).Observe(took.Seconds())
	}
}
