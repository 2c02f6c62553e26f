package app

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/buildinfo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/config"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/metrics"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// newMetrics makes the gateway's metrics when METRICS_ADDR is set; nil
// otherwise (every layer then records nothing).
func newMetrics(cfg *config.Config) *metrics.Metrics {
	if cfg.MetricsAddr == "" {
		return nil
	}
	return metrics.New(buildinfo.Version())
}

// mailObserver is m as the mail layers' observer of dials and logins: a
// nil interface when metrics are off.
func mailObserver(m *metrics.Metrics) transport.Observer {
	if m == nil {
		return nil
	}
	return m
}

// watchGateway gives m what it reads at scrape time (the pool and the
// waiters) and the tool names its tool label may take.
func watchGateway(m *metrics.Metrics, cfg *config.Config, mb *mailbox.Client, toolset []tools.Tool) {
	if m == nil {
		return
	}
	names := make([]string, len(toolset))
	for i, t := range toolset {
		names[i] = t.Def.Name
	}
	m.KnownTools(names...)
	m.WatchPool(cfg.MaxPoolSize, mb.Stats, mb.Waiting)
}

// serveMetrics serves /metrics on METRICS_ADDR, a listener of its own
// (config refuses the public port), until the returned stop is called. The
// public listener never serves it.
func (a *App) serveMetrics() (stop func(), err error) {
	ln, err := net.Listen("tcp", a.cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on METRICS_ADDR %s: %w", a.cfg.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}
	go srv.Serve(ln)
	a.log.Info("metrics endpoint enabled (METRICS_ADDR)", "addr", ln.Addr().String())
	return func() { srv.Close() }, nil
}
