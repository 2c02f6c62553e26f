package tests

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The scale profile (issue 38): docker-compose.yml's Valkey, the override
// that runs several replicas behind HAProxy, HAProxy's configuration, and
// the scale-out of scripts/docker-ci.sh running three replicas with one
// Redis. Docker cannot run on every machine that runs the tests, so the
// files are checked here and scripts/docker-ci.sh runs them.
func TestComposeScaleProfile(t *testing.T) {
	c := yamlDocs(t, "../docker-compose.yml")[0]
	v, ok := at(c, "services.valkey").(map[string]any)
	if !ok {
		t.Fatal("no service valkey")
	}
	if p := strs(at(v, "profiles")); !slices.Equal(p, []string{"scale"}) {
		t.Errorf("valkey profiles %v, want [scale] (opt-in)", p)
	}
	if img := str(at(v, "image")); !regexp.MustCompile(`^valkey/valkey:[78](\.\d+)*-alpine$`).MatchString(img) {
		t.Errorf("valkey image %q, want valkey/valkey:7 or 8, pinned to a minor", img)
	}
	cmd := strings.Join(strs(at(v, "command")), " ")
	for _, want := range []string{"--maxmemory-policy noeviction", "--appendonly yes", "--appendfsync everysec", "--maxmemory "} {
		if !strings.Contains(cmd, want) {
			t.Errorf("valkey command %q lacks %q (an evicting or forgetful memory lets a used token through)", cmd, want)
		}
	}
	if at(v, "ports") != nil {
		t.Errorf("valkey publishes ports %v: it is for the compose network only", at(v, "ports"))
	}
	if u := str(at(v, "user")); u == "" || u == "root" || u == "0" {
		t.Errorf("valkey user %q: must not run as root", u)
	}
	hardened(t, "valkey", v)
	if !slices.ContainsFunc(strs(at(v, "volumes")), func(s string) bool { return strings.HasSuffix(s, ":/data") }) {
		t.Errorf("valkey volumes %v: the append-only file needs /data", at(v, "volumes"))
	}
	if at(v, "healthcheck.test") == nil {
		t.Error("valkey has no healthcheck")
	}
	if str(at(c, "services.mailbox-mcp.depends_on.valkey.condition")) != "service_healthy" || at(c, "services.mailbox-mcp.depends_on.valkey.required") != false {
		t.Errorf("the gateway should wait for a healthy valkey with the scale profile only: %v", at(c, "services.mailbox-mcp.depends_on"))
	}

	o := yamlDocs(t, "../deploy/scale/compose.scale.yml")[0]
	if p := at(o, "services.mailbox-mcp.ports"); p == nil || len(strs(p)) != 0 {
		t.Errorf("replicas publish ports %v: with --scale only the balancer may", p)
	}
	if u := str(at(o, "services.mailbox-mcp.environment.REDIS_URL")); !strings.Contains(u, "redis://valkey:6379/") {
		t.Errorf("REDIS_URL %q, want the scale profile's valkey by default", u)
	}
	lb, ok := at(o, "services.lb").(map[string]any)
	if !ok {
		t.Fatal("deploy/scale/compose.scale.yml has no lb service")
	}
	if p := strs(at(lb, "profiles")); !slices.Equal(p, []string{"scale"}) {
		t.Errorf("lb profiles %v, want [scale]", p)
	}
	if p := strs(at(lb, "ports")); !slices.Equal(p, []string{"127.0.0.1:3000:3000"}) {
		t.Errorf("lb ports %v, want 127.0.0.1:3000:3000 (what the gateway published alone)", p)
	}
	if !slices.Contains(strs(at(lb, "volumes")), "./deploy/scale/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro") {
		t.Errorf("lb volumes %v: want deploy/scale/haproxy.cfg (paths are relative to docker-compose.yml)", at(lb, "volumes"))
	}
	hardened(t, "lb", lb)

	cfg, err := os.ReadFile("../deploy/scale/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server-template gw 10 mailbox-mcp:3000", "option httpchk GET /health", "resolvers docker", "nameserver dns 127.0.0.11:53",
		"balance hdr(Mcp-Session-Id)", "timeout server 65m", "bind :3000"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("deploy/scale/haproxy.cfg lacks %q", want)
		}
	}
}

func hardened(t *testing.T, name string, svc map[string]any) {
	t.Helper()
	if at(svc, "read_only") != true {
		t.Errorf("%s: read_only root filesystem not set", name)
	}
	if !slices.Contains(strs(at(svc, "security_opt")), "no-new-privileges:true") {
		t.Errorf("%s: security_opt lacks no-new-privileges:true", name)
	}
	if !slices.Contains(strs(at(svc, "cap_drop")), "ALL") {
		t.Errorf("%s: cap_drop lacks ALL", name)
	}
}

