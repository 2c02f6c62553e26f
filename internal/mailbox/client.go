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
	"strings"
	"sync"
	"sync/atomic"
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
	// def is the configured host; hosts are the others reached so far
	// (Config.Route), by name.
	def   *hostState
	hosts sync.Map // lower-case host name -> *hostState
	// recordsPruned is when old claim records were last removed (UnixNano).
	recordsPruned atomic.Int64
}

// New makes a Client. Close it to log out of every pooled connection.
func New(cfg Config, pc pool.Config, log *slog.Logger) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	log = log.With("component", "mailbox")
	c := &Client{cfg: cfg, log: log, def: &hostState{}}
	c.pool = pool.New(pc, c.check, log,
		pool.WithGracefulClose(func(ctx context.Context, conn *Conn) { conn.Logout(ctx) }),
		pool.WithRefused[*Conn](refusedLogin))
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
	return bridge(ctx, conn, stepCheck, func() error { return conn.c.Noop().Wait() })
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
	return c.do(ctx, creds, "checking the login", true, func(ctx context.Context, conn *Conn) error { return nil })
}

// do runs op on a pooled, logged-in connection for creds, under the IMAP
// timeout and the caller's context. step says what op does, in words that
// complete "while ..." (a timeout names it; waiting for the pool, dialling
// and logging in name their own). A connection that fails is discarded,
// never returned to the pool. A read-only op that fails on a reused
// connection because the connection broke (the server restarted or kicked
// it) is retried once on a fresh connection: that is safe because it changes
// nothing.
func (c *Client) do(ctx context.Context, creds credentials.Credentials, step string, readOnly bool, op func(context.Context, *Conn) error) error {
	return c.run(ctx, creds, nil, step, readOnly, op)
}

// doIn is do for a read-only op that begins with conn.examine(folder):
// when the pool has no connection and dials, the EXAMINE goes out with the
// LOGIN (one round trip for both), and op finds folder already selected.
func (c *Client) doIn(ctx context.Context, creds credentials.Credentials, folder, step string, op func(context.Context, *Conn) error) error {
	return c.run(ctx, creds, &opening{folder: folder}, step, true, op)
}

// doOpen is do for an op that begins with o (opening.go): o is in flight
// when op starts, its select read (op's examine or openRW returns its
// answer), its commands for op to read.
func (c *Client) doOpen(ctx context.Context, creds credentials.Credentials, o *opening, step string, readOnly bool, op func(context.Context, *Conn) error) error {
	return c.run(ctx, creds, o, step, readOnly, op)
}

// run is do, doIn and doOpen; o is nil for do.
func (c *Client) run(ctx context.Context, creds credentials.Credentials, o *opening, step string, readOnly bool, op func(context.Context, *Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	cfg, err := c.hostConfig(creds)
	if err != nil {
		return err
	}
	// Connections are reused only for exactly these credentials at this
	// host, and counted against MaxPerGroup per account (host and name,
	// however the name is spelt).
	key := pool.Key{Group: creds.AccountKey(), Conn: creds.Key(cfg.endpoint().Addr())}
	// The pool may call this later to renew an idle connection (its
	// Revalidate), with a context of its own: it carries its own timeout,
	// and no opening (that comes with this call's context only).
	login := func(ctx context.Context) (*Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
		return dial(ctx, cfg, creds)
	}
	for attempt := 0; ; attempt++ {
		lease, err := c.pool.Get(withOpening(ctx, o), key, login)
		if err != nil {
			return c.poolError(ctx, err)
		}
		conn := lease.Conn()
		if conn.closed() {
			lease.Discard()
			continue
		}
		conn.srv = conn.host.server()
		err = bridge(ctx, conn, step, func() error {
			if err := c.settleLogin(conn); err != nil {
				return err
			}
			conn.srv = conn.host.server()
			if o != nil {
				if o.sentWith != conn {
					conn.begin(o)
				}
				conn.settleOpening()
			}
			err := op(ctx, conn)
			// Whatever op left unread of the opening is read, so that the
			// connection goes back to the pool with nothing in flight.
			conn.settleOpening()
			conn.opened, conn.refreshed = nil, false
			if conn.watching {
				conn.flightChanges()
			}
			return err
		})
		if err == nil || keepsConnection(err) {
			lease.Release()
			return err
		}
		lease.Discard()
		if readOnly && (o == nil || !o.changing) && attempt == 0 && lease.Reused() && ctx.Err() == nil && brokenConnection(err) {
			c.log.DebugContext(ctx, "retrying on a fresh connection", "err", err)
			continue
		}
		return err
	}
}

// poolError classifies what pool.Get returned: the pool's own errors, or
// the dial's (already classified, with their step).
func (c *Client) poolError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, pool.ErrBusy):
		e := mailerr.Wrap(mailerr.Busy, err, "the gateway is busy (all mail connections are in use); retry in a few seconds")
		e.Step = stepWait
		return e
	case errors.Is(err, pool.ErrClosed):
		return mailerr.Wrap(mailerr.Unavailable, err, "the gateway is shutting down; retry shortly")
	case ctx.Err() != nil && mailerr.KindOf(err) == mailerr.Internal:
		return mailerr.TimedOut(ctx, stepWait)
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

// hostState is what the gateway has learned about one mail host
// (server.go), once it has.
type hostState struct {
	srv atomic.Pointer[Server]
}

// server is what is known, nil before it is learned (or for no host).
func (h *hostState) server() *Server {
	if h == nil {
		return nil
	}
	return h.srv.Load()
}

// hostConfig is the Config for creds' connections: the configured host, or
// the one Route names for creds.Host, with the state learned about it.
func (c *Client) hostConfig(creds credentials.Credentials) (Config, error) {
	cfg := c.cfg
	name := strings.ToLower(strings.TrimSpace(creds.Host))
	if name == "" || name == strings.ToLower(c.cfg.Host) {
		cfg.state = c.def
		return cfg, nil
	}
	if c.cfg.Route == nil {
		return cfg, mailerr.Newf(mailerr.Forbidden, "this gateway serves only the mail host %s", c.cfg.Host)
	}
	ep, err := c.cfg.Route(name)
	if err != nil {
		return cfg, err
	}
	cfg.Host, cfg.Port, cfg.Security, cfg.TLS, cfg.publicOnly = ep.Host, ep.Port, ep.Security, ep.TLS, ep.PublicOnly
	st, _ := c.hosts.LoadOrStore(name, &hostState{})
	cfg.state = st.(*hostState)
	return cfg, nil
}
