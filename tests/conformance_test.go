package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// The MCP conformance suite (@modelcontextprotocol/conformance, locked in
// tests/clients/node22, run on its Node 22) against the gateway: the
// resources, prompts, caching (SEP-2549) and resource-not-found (SEP-2164)
// server scenarios, with tests/clients/conformance-baseline.yml as the
// expected failures. The suite exits non-zero on any failure or warning not
// in the baseline, and on a baseline entry that passes. The baseline holds
// only the scenarios that read the suite's reference fixtures
// (conformanceFixtures); each must fail for that reason and no other.
//
// The suite connects without credentials. The scenarios whose answer
// depends on the caller also run through a proxy that adds a user's
// x-imap-* headers, so that resources/list has messages and the caching
// scenario reads one (without them it skips resources/read).

// conformanceScenarios are the server scenarios run.
var conformanceScenarios = []string{
	"resources-list", "resources-read-text", "resources-read-binary", "resources-templates-read",
	"sep-2164-resource-not-found",
	"prompts-list", "prompts-get-simple", "prompts-get-with-args", "prompts-get-embedded-resource", "prompts-get-with-image",
	"caching",
}

// conformanceFixtures are the scenarios of the baseline, each with the
// reference-server fixture it reads: its failure must name it.
var conformanceFixtures = map[string]string{
	"resources-read-text":           "test://static-text",
	"resources-read-binary":         "test://static-binary",
	"resources-templates-read":      "test://template/123/data",
	"prompts-get-simple":            "test_simple_prompt",
	"prompts-get-with-args":         "test_prompt_with_arguments",
	"prompts-get-embedded-resource": "test_prompt_with_embedded_resource",
	"prompts-get-with-image":        "test_prompt_with_image",
}

// conformanceCheck is one entry of a scenario's checks.json.
type conformanceCheck struct {
	ID           string         `json:"id"`
	Status       string         `json:"status"` // SUCCESS, FAILURE, WARNING, SKIPPED, INFO
	ErrorMessage string         `json:"errorMessage"`
	Details      map[string]any `json:"details"`
}

// conformanceRun is one scenario's result.
type conformanceRun struct {
	Err    error // the suite's exit status with the baseline
	Output string
	Checks []conformanceCheck
}

func (r conformanceRun) check(id string) (conformanceCheck, bool) {
	for _, c := range r.Checks {
		if c.ID == id {
			return c, true
		}
	}
	return conformanceCheck{}, false
}

func (r conformanceRun) summary() string {
	var s []string
	for _, c := range r.Checks {
		s = append(s, c.ID+"="+c.Status)
	}
	return strings.Join(s, " ")
}