// docker-ci's scale-out runs its three replicas with one Redis (built from
// deploy/ci/redis.Dockerfile: no registry there) and one PUBLIC_URL (the
// balancer's), and has scaleout check it, a refresh token replayed across
// replicas included; every flag it passes to scaleout exists.
func TestDockerCIScaleOutUsesRedis(t *testing.T) {
	b, err := os.ReadFile("../scripts/docker-ci.sh")
	if err != nil {
		t.Fatal(err)
	}
	ci := string(b)
	_, scale, ok := strings.Cut(ci, "# --- 4. scale-out")
	if !ok {
		t.Fatal("docker-ci.sh has no scale-out step")
	}
	for _, want := range []string{
		`-f deploy/ci/redis.Dockerfile`,
		`docker run -d --name mmcp-ci-redis --network host --read-only --cap-drop ALL`,
		`-e REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"`,
		`-e PUBLIC_URL="http://127.0.0.1:$LB_PORT"`,
		`-redis \`,
		`-refresh-replay -public-url "http://127.0.0.1:$LB_PORT"`,
	} {
		if !strings.Contains(ci, want) {
			t.Errorf("docker-ci.sh lacks %q", want)
		}
	}
	if n := strings.Count(scale, `-e REDIS_URL=`); n != 1 || !strings.Contains(scale, `for p in $GW1 $GW2 $GW3; do`) {
		t.Errorf("the replicas' docker run should carry REDIS_URL once inside the loop over the 3 replicas (found %d)", n)
	}
	if strings.Contains(scale, "TODO") {
		t.Error("the scale-out step still has a TODO")
	}
	if !strings.Contains(ci, "mmcp-ci-redis >/dev/null 2>&1") {
		t.Error("cleanup does not remove the Redis container")
	}
	df, err := os.ReadFile("../deploy/ci/redis.Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FROM ${BASE_IMAGE}", "redis-server", "USER redis", `"--maxmemory-policy", "noeviction"`, `"--save", ""`, `"--bind", "127.0.0.1"`} {
		if !strings.Contains(string(df), want) {
			t.Errorf("deploy/ci/redis.Dockerfile lacks %q", want)
		}
	}
	// Every -flag given to the scaleout binary is one it defines.
	src, err := os.ReadFile("scaleout/main.go")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, m := range regexp.MustCompile(`flag\.(?:String|Bool|Int)\("([a-z-]+)"`).FindAllStringSubmatch(string(src), -1) {
		defined[m[1]] = true
	}
	_, call, _ := strings.Cut(scale, `"$WORK/scaleout" -lb`)
	call = "-lb" + call
	call, _, _ = strings.Cut(call, "|| {")
	call = regexp.MustCompile(`"[^"]*"`).ReplaceAllString(call, `""`) // flags' values, such as commands
	used := regexp.MustCompile(`(?:^|\s)-([a-z][a-z-]*)\s`).FindAllStringSubmatch(call, -1)
	if len(used) < 10 {
		t.Fatalf("found only %d scaleout flags in docker-ci.sh: %q", len(used), call)
	}
	for _, u := range used {
		if !defined[u[1]] {
			t.Errorf("docker-ci.sh passes -%s to scaleout, which does not define it (it defines %v)", u[1], defined)
		}
	}
}

// Kubernetes runs 2 to 10 replicas: each pod takes REDIS_URL from the
// Secret (it holds Redis's password), optionally.
func TestKubernetesRedisURL(t *testing.T) {
	k := kube(t)
	c := at(k["Deployment"], "spec.template.spec.containers.0")
	var found bool
	if env, ok := at(c, "env").([]any); ok {
		for _, e := range env {
			if str(at(e, "name")) == "REDIS_URL" {
				found = true
				if str(at(e, "valueFrom.secretKeyRef.name")) != "mailbox-mcp-secret" || str(at(e, "valueFrom.secretKeyRef.key")) != "REDIS_URL" || at(e, "valueFrom.secretKeyRef.optional") != true {
					t.Errorf("REDIS_URL: %v, want the optional key REDIS_URL of the Secret mailbox-mcp-secret", e)
				}
			}
		}
	}
	if !found {
		t.Error("the Deployment does not pass REDIS_URL")
	}
	cm, _ := os.ReadFile("../deploy/kubernetes/configmap.yaml")
	if strings.Contains(string(cm), "REDIS_URL") {
		t.Error("REDIS_URL in the ConfigMap: it holds a password, it belongs in the Secret")
	}
}
