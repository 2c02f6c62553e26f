package main

// The coordination benchmark (-coord, and a reduced run in -smoke): how
// soon imap_wait_for_email returns after Dovecot has a message, in IDLE and
// polling (WAIT_POLL_INTERVAL), next to a bare IMAP client in IDLE and one
// polling with NOOP on the same folder and the same deliveries; what
// polling costs Dovecot and the gateway; and what many waits held open at
// once cost the gateway (memory, other calls' latency).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-smtp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mcpcall"
)

const (
	toolWait   = "imap_wait_for_email"
	waker      = "waker@example.test" // the account whose waits are timed
	coordTag   = "bench-wake"
	pollPeriod = 100 * time.Millisecond // the polling fallback measured
	pollLabel  = "100 ms"
	// pollSetting makes a gateway's waits poll every pollPeriod.
	pollSetting = "WAIT_POLL_INTERVAL=100ms"
	// wakeLimit is how long after a delivery a waiter may take before the
	// run fails: slow is a figure, never is an error. An IMAP process that
	// could not get an inotify instance notices new mail only every
	// mailbox_idle_check_interval (30 s).
	wakeLimit = 45 * time.Second
)

// coordScale is how big one coordination run is.
type coordScale struct {
	trials     int           // timed wake-ups
	users      int           // accounts holding waiters
	waiters    int           // waits held open at once, spread evenly over users
	calls      int           // calls per tool in each latency phase
	pollConns  int           // waits in the cost measurement (IDLE against polling)
	pollWindow time.Duration // each window of that measurement
	quiet      time.Duration // window for the gateway's CPU while waits wait
}

func coordScaleFor(o options) coordScale {
	if o.smoke {
		return coordScale{trials: 5, users: 5, waiters: 20, calls: 50, pollConns: 5, pollWindow: time.Second, quiet: time.Second}
	}
	s := coordScale{trials: o.coordTrials, users: 50, waiters: o.coordWaiters, calls: 200, pollConns: 50, pollWindow: 10 * time.Second, quiet: 3 * time.Second}
	s.users = min(s.users, max(1, s.waiters))
	return s
}

func coordUser(i int) (string, string) {
	return fmt.Sprintf("coord%02d@example.test", i+1), fmt.Sprintf("coordpw%02d", i+1)
}

// coordReport holds the figures of one coordination run.
type coordReport struct {
	o        options
	sc       coordScale
	started  time.Time
	finished time.Time
	load     [2]string

	gwWake, gwPollWake, idleWake, pollWake, share *result
	taggedTrials                                  int

	// CPU while pollConns waits wait, on the IDLE and the polling gateway
	costDove, costGw [2]time.Duration

	rssStart, rssBefore, rssWaiting, hwmPhase int64 // kB
	openAtDovecot, gwSockets                  int
	quietCPU                                  time.Duration
	herd                                      *result
	herdSlow                                  int           // waiters woken after more than 2 s
	inotify                                   []string      // Dovecot's warnings about inotify, if any
	inotifyLimit                              string        // fs.inotify.max_user_instances
	drained                                   time.Duration // until the waiters' connections were gone at Dovecot
	other                                     string        // the account of the other calls
	before, during, after                     [4]*result    // list, read on the gateway; list, read on the control
}

// watcher is a bare IMAP connection with a folder selected that records
// when the server announced each message count.
type watcher struct {
	c      *imapclient.Client
	sel    *imap.SelectData
	mu     sync.Mutex
	counts []uint32
	times  []time.Time
	signal chan struct{}
}

func openWatcher(b *bench, user string) (*watcher, error) {
	w := &watcher{signal: make(chan struct{}, 1)}
	h := &imapclient.UnilateralDataHandler{Mailbox: func(d *imapclient.UnilateralDataMailbox) {
		if d.NumMessages == nil {
			return
		}
		now := time.Now()
		w.mu.Lock()
		w.counts, w.times = append(w.counts, *d.NumMessages), append(w.times, now)
		w.mu.Unlock()
		select {
		case w.signal <- struct{}{}:
		default:
		}
	}}
	c, err := imapclient.DialTLS(b.stack.IMAPSAddr(), &imapclient.Options{TLSConfig: b.stack.TLSConfig(), UnilateralDataHandler: h})
	if err != nil {
		return nil, err
	}
	if err := c.Login(user, b.stack.Users[user]).Wait(); err != nil {
		c.Close()
		return nil, err
	}
	sd, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		c.Close()
		return nil, err
	}
	w.c, w.sel = c, sd
	return w, nil
}

