package tests

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// METRICS_ADDR against Dovecot and Postfix: after calls by two users (lists,
// a send, a wrong password, a bad argument) the scrape has a series per
// tool and outcome with the right counts, latency histograms, the pool's
// gauges, dial and login figures for IMAP and SMTP, and HTTP statuses; and
// neither user's address, password, folder name nor token appears anywhere
// in it. The public port does not serve /metrics. The example alert rules
// and the Grafana dashboard in deploy/ use only metrics and labels the
// scrape has.
func TestMetrics(t *testing.T) {
	const (
		one, onePass = "metrics-one@example.test", "m1-Secret-pw"
		two, twoPass = "metrics-two@example.test", "m2-Secret-pw"
		folder       = "ZebraQuarterly"
	)
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{one: onePass, two: twoPass}})
	for _, u := range []string{one, two} {
		if err := direct(t, s, u).Create(folder, nil).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	rs := mailtest.StartRedis(t, mailtest.RedisOptions{})
	g := startGateway(t, s, "METRICS_ADDR="+addr, "MAILBOX_ACCESS=full", "REDIS_URL="+rs.URL(0),
		"SMTP_HOST=127.0.0.1", "SMTP_PORT="+strconv.Itoa(s.SubmissionsPort), "SMTP_SECURITY=tls")

	var token string
	for _, u := range []string{one, two} {
		mc := mailtest.MCPClient(t, g.URL, userHeaders(s, u), "")
		mailtest.Call(t, mc, "imap_list_folders", nil)
		mailtest.Call(t, mc, "imap_list_emails", map[string]any{"folder": folder})
		if u == one {
			var tok struct {
				Token string `json:"token"`
			}
			mailtest.Decode(t, mailtest.Call(t, mc, "imap_encrypt_credentials", map[string]any{}), &tok)
			if token = tok.Token; token == "" {
				t.Fatal("no token from imap_encrypt_credentials")
			}
			sendCall(t, mc, "smtp_send_email", map[string]any{"to": []any{two}, "subject": "metrics", "text": "hello"})
		}
	}
	// An argument error, then a wrong password (last: it starts the login
	// back-off for that user).
	mc := mailtest.MCPClient(t, g.URL, userHeaders(s, one), "")
	if res, err := mailtest.CallErr(mc, "imap_list_emails", map[string]any{"folder": folder, "limit": "many"}); err != nil || !res.IsError {
		t.Fatalf("a bad argument was not refused: %v %+v", err, res)
	}
	bad := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": two, "x-imap-pass": "wrong-" + twoPass}, "")
	if res, err := mailtest.CallErr(bad, "imap_list_folders", nil); err != nil || !res.IsError {
		t.Fatalf("a wrong password was not refused: %v %+v", err, res)
	}

	public := strings.TrimSuffix(g.URL, "/mcp")
	if code, _ := httpGet(t, public+"/metrics"); code != http.StatusNotFound {
		t.Errorf("the public port answers /metrics with %d, want 404", code)
	}
	code, out := httpGet(t, "http://"+addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("METRICS_ADDR /metrics: %d", code)
	}
	series := parseExposition(t, out)

	t.Run("nothing_about_a_user", func(t *testing.T) {
		lower := strings.ToLower(out)
		for _, secret := range []string{one, two, onePass, twoPass, "metrics-one", "metrics-two", "example.test", folder, token, token[:16]} {
			if strings.Contains(lower, strings.ToLower(secret)) {
				t.Errorf("the scrape contains %q", secret)
			}
		}
	})
	t.Run("series_per_tool_and_outcome", func(t *testing.T) {
		want := map[string]float64{
			`mailbox_mcp_tool_calls_total{outcome="ok",tool="imap_list_folders"}`:               2,
			`mailbox_mcp_tool_calls_total{outcome="auth_failed",tool="imap_list_folders"}`:      1,
			`mailbox_mcp_tool_calls_total{outcome="ok",tool="imap_list_emails"}`:                2,
			`mailbox_mcp_tool_calls_total{outcome="bad_input",tool="imap_list_emails"}`:         1,
			`mailbox_mcp_tool_calls_total{outcome="ok",tool="imap_encrypt_credentials"}`:        1,
			`mailbox_mcp_tool_calls_total{outcome="ok",tool="smtp_send_email"}`:                 1,
			`mailbox_mcp_tool_calls_total{outcome="ok",tool="imap_read_email"}`:                 0, // never called: still listed
			`mailbox_mcp_tool_call_duration_seconds_count{tool="imap_list_folders"}`:            3,
			`mailbox_mcp_tool_call_duration_seconds_bucket{tool="imap_list_folders",le="+Inf"}`: 3,
			`mailbox_mcp_tool_call_duration_seconds_bucket{tool="imap_list_emails",le="+Inf"}`:  3,
			`mailbox_mcp_mail_logins_total{protocol="imap",result="ok"}`:                        2,
			`mailbox_mcp_mail_logins_total{protocol="imap",result="auth"}`:                      1,
			`mailbox_mcp_mail_dials_total{protocol="imap",result="ok"}`:                         3,
			`mailbox_mcp_mail_dials_total{protocol="smtp",result="ok"}`:                         1,
			`mailbox_mcp_mail_logins_total{protocol="smtp",result="ok"}`:                        1,
			`mailbox_mcp_mail_login_duration_seconds_count{protocol="imap"}`:                    3,
			`mailbox_mcp_mail_dial_duration_seconds_count{protocol="smtp"}`:                     1,
			`mailbox_mcp_pool_events_total{event="opened"}`:                                     2,
			`mailbox_mcp_pool_waiting`: 0,
			`mailbox_mcp_waiters`:      0,
			`mailbox_mcp_oauth_events_total{event="authorize",outcome="ok"}`: 0,
		}
		for name, v := range want {
			got, ok := series[name]
			switch {
			case !ok:
				t.Errorf("no series %s", name)
			case got != v:
				t.Errorf("%s = %v, want %v", name, got, v)
			}
		}
		if v := series[`mailbox_mcp_pool_max_connections`]; v < 1 {
			t.Errorf("mailbox_mcp_pool_max_connections = %v", v)
		}
		if v := series[`mailbox_mcp_pool_connections{state="idle"}`] + series[`mailbox_mcp_pool_connections{state="in_use"}`]; v != 2 {
			t.Errorf("pool connections idle+in_use = %v, want 2 (one per user)", v)
		}
		// Every bucket of the latency histogram, cumulative.
		var buckets []float64
		for name, v := range series {
			if strings.HasPrefix(name, `mailbox_mcp_tool_call_duration_seconds_bucket{tool="imap_list_emails",`) {
				buckets = append(buckets, v)
			}
		}
		if len(buckets) < 10 {
			t.Errorf("%d buckets for imap_list_emails, want the full histogram", len(buckets))
		}
		// the shared memory (REDIS_URL): its check at start-up at least
		if series[`mailbox_mcp_redis_operations_total{op="ping",result="ok"}`] < 1 || series[`mailbox_mcp_redis_up`] != 1 {
			t.Errorf("redis series: ping ok %v, up %v", series[`mailbox_mcp_redis_operations_total{op="ping",result="ok"}`], series[`mailbox_mcp_redis_up`])
		}
		if _, ok := series[`mailbox_mcp_redis_operation_duration_seconds_count{op="once.use"}`]; !ok {
			t.Error("no latency series for once.use")
		}
		if series[`mailbox_mcp_http_responses_total{code="200"}`] < 8 {
			t.Errorf("http 200 responses: %v", series[`mailbox_mcp_http_responses_total{code="200"}`])
		}
		if series[`mailbox_mcp_http_responses_total{code="404"}`] != 1 {
			t.Errorf("http 404 responses: %v, want 1 (the public /metrics)", series[`mailbox_mcp_http_responses_total{code="404"}`])
		}
		for name := range series {
			if strings.HasPrefix(name, "mailbox_mcp_tool_calls_total{") && strings.Contains(name, `"other"`) {
				t.Errorf("a tool call fell outside the fixed label sets: %s", name)
			}
		}
	})
	t.Run("deploy_files_use_only_existing_metrics", func(t *testing.T) {
		checkDeployExprs(t, series, "../deploy/prometheus/alerts.yml", alertExprs(t, "../deploy/prometheus/alerts.yml"))
		checkDeployExprs(t, series, "../deploy/grafana/mailbox-mcp.json", dashboardExprs(t, "../deploy/grafana/mailbox-mcp.json"))
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// httpGet GETs url, retrying a refused connection for a few seconds (the
// metrics listener starts in Serve's goroutine).
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			if time.Now().Before(deadline) {
				continue
			}
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
}

// parseExposition reads the Prometheus text format into series (name with
// its labels as written) -> value.
func parseExposition(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("unreadable line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

func alertExprs(t *testing.T, path string) []string {
	t.Helper()
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" {
				t.Errorf("%s: a rule without alert name or expr in group %s", path, g.Name)
			}
			exprs = append(exprs, r.Expr)
		}
	}
	if len(exprs) < 4 {
		t.Fatalf("%s: %d rules", path, len(exprs))
	}
	return exprs
}

func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash)
	if len(exprs) < 10 {
		t.Fatalf("%s: %d queries", path, len(exprs))
	}
	return exprs
}

