package app_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// METRICS_ADDR serves /metrics on a listener of its own, with the tool
// calls of the demo mailbox counted; the public listener never serves it,
// with or without the switch; without it nothing listens.
func TestMetricsOnlyOnItsOwnListener(t *testing.T) {
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
	g := startDemoGateway(t, "METRICS_ADDR="+addr)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("METRICS_ADDR %s never listened: %v", addr, err)
		}
	}
	u := g.Users[0]
	mailtest.Call(t, mailtest.MCPClient(t, g.URL, headers(u), ""), "imap_list_folders", nil)

	code, body := get("http://" + addr + "/metrics")
	if code != http.StatusOK {
		t.Fatalf("METRICS_ADDR /metrics: %d", code)
	}
	for _, want := range []string{
		`mailbox_mcp_tool_calls_total{outcome="ok",tool="imap_list_folders"} 1`,
		`mailbox_mcp_mail_logins_total{protocol="imap",result="ok"} 1`,
		`mailbox_mcp_pool_connections{state="idle"} 1`,
		`mailbox_mcp_http_responses_total{code="200"}`,
		"go_goroutines", "process_resident_memory_bytes",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape has no %s", want)
		}
	}
	if strings.Contains(body, u.Address) || strings.Contains(body, u.Password) {
		t.Error("the scrape names the user")
	}
	if testing.Verbose() {
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "mailbox_mcp_") && !strings.Contains(line, "_bucket") {
				t.Log(line)
			}
		}
	}
	public := strings.TrimSuffix(g.URL, "/mcp")
	for _, gw := range []string{public, strings.TrimSuffix(startDemoGateway(t).URL, "/mcp")} {
		if code, body := get(gw + "/metrics"); code != http.StatusNotFound || strings.Contains(body, "mailbox_mcp_") {
			t.Errorf("the public listener answers /metrics with %d, want 404", code)
		}
	}
}