// seen returns when the server first announced at least n messages.
func (w *watcher) seen(n uint32, within time.Duration) (time.Time, error) {
	limit := time.After(within)
	for {
		w.mu.Lock()
		for i, k := range w.counts {
			if k >= n {
				t := w.times[i]
				w.mu.Unlock()
				return t, nil
			}
		}
		w.mu.Unlock()
		select {
		case <-w.signal:
		case <-limit:
			return time.Time{}, fmt.Errorf("the server did not announce %d messages within %v", n, within)
		}
	}
}

func (w *watcher) close() {
	w.c.Logout().Wait()
	w.c.Close()
}

// lmtp is one LMTP session straight into Dovecot.
type lmtp struct{ c *smtp.Client }

func dialLMTP(b *bench) (*lmtp, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(b.stack.Host, strconv.Itoa(b.stack.LMTPPort)), 5*time.Second)
	if err != nil {
		return nil, err
	}
	c := smtp.NewClientLMTP(conn)
	if err := c.Hello("bench.test"); err != nil {
		c.Close()
		return nil, err
	}
	return &lmtp{c}, nil
}

// deliver hands one message to Dovecot and returns when Dovecot answered
// that it stored it: the moment a waiter's latency is measured from.
func (l *lmtp) deliver(rcpt, subject, tag string) (time.Time, error) {
	h := "From: Bench Agent <agent@bench.test>\r\nTo: <" + rcpt + ">\r\nSubject: " + subject +
		"\r\nDate: " + time.Now().Format(time.RFC1123Z) + "\r\nMessage-ID: <" + strconv.FormatInt(time.Now().UnixNano(), 36) + "@bench.test>\r\n"
	if tag != "" {
		h += mailmsg.TagsHeader + ": " + tag + "\r\n"
	}
	raw := h + "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nA message for a waiting agent.\r\n"
	if err := l.c.Mail("agent@bench.test", nil); err != nil {
		return time.Time{}, err
	}
	if err := l.c.Rcpt(rcpt, nil); err != nil {
		return time.Time{}, err
	}
	w, err := l.c.Data()
	if err != nil {
		return time.Time{}, err
	}
	if _, err := w.Write([]byte(raw)); err != nil {
		return time.Time{}, err
	}
	if _, err := w.CloseWithLMTPResponse(); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

func (l *lmtp) close() {
	l.c.Quit()
	l.c.Close()
}

// imapConnsOf counts the IMAP connections Dovecot lists for users.
func (b *bench) imapConnsOf(users map[string]bool) (int, error) {
	out, err := b.stack.Doveadm("who", "-1")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && users[f[0]] && f[1] == "imap" {
			n++
		}
	}
	return n, nil
}