var (
	metricRef  = regexp.MustCompile(`\b((?:mailbox_mcp|process|go)_[a-z0-9_]+)(\{[^}]*\})?`)
	matcherRef = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"([^"]*)"`)
)

// checkDeployExprs checks that every metric a query names exists in the
// scrape, and that every label it matches on is one the metric has
// (instance and job are added by Prometheus; le is a bucket's).
func checkDeployExprs(t *testing.T, series map[string]float64, path string, exprs []string) {
	t.Helper()
	labels := map[string][]string{} // metric -> label names seen
	for s := range series {
		name, rest, _ := strings.Cut(s, "{")
		if _, ok := labels[name]; !ok {
			labels[name] = nil
		}
		for _, m := range matcherRef.FindAllStringSubmatch(rest, -1) {
			if !slices.Contains(labels[name], m[1]) {
				labels[name] = append(labels[name], m[1])
			}
		}
	}
	used := 0
	for _, e := range exprs {
		for _, m := range metricRef.FindAllStringSubmatch(e, -1) {
			used++
			have, ok := labels[m[1]]
			if !ok {
				t.Errorf("%s uses %s, which the gateway does not export", path, m[1])
				continue
			}
			for _, lm := range matcherRef.FindAllStringSubmatch(m[2], -1) {
				if lm[1] != "instance" && lm[1] != "job" && !slices.Contains(have, lm[1]) {
					t.Errorf("%s matches %s on label %s, which it does not have (it has %v)", path, m[1], lm[1], have)
				}
			}
		}
	}
	if used == 0 {
		t.Errorf("%s: no metric found in its queries", path)
	}
}
