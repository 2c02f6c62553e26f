package app_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// PPROF_ADDR serves the profiles on a listener of its own; the public one
// never serves them, with or without the switch.
func TestPprofOnlyOnItsOwnListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	g := startDemoGateway(t, "PPROF_ADDR="+addr)
	// Serve opens the profiling listener in its own goroutine: wait for it.
	for deadline := time.Now().Add(5 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PPROF_ADDR %s never listened: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, body := get("http://" + addr + "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "heap") {
		t.Errorf("PPROF_ADDR /debug/pprof/: %d, want 200 with the profile index", code)
	}
	if code, _ := get("http://" + addr + "/debug/pprof/heap?debug=1"); code != http.StatusOK {
		t.Errorf("PPROF_ADDR heap profile: %d, want 200", code)
	}
	if !strings.Contains(g.Logs.String(), "profiling endpoint enabled") {
		t.Error("no warning in the log that profiling is on")
	}
	public := strings.TrimSuffix(g.URL, "/mcp")
	for _, gw := range []string{public, strings.TrimSuffix(startDemoGateway(t).URL, "/mcp")} {
		if code, body := get(gw + "/debug/pprof/"); code == http.StatusOK || strings.Contains(body, "goroutine") {
			t.Errorf("the public listener serves /debug/pprof/ (%d)", code)
		}
	}
}
