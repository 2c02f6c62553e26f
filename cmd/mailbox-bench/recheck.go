package main

// The cost of WAIT_RECHECK: waits held in IDLE on a gateway that never
// re-checks (WAIT_RECHECK=0) and on one with the default (every 10 s:
// DONE, NOOP, the search, IDLE again), CPU of Dovecot and of the gateway
// over the same window (-recheck-waits N).

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// recheckWindow is how long each gateway's waits are measured.
const recheckWindow = 60 * time.Second

// recheckPerAccount is how many waits one account holds.
const recheckPerAccount = 4

func recheckUsers(waits int) int { return (waits + recheckPerAccount - 1) / recheckPerAccount }

func (b *bench) recheckCost(ctx context.Context) (string, error) {
	n := b.o.recheckWaits
	users := recheckUsers(n)
	if k := b.o.inotifyInstances; k > 0 {
		restore, err := raiseInotifyInstances(k)
		if err != nil {
			return "", err
		}
		defer restore()
	}
	limit := ""
	if v, err := os.ReadFile(inotifyInstances); err == nil {
		limit = strings.TrimSpace(string(v))
	}
	caps := []string{fmt.Sprintf("MAX_WAITERS=%d", n), fmt.Sprintf("MAX_WAITERS_PER_USER=%d", recheckPerAccount)}
	settings := []string{"WAIT_RECHECK=0", "WAIT_RECHECK=10s"}
	var dove, gw [2]time.Duration
	for k, setting := range settings {
		g, err := startGateway(b.bin, b.dir, fmt.Sprintf("gateway-recheck%d", k), b.stack, b.key, false, append(append([]string{}, caps...), setting)...)
		if err != nil {
			return "", err
		}
		logf("recheck: %d waits on %d accounts, %s", n, users, setting)
		ws, err := b.holdWaits(ctx, g, n, users)
		if err != nil {
			g.stop()
			return "", err
		}
		time.Sleep(2 * time.Second)
		d0, g0 := b.dovecotCPU(), g.cpu()
		time.Sleep(recheckWindow)
		dove[k], gw[k] = b.dovecotCPU()-d0, g.cpu()-g0
		logf("  Dovecot %v, gateway %v of CPU in %v", dove[k], gw[k], recheckWindow)
		if _, _, err := ws.release(fmt.Sprintf("recheck%d", k)); err != nil {
			g.stop()
			return "", err
		}
		g.stop()
	}
	secs := recheckWindow.Seconds()
	share := func(d time.Duration) float64 { return 100 * d.Seconds() / secs }
	var s strings.Builder
	fmt.Fprintf(&s, "%d waits (%d per account on %d accounts) held in IDLE on Dovecot 2.3, CPU over %.0f s as a share of one core (fs.inotify.max_user_instances %s):\n\n", n, recheckPerAccount, users, secs, limit)
	s.WriteString("| gateway setting | Dovecot CPU | gateway CPU |\n|---|---:|---:|\n")
	for k, setting := range settings {
		fmt.Fprintf(&s, "| `%s` | %.1f %% | %.1f %% |\n", setting, share(dove[k]), share(gw[k]))
	}
	per := func(d [2]time.Duration) float64 { return 100 * (d[1] - d[0]).Seconds() / secs / float64(n) }
	fmt.Fprintf(&s, "\nThe re-check every 10 s costs, per waiting call, %.4f %% of a core at Dovecot and %.4f %% in the gateway.\n", per(dove), per(gw))
	return s.String(), nil
}