// untilConns polls until users hold want IMAP connections at Dovecot and
// returns how long it took.
func (b *bench) untilConns(users map[string]bool, want int, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		got, err := b.imapConnsOf(users)
		if err != nil {
			return 0, err
		}
		if got == want {
			return time.Since(start), nil
		}
		if time.Since(start) > limit {
			return 0, fmt.Errorf("%d IMAP connections at Dovecot after %v, want %d", got, limit, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dovecotCPU is the CPU time of every live process of the stack's Dovecot
// (the master and everything in its session: imap, imap-login, auth, ...).
func (b *bench) dovecotCPU() time.Duration {
	sid := b.stack.Env["MAILSTACK_DOVECOT_PID"]
	ents, _ := os.ReadDir("/proc")
	var total int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 13 || f[3] != sid {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		total += u + k
	}
	return time.Duration(total) * time.Second / 100
}

const inotifyInstances = "/proc/sys/fs/inotify/max_user_instances"

// raiseInotifyInstances sets the kernel's fs.inotify.max_user_instances to
// at least n, and restore sets back what it was. Every Dovecot imap process
// in IDLE takes one inotify instance, and they all run as the one mail uid:
// past the limit, Dovecot notices new mail only every
// mailbox_idle_check_interval (30 s).
func raiseInotifyInstances(n int) (restore func(), err error) {
	old, err := os.ReadFile(inotifyInstances)
	if err != nil {
		return nil, err
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(old)))
	if err != nil {
		return nil, err
	}
	if cur >= n {
		return func() {}, nil
	}
	if err := os.WriteFile(inotifyInstances, []byte(strconv.Itoa(n)), 0o644); err != nil {
		return nil, fmt.Errorf("-inotify-instances: %w", err)
	}
	logf("fs.inotify.max_user_instances raised from %d to %d for this run", cur, n)
	return func() {
		if err := os.WriteFile(inotifyInstances, old, 0o644); err != nil {
			logf("could not restore fs.inotify.max_user_instances to %d: %v", cur, err)
		}
	}, nil
}

// dovecotWarnings returns the distinct lines of Dovecot's log that contain
// word (with the timestamp and process prefix cut), at most 5.
func (b *bench) dovecotWarnings(word string) []string {
	data, err := os.ReadFile(b.stack.Dir + "/log/dovecot.log")
	if err != nil {
		return []string{"(no Dovecot log: " + err.Error() + ")"}
	}
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(strings.ToLower(line), word) {
			continue
		}
		// "Nov 23 17:54:46 imap(user)<pid><session>: Warning: ..."
		if i := strings.Index(line, ">: "); i >= 0 {
			line = line[i+3:]
		}
		if !seen[line] && len(out) < 5 {
			seen[line] = true
			out = append(out, line)
		}
	}
	return out
}

// waitOut is one imap_wait_for_email call's outcome.
type waitOut struct {
	i   int
	res map[string]any
	err error
	at  time.Time
}

func waitCall(ctx context.Context, c *client.Client, args map[string]any) (map[string]any, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = toolWait, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", toolWait, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("%s: tool error: %s", toolWait, mcpcall.Text(res))
	}
	m, _ := res.StructuredContent.(map[string]any)
	if m == nil {
		return nil, fmt.Errorf("%s: no structured content", toolWait)
	}
	return m, nil
}

// oneMessage checks that a wait returned exactly the message with subject
// and returns its UID and the next cursor.
func oneMessage(m map[string]any, subject string) (uid, next int, err error) {
	msgs := list(m, "messages")
	if to, _ := m["timed_out"].(bool); to || len(msgs) != 1 {
		return 0, 0, fmt.Errorf("wait: timed_out %v with %d messages, want the message %q", to, len(msgs), subject)
	}
	msg, _ := msgs[0].(map[string]any)
	if got, _ := msg["subject"].(string); got != subject {
		return 0, 0, fmt.Errorf("wait: got %q, want %q", got, subject)
	}
	uid, next = num(msg, "uid"), num(m, "next_since_uid")
	if uid == 0 || next != uid {
		return 0, 0, fmt.Errorf("wait: uid %d, next_since_uid %d", uid, next)
	}
	return uid, next, nil
}

func (r *result) record(d time.Duration) {
	r.Calls++
	r.lat = append(r.lat, d)
}

func (r *result) max() time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.pct(100)
}

