// Package mailbox is the gateway's IMAP layer: it dials and logs in under a
// context (go-imap takes none), keeps logged-in connections in a bounded
// pool keyed by the whole credential, and offers the mailbox operations the
// tools need, returning plain Go types and mailerr errors. It never talks
// MCP or HTTP, and it never changes a message unless an operation says so.
package mailbox

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
)

// Client runs mailbox operations for many users over one pool.
type Client struct {
	cfg  Config
	pool *pool.Pool[*Conn]
	log  *slog.Logger
}

// New makes a Client. Close it to log out of every pooled connection.
func New(cfg Config, pc pool.Config, log *slog.Logger) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	log = log.With("component", "mailbox")
	c := &Client{cfg: cfg, log: log}
	c.pool = pool.New(pc, c.check, log, pool.WithGracefulClose(func(ctx context.Context, conn *Conn) { conn.Logout(ctx) }))
	return c
}

// Close logs out of every pooled connection, bounded by ctx.
func (c *Client) Close(ctx context.Context) error { return c.pool.Close(ctx) }

// Stats reports the pool's counters.
func (c *Client) Stats() pool.Stats { return c.pool.Stats() }

// check is the pool's health check for a connection idle for a while.
func (c *Client) check(ctx context.Context, conn *Conn) error {
	if conn.closed() {
		return errors.New("connection closed")
	}
	return bridge(ctx, conn, func() error { return conn.c.Noop().Wait() })
}

func (c *Conn) closed() bool {
	select {
	case <-c.c.Closed():
		return true
	default:
		return false
	}
}

// Verify logs in with creds (or finds a pooled connection that did so with
// exactly these credentials).
func (c *Client) Verify(ctx context.Context, creds credentials.Credentials) error {
	return c.do(ctx, creds, true, func(ctx context.Context, conn *Conn) error { return nil })
}

// do runs op on a pooled, logged-in connection for creds, under the IMAP
// timeout and the caller's context. A connection that fails is discarded,
// never returned to the pool. A read-only op that fails on a reused
// connection because the connection broke (the server restarted or kicked
// it) is retried once on a fresh connection: that is safe because it changes
// nothing.
func (c *Client) do(ctx context.Context, creds credentials.Credentials, readOnly bool, op func(context.Context, *Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	key := creds.Key(c.cfg.Host)
	for attempt := 0; ; attempt++ {
		lease, err := c.pool.Get(ctx, key, func(ctx context.Context) (*Conn, error) {
			return dial(ctx, c.cfg, creds)
		})
		if err != nil {
			return c.poolError(ctx, err)
		}
		conn := lease.Conn()
		if conn.closed() {
			lease.Discard()
			continue
		}
		err = bridge(ctx, conn, func() error { return op(ctx, conn) })
		if err == nil || keepsConnection(err) {
			lease.Release()
			return err
		}
		lease.Discard()
		if readOnly && attempt == 0 && lease.Reused() && ctx.Err() == nil && brokenConnection(err) {
			c.log.DebugContext(ctx, "retrying on a fresh connection", "err", err)
			continue
		}
		return err
	}
}

func (c *Client) poolError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, pool.ErrBusy):
		return mailerr.Wrap(mailerr.Busy, err, "the gateway is busy (all mail connections are in use); retry in a few seconds")
	case errors.Is(err, pool.ErrClosed):
		return mailerr.Wrap(mailerr.Unavailable, err, "the gateway is shutting down; retry shortly")
	case ctx.Err() != nil && mailerr.KindOf(err) == mailerr.Internal:
		return contextError(ctx)
	}
	return err
}

// keepsConnection says whether the connection is still healthy after err:
// the server answered, and only the request was wrong.
func keepsConnection(err error) bool {
	switch mailerr.KindOf(err) {
	case mailerr.NotFound, mailerr.BadInput, mailerr.TooLarge:
		return true
	}
	return false
}

// brokenConnection says whether err means the connection itself failed, as
// opposed to the server answering NO or BAD.
func brokenConnection(err error) bool {
	switch mailerr.KindOf(err) {
	case mailerr.Unavailable, mailerr.Internal:
		return true
	}
	return false
}
