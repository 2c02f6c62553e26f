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
	p("%d deliveries to one account, one at a time; for each, four waiters watch INBOX at once: `%s` on the gateway as configured by default (IDLE) and on a second gateway with `%s` (each a new call per message, with `since_uid` the previous answer's `next_since_uid`; %d of them also filter on a tag the message carries), a bare go-imap client in IDLE, and a bare go-imap client sending NOOP every %s. A gateway's figure runs until mcp-go's client has the answer (the server's notice, then SEARCH, FETCH of the summary, LOGOUT, JSON over HTTP); the bare clients' until the server's `* N EXISTS` arrives.\n\n",
		sc.trials, toolWait, pollSetting, r.taggedTrials, pollLabel)
	p("| waiter | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|\n")
	for _, x := range []struct {
		name string
		r    *result
	}{
		{"gateway: `" + toolWait + "` over MCP, IDLE (the default)", r.gwWake},
		{"gateway: the same with `" + pollSetting + "`", r.gwPollWake},
		{"direct: go-imap in IDLE", r.idleWake},
		{"direct: go-imap, NOOP every " + pollLabel, r.pollWake},
		{"gateway (IDLE) minus direct IDLE, same delivery: the gateway's own share", r.share},
	} {
		p("| %s | %s | %s | %s | %s |\n", x.name, msf(x.r.P50()), msf(x.r.pct(90)), msf(x.r.P99()), msf(x.r.max()))
	}

	secs := sc.pollWindow.Seconds()
	p("\n### What waiting costs: IDLE against polling\n\n")
	p("%d waits, one per account, held open on the gateway in IDLE, then on the gateway with `%s`; CPU time over %.0f s, as a share of one core. Dovecot: all its processes (imap, imap-login's TLS proxy, ...). Gateway: the process holding the waits.\n\n",
		sc.pollConns, pollSetting, secs)
	p("| %d waits on | Dovecot CPU | gateway CPU |\n|---|---:|---:|\n", sc.pollConns)
	share := func(d time.Duration) string { return fmt.Sprintf("%.1f %%", 100*d.Seconds()/secs) }
	p("| the gateway in IDLE (default) | %s | %s |\n", share(r.costDove[0]), share(r.costGw[0]))
	p("| the gateway with `%s` | %s | %s |\n", pollSetting, share(r.costDove[1]), share(r.costGw[1]))
	per := func(d [2]time.Duration) float64 { return 100 * (d[1] - d[0]).Seconds() / secs / float64(sc.pollConns) }
	p("\nPolling every %s instead of IDLE, per waiting call: %.2f %% of a core at Dovecot and %.2f %% in the gateway; for 100 waits %.0f %% and %.0f %%, for 500 (the default MAX_WAITERS) %.0f %% and %.0f %%.\n",
		pollLabel, per(r.costDove), per(r.costGw), 100*per(r.costDove), 100*per(r.costGw), 500*per(r.costDove), 500*per(r.costGw))

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
	p("| the same with `%s`: p50 ≤ 100 ms, p99 ≤ 1 s | %s ms, %s ms | %s; %s |\n", pollSetting, msf(r.gwPollWake.P50()), msf(r.gwPollWake.P99()),
		verdict(r.gwPollWake.P50().Seconds(), 0.1), verdict(r.gwPollWake.P99().Seconds(), 1))
	p("| wake-up p99 ≤ 1 s with %d waiting, all woken at once (one delivery per account) | %s ms; %d of them after more than 2 s | %s |\n", sc.waiters, msf(r.herd.P99()), r.herdSlow, verdict(r.herd.P99().Seconds(), 1))
	p("| %d waiters on %d accounts: RSS ≤ 80 MB | peak %s | %s |\n", sc.waiters, sc.users, mb(r.hwmPhase), verdict(float64(r.hwmPhase)/1024, 80))
	for i, tool := range []string{toolList, toolRead} {
		x := ratio(r.during[i].P50(), r.before[i].P50())
		y := x / ratio(r.during[i+2].P50(), r.before[i+2].P50())
		p("| %s p50 with %d waiting ≤ 1.10 × idle (just before) | %.3f × (corrected by the control gateway: %.3f ×) | %s (corrected: %s) |\n", tool, sc.waiters, x, y, verdict(x, 1.10), verdict(y, 1.10))
	}
	return b.String()
}