// coord runs the coordination benchmark on a gateway of its own.
func (b *bench) coord(ctx context.Context) (*coordReport, error) {
	sc := coordScaleFor(b.o)
	rep := &coordReport{o: b.o, sc: sc, started: time.Now(), other: b.load[0]}
	rep.load[0] = loadavg()
	if n := b.o.inotifyInstances; n > 0 {
		restore, err := raiseInotifyInstances(n)
		if err != nil {
			return nil, err
		}
		defer restore()
	}
	if v, err := os.ReadFile(inotifyInstances); err == nil {
		rep.inotifyLimit = strings.TrimSpace(string(v))
	}
	gw, err := startGateway(b.bin, b.dir, "gateway-coord", b.stack, b.key, false, b.o.gwEnv...)
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	rep.rssStart, _ = gw.status("VmRSS")
	// The same binary and settings, but waits poll with NOOP instead of
	// sitting in IDLE.
	gwPoll, err := startGateway(b.bin, b.dir, "gateway-poll", b.stack, b.key, false, append(slices.Clone(b.o.gwEnv), pollSetting)...)
	if err != nil {
		return nil, err
	}
	defer gwPoll.stop()
	gws := [2]*gateway{gw, gwPoll}

	logf("coord: %d wake-ups through the gateway (IDLE, and %s), next to bare IDLE and a 100 ms NOOP poll", sc.trials, pollSetting)
	if err := b.wakeUps(ctx, gws, rep); err != nil {
		return nil, fmt.Errorf("wake-ups: %w", err)
	}
	logf("coord: what %d waits cost, in IDLE and polling", sc.pollConns)
	if err := b.pollCost(ctx, gws, rep); err != nil {
		return nil, fmt.Errorf("polling cost: %w", err)
	}
	logf("coord: %d waiters on %d users", sc.waiters, sc.users)
	if err := b.manyWaiters(ctx, gw, rep); err != nil {
		return nil, fmt.Errorf("%d waiters: %w", sc.waiters, err)
	}
	rep.load[1] = loadavg()
	rep.finished = time.Now()
	return rep, nil
}

