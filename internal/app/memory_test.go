package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

func healthOf(t *testing.T, g *gateway) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(g.URL, "/mcp") + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var h map[string]string
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("/health: %s", body)
	}
	return resp.StatusCode, h
}

// With REDIS_URL the gateway builds the shared store; /health stays up
// (200) and says "degraded" while Redis is away, and "ok" again when it
// is back, with no restart. Without REDIS_URL the memories are the
// process's own and /health says nothing of Redis. The log names the
// server's address, never its password.
func TestSharedMemoryHealth(t *testing.T) {
	t.Run("without_REDIS_URL", func(t *testing.T) {
		g := startDemoGateway(t)
		if st := g.App.Memory().Status(); st.Shared || !st.Up {
			t.Fatalf("status %+v: want the in-process store", st)
		}
		if code, h := healthOf(t, g); code != 200 || h["status"] != "ok" || h["redis"] != "" {
			t.Fatalf("/health: %d %v", code, h)
		}
	})
	t.Run("redis_down_and_back", func(t *testing.T) {
		srv := mailtest.StartRedis(t, mailtest.RedisOptions{User: "gw", Password: "pw-Not-In-Logs-9"})
		g := startDemoGateway(t, "REDIS_URL="+srv.URL(1), "REDIS_TIMEOUT=100ms")
		if _, ok := g.App.Memory().(*memory.Redis); !ok {
			t.Fatalf("store %T, want *memory.Redis", g.App.Memory())
		}
		wait := func(what string, ok func(code int, h map[string]string) bool) {
			t.Helper()
			var code int
			var h map[string]string
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if code, h = healthOf(t, g); ok(code, h) {
					return
				}
			}
			t.Fatalf("%s: /health %d %v", what, code, h)
		}
		wait("up", func(code int, h map[string]string) bool {
			return code == 200 && h["status"] == "ok" && h["redis"] == "ok"
		})
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		// No traffic: the store's own check sees the outage (every 2 s).
		wait("down", func(code int, h map[string]string) bool {
			return code == 200 && h["status"] == "degraded" && h["redis"] == "degraded"
		})
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		wait("back", func(code int, h map[string]string) bool {
			return code == 200 && h["status"] == "ok" && h["redis"] == "ok"
		})
		logs := g.Logs.String()
		for _, want := range []string{`"shared_memory":"redis ` + srv.Addr(), "redis unavailable", "redis answers again"} {
			if !strings.Contains(logs, want) {
				t.Errorf("the log lacks %q", want)
			}
		}
		if strings.Contains(logs, "pw-Not-In-Logs-9") {
			t.Error("the log holds the Redis password")
		}
	})
}
