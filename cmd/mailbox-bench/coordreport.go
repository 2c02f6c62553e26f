package main

import (
	"fmt"
	"strings"
	"time"
)

// markdown is the coordination section of docs/benchmarks.md.
func (r *coordReport) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	o, sc := r.o, r.sc
	cmd := "go run ./cmd/mailbox-bench"
	if o.args != "" {
		cmd += " " + o.args
	}
	kind := "coordination"
	if o.smoke {
		kind = "coordination, smoke"
	}
	p("Run of %s (%s, %.0f s).\n\n", r.started.UTC().Format("2006-01-02 15:04 MST"), kind, r.finished.Sub(r.started).Seconds())
	p("- Command (as root, from the repository root): `%s`\n", cmd)
	p("- Machine: %s\n", machine())
	p("- Load average (1/5/15 min) before: %s; after: %s. Kernel fs.inotify.max_user_instances: %s.\n", r.load[0], r.load[1], r.inotifyLimit)
	if len(o.gwEnv) > 0 {
		p("- Extra gateway settings: `%s`\n", strings.Join(o.gwEnv, " "))
	}
	p("- Milliseconds. Deliveries go over LMTP straight into Dovecot; every latency is measured from the moment Dovecot answered the LMTP DATA (the message is stored).\n")

	p("\n### Wake-up: from Dovecot's LMTP answer until the waiter knows\n\n")
	p("%d deliveries to one account, one at a time; for each, three waiters watch INBOX at once: the gateway's `%s` (a new call per message, with `since_uid` the previous answer's `next_since_uid`; %d of them also filter on a tag the message carries), a bare go-imap client in IDLE, and a bare go-imap client sending NOOP every %s. The gateway's figure runs until mcp-go's client has the answer (IDLE, then SEARCH, FETCH of the summary, LOGOUT, JSON over HTTP); the bare clients' until the server's `* N EXISTS` arrives.\n\n",
		sc.trials, toolWait, r.taggedTrials, pollLabel)
	p("| waiter | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|\n")
	for _, x := range []struct {
		name string
		r    *result
	}{
		{"gateway: `" + toolWait + "` over MCP (IDLE)", r.gwWake},
		{"direct: go-imap in IDLE", r.idleWake},
		{"direct: go-imap, NOOP every " + pollLabel, r.pollWake},
		{"gateway minus direct IDLE, same delivery (the gateway's own share)", r.share},
	} {
		p("| %s | %s | %s | %s | %s |\n", x.name, msf(x.r.P50()), msf(x.r.pct(90)), msf(x.r.P99()), msf(x.r.max()))
	}

	secs := sc.pollWindow.Seconds()
	p("\n### What polling would cost\n\n")
	p("%d connections, one per account (%d accounts), INBOX examined, over TLS; CPU time in a %.0f s window, as a share of one core. Dovecot: all its processes (imap, imap-login's TLS proxy, ...). Client: this benchmark's own process, i.e. go-imap and TLS as the gateway would run them.\n\n",
		sc.pollConns, min(sc.pollConns, sc.users), secs)
	p("| the connections | Dovecot CPU | client CPU | commands |\n|---|---:|---:|---:|\n")
	share := func(d time.Duration) string { return fmt.Sprintf("%.1f %%", 100*d.Seconds()/secs) }
	p("| wait in IDLE | %s | %s | 0 |\n", share(r.pollIdleDove), share(r.pollIdleSelf))
	p("| send NOOP every %s | %s | %s | %d (%.0f/s) |\n", pollLabel, share(r.pollNoopDove), share(r.pollNoopSelf), r.noops, float64(r.noops)/secs)
	if r.noops > 0 {
		per := (r.pollNoopDove - r.pollIdleDove) / time.Duration(r.noops)
		self := (r.pollNoopSelf - r.pollIdleSelf) / time.Duration(r.noops)
		p("\nPer NOOP: Dovecot %d µs, client %d µs of CPU. One account polling every %s: %.2f %% of a core at Dovecot, %.2f %% in the gateway; 100 accounts: %.0f %% and %.0f %%.\n",
			per.Microseconds(), self.Microseconds(), pollLabel,
			100*per.Seconds()*float64(time.Second/pollPeriod), 100*self.Seconds()*float64(time.Second/pollPeriod),
			100*100*per.Seconds()*float64(time.Second/pollPeriod), 100*100*self.Seconds()*float64(time.Second/pollPeriod))
	}

	p("\n### %d waiters on %d accounts\n\n", sc.waiters, sc.users)
	p("%d calls of `%s` (timeout_s 600), %d per account, each from its own MCP client, started 5 ms apart; they end when one message is delivered to each account, and each must return that message. Other calls: `%s` and `%s`, %d each, on %s (1,000 messages), before the waits, while they wait, and after they ended; each alternates with the same call to a control gateway (same settings, no waits, the same Dovecot), so that load from elsewhere on the machine shows in both.\n\n",
		sc.waiters, toolWait, sc.waiters/sc.users, toolList, toolRead, sc.calls, r.other)
	p("| figure | value |\n|---|---:|\n")
	p("| IMAP connections of the %d accounts at Dovecot (`doveadm who`) while waiting | %d |\n", sc.users, r.openAtDovecot)
	p("| the gateway's established IMAP connections then (waits + pool) | %d |\n", r.gwSockets)
	p("| gateway RSS after start | %s |\n", mb(r.rssStart))
	p("| gateway RSS before the waits | %s |\n", mb(r.rssBefore))
	p("| gateway RSS with %d waiting | %s |\n", sc.waiters, mb(r.rssWaiting))
	p("| gateway peak RSS (VmHWM, reset before the waits) up to all of them returning | %s |\n", mb(r.hwmPhase))
	p("| gateway CPU while they wait and nothing else happens | %.1f %% of a core (%s in %.0f s) |\n", 100*r.quietCPU.Seconds()/sc.quiet.Seconds(), msf(r.quietCPU), sc.quiet.Seconds())
	p("| waking all of them (one delivery per account): latency per waiter p50 / p99 / max | %s / %s / %s |\n", msf(r.herd.P50()), msf(r.herd.P99()), msf(r.herd.max()))
	p("| of them woken more than 2 s after their delivery | %d |\n", r.herdSlow)
	p("| until Dovecot lists none of their connections, after the last returned | %s |\n", msf(r.drained))
	if len(r.inotify) > 0 {
		p("\nDovecot's log on inotify (the kernel's fs.inotify.max_user_instances was %s; all imap processes run as one mail uid):\n\n", r.inotifyLimit)
		for _, l := range r.inotify {
			p("    %s\n", l)
		}
	}
	p("\n| call | p50 before | p50 with %d waiting | p50 after | with / before | control gateway p50 before / with / after | with / before, corrected by the control |\n|---|---:|---:|---:|---:|---|---:|\n", sc.waiters)
	for i, tool := range []string{toolList, toolRead} {
		bf, du, af := r.before[i], r.during[i], r.after[i]
		cb, cd, ca := r.before[i+2], r.during[i+2], r.after[i+2]
		p("| %s | %s | %s | %s | %.3f | %s / %s / %s | %.3f |\n", tool, msf(bf.P50()), msf(du.P50()), msf(af.P50()), ratio(du.P50(), bf.P50()),
			msf(cb.P50()), msf(cd.P50()), msf(ca.P50()), ratio(du.P50(), bf.P50())/ratio(cd.P50(), cb.P50()))
	}

	p("\n### Targets\n\n| target | measured | verdict |\n|---|---|---|\n")
	p("| wake-up p50 ≤ 100 ms after Dovecot has the message | %s ms (direct IDLE: %s) | %s |\n", msf(r.gwWake.P50()), msf(r.idleWake.P50()), verdict(r.gwWake.P50().Seconds(), 0.1))
	p("| wake-up p99 ≤ 1 s | %s ms | %s |\n", msf(r.gwWake.P99()), verdict(r.gwWake.P99().Seconds(), 1))
	p("| wake-up p99 ≤ 1 s with %d waiting, all woken at once (one delivery per account) | %s ms; %d of them after more than 2 s | %s |\n", sc.waiters, msf(r.herd.P99()), r.herdSlow, verdict(r.herd.P99().Seconds(), 1))
	p("| %d waiters on %d accounts: RSS ≤ 80 MB | peak %s | %s |\n", sc.waiters, sc.users, mb(r.hwmPhase), verdict(float64(r.hwmPhase)/1024, 80))
	for i, tool := range []string{toolList, toolRead} {
		x := ratio(r.during[i].P50(), r.before[i].P50())
		y := x / ratio(r.during[i+2].P50(), r.before[i+2].P50())
		p("| %s p50 with %d waiting ≤ 1.10 × idle (just before) | %.3f × (corrected by the control gateway: %.3f ×) | %s (corrected: %s) |\n", tool, sc.waiters, x, y, verdict(x, 1.10), verdict(y, 1.10))
	}
	return b.String()
}