// wakeUps times imap_wait_for_email from the LMTP answer to the end of the
// call, on the gateway with IDLE and on the one polling, while a bare
// client in IDLE and one sending NOOP every 100 ms watch the same folder and
// see the same deliveries.
func (b *bench) wakeUps(ctx context.Context, gws [2]*gateway, rep *coordReport) error {
	var cs [2]*client.Client
	for k, g := range gws {
		c, err := mcpClient(g.url, waker, b.stack.Users[waker])
		if err != nil {
			return err
		}
		defer c.Close()
		cs[k] = c
	}
	idle, err := openWatcher(b, waker)
	if err != nil {
		return err
	}
	defer idle.close()
	// The first wait's cursor: everything there now has been seen.
	cursor, count := int(idle.sel.UIDNext)-1, idle.sel.NumMessages
	idleCmd, err := idle.c.Idle()
	if err != nil {
		return err
	}
	defer func() { idleCmd.Close(); idleCmd.Wait() }()

	poll, err := openWatcher(b, waker)
	if err != nil {
		return err
	}
	defer poll.close()
	pollCtx, stopPoll := context.WithCancel(ctx)
	pollDone := make(chan error, 1)
	go func() {
		t := time.NewTicker(pollPeriod)
		defer t.Stop()
		for {
			select {
			case <-pollCtx.Done():
				pollDone <- nil
				return
			case <-t.C:
				if err := poll.c.Noop().Wait(); err != nil {
					pollDone <- err
					return
				}
			}
		}
	}()
	defer func() { stopPoll(); <-pollDone }()

	l, err := dialLMTP(b)
	if err != nil {
		return err
	}
	defer l.close()
	me := map[string]bool{waker: true}
	base, err := b.imapConnsOf(me) // the two watchers
	if err != nil {
		return err
	}
	rep.gwWake, rep.gwPollWake, rep.idleWake, rep.pollWake, rep.share = &result{}, &result{}, &result{}, &result{}, &result{}
	for i := range rep.sc.trials {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The previous waits' connections are gone first (they logged out).
		if _, err := b.untilConns(me, base, 10*time.Second); err != nil {
			return fmt.Errorf("trial %d: the previous waits kept their connections: %w", i, err)
		}
		args := map[string]any{"since_uid": cursor, "timeout_s": 60}
		tag := ""
		if i%2 == 1 {
			tag = coordTag
			args["tag"] = tag
			rep.taggedTrials++
		}
		var chs [2]chan waitOut
		for k, c := range cs {
			chs[k] = make(chan waitOut, 1)
			go func() {
				m, err := waitCall(ctx, c, args)
				chs[k] <- waitOut{res: m, err: err, at: time.Now()}
			}()
		}
		// Deliver only once both waits hold their own logged-in
		// connections, and a moment later, when they sit in IDLE (or
		// between polls): a message already there when a wait first looks
		// would be returned at once and flatter the figure.
		if _, err := b.untilConns(me, base+2, 10*time.Second); err != nil {
			return fmt.Errorf("trial %d: the waits did not connect: %w", i, err)
		}
		// A random part, so that deliveries fall anywhere in the polling
		// gateway's cycle (which starts with each call), not at one phase.
		time.Sleep(150*time.Millisecond + rand.N(pollPeriod))
		subject := fmt.Sprintf("wake %d", i)
		acked, err := l.deliver(waker, subject, tag)
		if err != nil {
			return fmt.Errorf("trial %d: LMTP: %w", i, err)
		}
		count++
		var at [2]time.Time
		next := 0
		for k, ch := range chs {
			var w waitOut
			select {
			case w = <-ch:
			case <-time.After(wakeLimit):
				return fmt.Errorf("trial %d: the wait on the %s gateway did not return within %v of the delivery", i, []string{"IDLE", "polling"}[k], wakeLimit)
			}
			if w.err != nil {
				return fmt.Errorf("trial %d: %w", i, w.err)
			}
			_, n, err := oneMessage(w.res, subject)
			if err != nil {
				return fmt.Errorf("trial %d: %w", i, err)
			}
			if n <= cursor || (next != 0 && n != next) {
				return fmt.Errorf("trial %d: cursors %d and %d after %d", i, next, n, cursor)
			}
			next, at[k] = n, w.at
		}
		cursor = next
		ti, err := idle.seen(count, wakeLimit)
		if err != nil {
			return fmt.Errorf("trial %d, IDLE client: %w", i, err)
		}
		tp, err := poll.seen(count, wakeLimit)
		if err != nil {
			return fmt.Errorf("trial %d, polling client: %w", i, err)
		}
		g := at[0].Sub(acked)
		rep.gwWake.record(g)
		rep.gwPollWake.record(at[1].Sub(acked))
		rep.idleWake.record(ti.Sub(acked))
		// A poll can see the message a moment before LMTP's answer arrives.
		rep.pollWake.record(max(tp.Sub(acked), 0))
		rep.share.record(g - ti.Sub(acked))
	}
	select {
	case err := <-pollDone:
		return fmt.Errorf("polling client: %v", err)
	default:
	}
	logf("  gateway, IDLE %s", rep.gwWake)
	logf("  gateway, poll %s", rep.gwPollWake)
	logf("  direct IDLE   %s", rep.idleWake)
	logf("  direct NOOP   %s", rep.pollWake)
	return nil
}

// waitSet is waits held open on one gateway, spread over the coordination
// accounts, each from its own MCP client.
type waitSet struct {
	b       *bench
	n       int
	users   map[string]bool
	nUsers  int
	clients []*client.Client
	out     chan waitOut
	cancel  context.CancelFunc
}