func TestConformanceResourcesPromptsCaching(t *testing.T) {
	node, _ := inspectorCLI(t) // Node >= 22.19, from tests/clients/node22
	dir := clientsDir(t)
	suite := filepath.Join(dir, "node22", "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(suite); err != nil {
		skipOrFail(t, "tests/clients/node22 has no @modelcontextprotocol/conformance: run `npm ci` there (scripts/test.sh does on Linux x86-64)")
	}
	baseline := filepath.Join(dir, "conformance-baseline.yml")
	checkBaseline(t, baseline)

	const user = "conformance@example.test"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: "conformancepw"}})
	if err := s.Seed(user, 3, "INBOX"); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, s)
	withUser := headerProxy(t, g.URL, map[string]string{"x-imap-user": user, "x-imap-pass": "conformancepw"})

	anonymous := map[string]conformanceRun{}
	for _, sc := range conformanceScenarios {
		t.Run("anonymous/"+sc, func(t *testing.T) {
			r := runConformance(t, node, suite, g.URL, sc, baseline)
			anonymous[sc] = r
			if r.Err != nil {
				t.Fatalf("%s: %v (checks: %s)\n%s", sc, r.Err, r.summary(), tail(r.Output, 4000))
			}
			if fixture, ok := conformanceFixtures[sc]; ok {
				if !slices.ContainsFunc(r.Checks, func(c conformanceCheck) bool {
					return c.Status == "FAILURE" && strings.Contains(c.ErrorMessage, fixture)
				}) {
					t.Errorf("%s is in the baseline because it reads the fixture %s, but no failure names it: %s", sc, fixture, r.summary())
				}
				return
			}
			for _, c := range r.Checks {
				if c.Status == "FAILURE" || c.Status == "WARNING" {
					t.Errorf("%s: check %s is %s: %s", sc, c.ID, c.Status, c.ErrorMessage)
				}
			}
		})
	}
	t.Run("anonymous/resources_list_is_empty", func(t *testing.T) {
		c, ok := anonymous["resources-list"].check("resources-list")
		if !ok || c.Status != "SUCCESS" || c.Details["resourceCount"] != 0.0 {
			t.Errorf("without credentials resources/list should succeed with no resources: %+v", c)
		}
	})

	user20 := map[string]conformanceRun{}
	for _, sc := range []string{"resources-list", "sep-2164-resource-not-found", "caching"} {
		t.Run("as_a_user/"+sc, func(t *testing.T) {
			r := runConformance(t, node, suite, withUser, sc, baseline)
			user20[sc] = r
			if r.Err != nil {
				t.Fatalf("%s: %v (checks: %s)\n%s", sc, r.Err, r.summary(), tail(r.Output, 4000))
			}
		})
	}
	t.Run("as_a_user/resources_list_shows_the_3_messages", func(t *testing.T) {
		c, _ := user20["resources-list"].check("resources-list")
		uris, _ := c.Details["resources"].([]any)
		if c.Status != "SUCCESS" || len(uris) != 3 {
			t.Fatalf("resources/list as the user: %+v", c)
		}
		for _, u := range uris {
			if s, _ := u.(string); !strings.HasPrefix(s, "mailbox://INBOX/") {
				t.Errorf("listed %v, want mailbox://INBOX/{uid}", u)
			}
		}
	})
	t.Run("as_a_user/caching_reads_a_message_with_hints", func(t *testing.T) {
		r := user20["caching"]
		for _, id := range []string{"sep-2549-tools-list-caching-hints", "sep-2549-prompts-list-caching-hints", "sep-2549-resources-list-caching-hints",
			"sep-2549-resources-templates-list-caching-hints", "sep-2549-resources-read-caching-hints", "sep-2549-ttl-non-negative", "sep-2549-cache-scope-valid"} {
			if c, ok := r.check(id); !ok || c.Status != "SUCCESS" {
				t.Errorf("check %s: %+v (all: %s)", id, c, r.summary())
			}
		}
	})
}

// checkBaseline makes sure the baseline file lists exactly the fixture
// scenarios, so that it cannot grow to hide a real failure.
func checkBaseline(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Server []string `yaml:"server"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	got := slices.Sorted(slices.Values(f.Server))
	want := slices.Sorted(maps.Keys(conformanceFixtures))
	if !slices.Equal(got, want) {
		t.Fatalf("%s lists %v; it may list only the scenarios that need the reference server's fixtures: %v", path, got, want)
	}
}

// headerProxy serves the gateway at target through a proxy that adds
// headers to every request, and returns the proxy's /mcp URL.
func headerProxy(t *testing.T, target string, headers map[string]string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host})
		r.Out.Host = u.Host
		for k, v := range headers {
			r.Out.Header.Set(k, v)
		}
	}}
	ts := httptest.NewServer(p)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// runConformance runs one server scenario of the suite against url with
// the baseline and reads the checks it wrote.
func runConformance(t *testing.T, node, suite, url, scenario, baseline string) conformanceRun {
	t.Helper()
	home, out := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "server", "--url", url, "--scenario", scenario,
		"--expected-failures", baseline, "--output-dir", out, "--timeout", "30000")
	cmd.Env = append(os.Environ(), "HOME="+home, "NO_UPDATE_NOTIFIER=1")
	cmd.WaitDelay = 10 * time.Second
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	start := time.Now()
	r := conformanceRun{Err: cmd.Run()}
	r.Output = output.String()
	files, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
	if len(files) != 1 {
		t.Fatalf("%s: want one checks.json in the output directory, found %v (exit %v)\n%s", scenario, files, r.Err, tail(r.Output, 4000))
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r.Checks); err != nil {
		t.Fatalf("%s: checks.json: %v", scenario, err)
	}
	if len(r.Checks) == 0 {
		t.Fatalf("%s: the suite ran no checks\n%s", scenario, tail(r.Output, 4000))
	}
	t.Logf("%s: %s (%v)", scenario, r.summary(), time.Since(start).Round(time.Millisecond))
	return r
}
