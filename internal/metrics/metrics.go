// Package metrics owns the gateway's Prometheus metrics: one private
// registry per gateway (so tests can run many), the collectors, and the
// /metrics handler served on METRICS_ADDR. The other layers report to it
// through nil-safe methods of *Metrics (a nil *Metrics records nothing).
//
// No label ever carries a user, an address, a folder name or a token:
// every label value comes from a fixed set (tool names registered by the
// tool layer, mailerr kind names, failure classes, HTTP status codes,
// protocol and step names), and a value outside its set is recorded as
// "other". It knows nothing of MCP, IMAP or SMTP.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// namespace prefixes every metric of the gateway's own.
const namespace = "mailbox_mcp"

// other is the label value for anything outside a label's fixed set.
const other = "other"

// Buckets of the latency histograms, in seconds. A tool call can take up
// to TOOL_TIMEOUT (60 s by default); a dial or a login a few ms on a LAN,
// seconds to a far or overloaded server.
var (
	callBuckets    = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	connectBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// Metrics is one gateway's metrics. Its methods are safe for concurrent
// use and do nothing on a nil *Metrics.
type Metrics struct {
	reg *prometheus.Registry

	tools       *labelSet // tool names the gateway registered
	toolCalls   *prometheus.CounterVec
	toolSeconds *prometheus.HistogramVec

	dials, logins             *prometheus.CounterVec
	dialSeconds, loginSeconds *prometheus.HistogramVec

	httpResponses *prometheus.CounterVec
	oauthEvents   *prometheus.CounterVec

	redisMu sync.RWMutex
	redis   *redisMetrics // nil until WatchRedis
}

// New makes the metrics of one gateway, version being its build version
// (the mailbox_mcp_build_info series).
func New(version string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), tools: newLabelSet()}
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "tool_calls_total",
		Help: "Tool calls (MCP and the REST mirror) by tool and outcome: ok, or the error kind (bad_input, auth_failed, not_found, busy, timeout, unavailable, internal, ...).",
	}, []string{"tool", "outcome"})
	m.toolSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "tool_call_duration_seconds",
		Help:    "Duration of tool calls by tool, whatever their outcome (long polls last up to their own timeout).",
		Buckets: callBuckets,
	}, []string{"tool"})
	m.dials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "mail_dials_total",
		Help: "Connections opened to the mail servers (TCP connect, and the TLS handshake for implicit TLS) by protocol and result: ok, or the failure class (dns, dial_refused, dial_unreachable, tls, timeout, closed, or an error kind).",
	}, []string{"protocol", "result"})
	m.dialSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "mail_dial_duration_seconds",
		Help:    "Duration of connection attempts to the mail servers by protocol, successful or not.",
		Buckets: connectBuckets,
	}, []string{"protocol"})
	m.logins = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "mail_logins_total",
		Help: "Logins at the mail servers (greeting, STARTTLS and authentication on an open connection) by protocol and result: ok, or the failure class (auth, timeout, closed, unavailable, or another error kind).",
	}, []string{"protocol", "result"})
	m.loginSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "mail_login_duration_seconds",
		Help:    "Duration of logins at the mail servers by protocol, successful or not.",
		Buckets: connectBuckets,
	}, []string{"protocol"})
	m.httpResponses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "http_responses_total",
		Help: "HTTP responses of the public listener by status code.",
	}, []string{"code"})
	m.oauthEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "oauth_events_total",
		Help: "OAuth sign-ins and token requests by event (authorize: the sign-in page; token: an authorization code exchanged; refresh: a refresh token used) and outcome (ok, refused, error).",
	}, []string{"event", "outcome"})
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help: "Always 1; the label says which version of the gateway runs.",
	}, []string{"version"})
	build.WithLabelValues(version).Set(1)

	m.reg.MustRegister(m.toolCalls, m.toolSeconds, m.dials, m.dialSeconds, m.logins, m.loginSeconds,
		m.httpResponses, m.oauthEvents, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Series that exist before anything happens, so that dashboards and
	// rate() see a zero rather than no data.
	for _, p := range protocols.values() {
		m.dials.WithLabelValues(p, "ok")
		m.logins.WithLabelValues(p, "ok")
		m.dialSeconds.WithLabelValues(p)
		m.loginSeconds.WithLabelValues(p)
	}
	for _, e := range oauthEvents.values() {
		for _, o := range oauthOutcomes.values() {
			m.oauthEvents.WithLabelValues(e, o)
		}
	}
	return m
}

// Handler serves the metrics in the Prometheus text (or OpenMetrics)
// format. Mount it only on the METRICS_ADDR listener.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, Timeout: 10 * time.Second})
}

// Register adds a collector to this gateway's registry (for tests and for
// collectors the wiring makes).
func (m *Metrics) Register(c prometheus.Collector) error {
	if m == nil {
		return nil
	}
	return m.reg.Register(c)
}