// holdWaits starts n waits (timeout_s 600) on g, 5 ms apart, over the first
// users coordination accounts, and returns when Dovecot lists n IMAP
// connections of those accounts.
func (b *bench) holdWaits(ctx context.Context, g *gateway, n, users int) (*waitSet, error) {
	wctx, cancel := context.WithCancel(ctx)
	ws := &waitSet{b: b, n: n, users: map[string]bool{}, nUsers: users, clients: make([]*client.Client, n), out: make(chan waitOut, n), cancel: cancel}
	for i := range users {
		u, _ := coordUser(i)
		ws.users[u] = true
	}
	if k, err := b.imapConnsOf(ws.users); err != nil || k != 0 {
		ws.close()
		return nil, fmt.Errorf("%d IMAP connections of the waiting accounts before the waits (%v)", k, err)
	}
	for i := range ws.clients {
		u, _ := coordUser(i % users)
		c, err := mcpcall.Connect(wctx, g.url, mcpcall.Options{
			Headers:     map[string]string{"x-imap-user": u, "x-imap-pass": b.stack.Users[u]},
			HTTPTimeout: 15 * time.Minute, ClientName: "mailbox-bench-waiter",
		})
		if err != nil {
			ws.close()
			return nil, err
		}
		ws.clients[i] = c
		go func() {
			m, err := waitCall(wctx, c, map[string]any{"timeout_s": 600})
			ws.out <- waitOut{i: i, res: m, err: err, at: time.Now()}
		}()
		time.Sleep(5 * time.Millisecond) // agents arrive over time, not in one burst
	}
	if _, err := b.untilConns(ws.users, n, time.Minute); err != nil {
		err = fmt.Errorf("the waits are not all waiting (%w); %v", err, ws.early())
		ws.close()
		return nil, err
	}
	if err := ws.early(); err != nil {
		ws.close()
		return nil, err
	}
	return ws, nil
}

// early is an error if a wait has returned.
func (ws *waitSet) early() error {
	select {
	case w := <-ws.out:
		return fmt.Errorf("waiter %d returned before any mail came: %v %v", w.i, w.res, w.err)
	default:
		return nil
	}
}

// release ends the waits the normal way: one message (subject "release
// NAME USER") to each account wakes its waiters, and each must return that
// message. It returns each wait's latency from its account's delivery, and
// waits until Dovecot lists none of their connections.
func (ws *waitSet) release(name string) (*result, time.Duration, error) {
	defer ws.close()
	if err := ws.early(); err != nil {
		return nil, 0, err
	}
	l, err := dialLMTP(ws.b)
	if err != nil {
		return nil, 0, err
	}
	acked := map[string]time.Time{}
	for i := range ws.nUsers {
		u, _ := coordUser(i)
		if acked[u], err = l.deliver(u, "release "+name+" "+u, ""); err != nil {
			l.close()
			return nil, 0, err
		}
	}
	l.close()
	res := &result{}
	limit := time.After(wakeLimit)
	for range ws.n {
		var w waitOut
		select {
		case w = <-ws.out:
		case <-limit:
			return nil, 0, fmt.Errorf("%d of %d waits returned within %v of the deliveries", res.Calls, ws.n, wakeLimit)
		}
		u, _ := coordUser(w.i % ws.nUsers)
		if w.err != nil {
			return nil, 0, fmt.Errorf("waiter %d: %w", w.i, w.err)
		}
		if _, _, err := oneMessage(w.res, "release "+name+" "+u); err != nil {
			return nil, 0, fmt.Errorf("waiter %d: %w", w.i, err)
		}
		res.record(w.at.Sub(acked[u]))
	}
	gone, err := ws.b.untilConns(ws.users, 0, 10*time.Second)
	if err != nil {
		return nil, 0, fmt.Errorf("after the waits returned: %w", err)
	}
	return res, gone, nil
}

// close ends the waits still open (their clients disconnect) and closes
// the clients; calling it again does nothing.
func (ws *waitSet) close() {
	ws.cancel()
	for i, c := range ws.clients {
		if c != nil {
			c.Close()
			ws.clients[i] = nil
		}
	}
}

// pollCost measures the CPU that waits cost Dovecot and the gateway: one
// wait per account, first on the gateway that waits in IDLE, then on the
// one that polls with NOOP every 100 ms (WAIT_POLL_INTERVAL).
func (b *bench) pollCost(ctx context.Context, gws [2]*gateway, rep *coordReport) error {
	sc := rep.sc
	for k, g := range gws {
		ws, err := b.holdWaits(ctx, g, sc.pollConns, min(sc.pollConns, sc.users))
		if err != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
		d0, g0 := b.dovecotCPU(), g.cpu()
		time.Sleep(sc.pollWindow)
		rep.costDove[k], rep.costGw[k] = b.dovecotCPU()-d0, g.cpu()-g0
		if _, _, err := ws.release(fmt.Sprintf("cost%d", k)); err != nil {
			return err
		}
		logf("  %d waits on the %s gateway: Dovecot %v, gateway %v of CPU in %v", sc.pollConns, []string{"IDLE", "polling"}[k], rep.costDove[k], rep.costGw[k], sc.pollWindow)
	}
	return nil
}

