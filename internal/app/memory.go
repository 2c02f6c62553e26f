package app

import (
	"crypto/hkdf"
	"crypto/sha256"
	"log/slog"
	"sync/atomic"

	"github.com/mailbox-mcp/mailbox-mcp/internal/config"
	"github.com/mailbox-mcp/mailbox-mcp/internal/httpapi"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
	"github.com/mailbox-mcp/mailbox-mcp/internal/metrics"
)

// newMemory builds the store of the shared memories: Redis when REDIS_URL
// is set (one memory for every replica with the same ENCRYPTION_KEY),
// else this process's own. A Redis that does not answer yet does not stop
// start-up: the store starts down and comes up when the server answers.
func newMemory(cfg *config.Config, log *slog.Logger, m *metrics.Metrics) (memory.Store, error) {
	if cfg.RedisURL == "" {
		return memory.NewLocal(nil), nil
	}
	roots, err := cfg.RedisCAs()
	if err != nil {
		return nil, err
	}
	o := memory.RedisOptions{
		URL: cfg.RedisURL, RootCAs: roots, Timeout: cfg.RedisTimeout,
		Key: cfg.Key(), Previous: cfg.PreviousKey(), Fail: cfg.RedisFailPolicy(), Logger: log,
	}
	if m != nil {
		o.Observer = m
	}
	// The series exist before the store's first check at start-up, which
	// would otherwise go uncounted.
	var store atomic.Pointer[memory.Redis]
	m.WatchRedis(memory.Ops, memory.Results, func() bool {
		r := store.Load()
		return r != nil && r.Status().Up
	})
	r, err := memory.NewRedis(o)
	if err != nil {
		return nil, err
	}
	store.Store(r)
	return r, nil
}

// memoryHealth is what /health reports of the store: the shared memory
// when there is one (an in-process memory is the process itself).
func memoryHealth(s memory.Store) []httpapi.Dependency {
	if !s.Status().Shared {
		return nil
	}
	return []httpapi.Dependency{{Name: "redis", Up: func() bool { return s.Status().Up }}}
}

// memoryName says in the start-up log where the memories are: the Redis
// server's address (never its password), or "in-process".
func memoryName(s memory.Store) string {
	if r, ok := s.(*memory.Redis); ok {
		return "redis " + r.Addr()
	}
	return "in-process"
}

// proofSecret keys the login back-off's proofs of credentials that logged
// in: derived from ENCRYPTION_KEY, so that every replica sharing the
// memory names a proof alike (a rotation only makes them proven again).
func proofSecret(cfg *config.Config) []byte {
	k, err := hkdf.Key(sha256.New, cfg.Key(), nil, "mailbox-mcp login proofs v1", 32)
	if err != nil {
		return nil // the guard makes one of its own
	}
	return k
}