// manyWaiters holds sc.waiters waits open on sc.users accounts, measures the
// gateway's memory and other calls' latency before, during and after, then
// ends the waits by delivering one message to each account.
func (b *bench) manyWaiters(ctx context.Context, gw *gateway, rep *coordReport) error {
	sc := rep.sc
	// A control gateway, with no waits, answers the same calls alternating
	// with the one holding them: machine load that comes and goes (other
	// work on a shared machine) shows in both, the waits' cost only in one.
	ctl, err := startGateway(b.bin, b.dir, "gateway-control", b.stack, b.key, false, b.o.gwEnv...)
	if err != nil {
		return err
	}
	defer ctl.stop()
	var ops []func() error
	for _, g := range []*gateway{gw, ctl} {
		c, err := mcpClient(g.url, rep.other, b.stack.Users[rep.other])
		if err != nil {
			return err
		}
		defer c.Close()
		ops = append(ops, b.gwOp(toolList, viaMCP(c), rep.other, 1000, nil), b.gwOp(toolRead, viaMCP(c), rep.other, 1000, nil))
	}
	phase := func(name string) ([4]*result, error) {
		rs := runRotating(sc.calls, time.Minute, ops)
		var out [4]*result
		copy(out[:], rs)
		for i, r := range rs {
			logf("  %-8s %-7s %s %s", name, []string{"gateway", "control"}[i/2], []string{"list", "read"}[i%2], r)
			if r.Errors > 0 {
				return out, fmt.Errorf("calls %s the waits: %v", name, r.Err)
			}
		}
		return out, nil
	}
	runRotating(20, time.Minute, ops) // warm: the pooled connections, EXAMINE
	if rep.before, err = phase("before"); err != nil {
		return err
	}

	rep.rssBefore, _ = gw.status("VmRSS")
	if err := gw.resetPeak(); err != nil {
		return err
	}
	ws, err := b.holdWaits(ctx, gw, sc.waiters, sc.users)
	if err != nil {
		return err
	}
	defer ws.close()
	rep.openAtDovecot = sc.waiters
	rep.gwSockets, _ = gw.imapConns(b.stack.IMAPSPort)
	rep.rssWaiting, _ = gw.status("VmRSS")
	if rep.during, err = phase("with"); err != nil {
		return err
	}
	cpu0 := gw.cpu()
	time.Sleep(sc.quiet)
	rep.quietCPU = gw.cpu() - cpu0
	if n, err := b.imapConnsOf(ws.users); err != nil || n != sc.waiters {
		return fmt.Errorf("after the calls, %d of %d waits hold a connection at Dovecot (%v)", n, sc.waiters, err)
	}
	if rep.herd, rep.drained, err = ws.release("herd"); err != nil {
		return err
	}
	rep.hwmPhase, _ = gw.status("VmHWM")
	for _, d := range rep.herd.lat {
		if d > 2*time.Second {
			rep.herdSlow++
		}
	}
	rep.inotify = b.dovecotWarnings("notify")
	logf("  %d waits: peak RSS %s, woken in p50 %s, max %s; connections gone in %v", sc.waiters, mb(rep.hwmPhase), ms(rep.herd.P50()), ms(rep.herd.max()), rep.drained)
	rep.after, err = phase("after")
	return err
}

// runRotating runs each of ops n times (no new round after max), one
// after the other, starting each round with the next op, so that every op
// sees the same machine load.
func runRotating(n int, max time.Duration, ops []func() error) []*result {
	rs := make([]*result, len(ops))
	for i := range rs {
		rs[i] = &result{}
	}
	deadline := time.Now().Add(max)
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		for k := range ops {
			j := (i + k) % len(ops)
			t := time.Now()
			err := ops[j]()
			rs[j].addCall(time.Since(t), err)
		}
	}
	return rs
}
