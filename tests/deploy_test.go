package tests

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The deployment artifacts, checked without a Docker engine or a cluster:
// docker-compose.yml and deploy/kubernetes/*.yaml are parsed and their
// security-relevant settings asserted; the Dockerfile is checked line by
// line; scripts/docker-build-check.sh runs the Dockerfile's build steps.

// yamlDocs parses every document of a YAML file into generic maps.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
	return docs
}

// at walks a path of map keys and list indexes ("spec.template.0").
func at(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func strs(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func TestComposeFile(t *testing.T) {
	docs := yamlDocs(t, "../docker-compose.yml")
	if len(docs) != 1 {
		t.Fatalf("want one YAML document, got %d", len(docs))
	}
	c := docs[0]
	gw, ok := at(c, "services.mailbox-mcp").(map[string]any)
	if !ok {
		t.Fatal("no service mailbox-mcp")
	}
	if at(gw, "profiles") != nil {
		t.Error("the gateway must run without a profile")
	}
	if str(at(gw, "build.context")) != "." {
		t.Errorf("gateway build context %v, want . (the Dockerfile at the root)", at(gw, "build.context"))
	}
	if !strings.Contains(str(at(gw, "build.args.VERSION")), "VERSION") {
		t.Errorf("gateway build does not pass the VERSION build arg: %v", at(gw, "build.args"))
	}
	if e := at(gw, "env_file"); e != ".env" && !slices.Contains(strs(e), ".env") {
		t.Errorf("env_file %v, want .env", e)
	}
	if p := strs(at(gw, "ports")); !slices.Contains(p, "127.0.0.1:3000:3000") {
		t.Errorf("ports %v, want 127.0.0.1:3000:3000 (published on loopback only)", p)
	}
	if str(at(gw, "environment.BIND_ADDRESS")) != "0.0.0.0" {
		t.Errorf("BIND_ADDRESS %v: the gateway must listen on all interfaces inside the container", at(gw, "environment.BIND_ADDRESS"))
	}
	if r := str(at(gw, "restart")); r != "unless-stopped" && r != "always" {
		t.Errorf("restart %q", r)
	}
	if at(gw, "read_only") != true {
		t.Error("read_only root filesystem not set")
	}
	if !slices.Contains(strs(at(gw, "security_opt")), "no-new-privileges:true") {
		t.Errorf("security_opt %v lacks no-new-privileges:true", at(gw, "security_opt"))
	}
	if !slices.Contains(strs(at(gw, "cap_drop")), "ALL") {
		t.Errorf("cap_drop %v lacks ALL", at(gw, "cap_drop"))
	}
	if hc := strs(at(gw, "healthcheck.test")); !slices.Equal(hc, []string{"CMD", "/mailbox-mcp", "healthcheck"}) {
		t.Errorf("healthcheck.test %v, want [CMD /mailbox-mcp healthcheck]", hc)
	}
	for _, k := range []string{"interval", "timeout", "retries"} {
		if at(gw, "healthcheck."+k) == nil {
			t.Errorf("healthcheck.%s not set", k)
		}
	}

	ms, ok := at(c, "services.mailserver").(map[string]any)
	if !ok {
		t.Fatal("no service mailserver")
	}
	if p := strs(at(ms, "profiles")); !slices.Equal(p, []string{"mail"}) {
		t.Errorf("mailserver profiles %v, want [mail] (opt-in)", p)
	}
	df := str(at(ms, "build.dockerfile"))
	if df == "" {
		t.Fatal("mailserver has no build.dockerfile")
	}
	b, err := os.ReadFile(filepath.Join("..", str(at(ms, "build.context")), df))
	if err != nil {
		t.Fatalf("mailserver Dockerfile: %v", err)
	}
	for _, want := range []string{"dovecot-imapd", "dovecot-lmtpd", "postfix", "COPY scripts/mailstack.sh"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("mailserver Dockerfile lacks %q", want)
		}
	}
	for _, f := range []string{"entrypoint.sh", "healthcheck.sh", "gateway.env"} {
		if _, err := os.Stat(filepath.Join("../deploy/mailserver", f)); err != nil {
			t.Error(err)
		}
	}
	if at(ms, "healthcheck.test") == nil {
		t.Error("mailserver has no healthcheck")
	}
	if str(at(gw, "depends_on.mailserver.condition")) != "service_healthy" || at(gw, "depends_on.mailserver.required") != false {
		t.Errorf("the gateway should wait for a healthy mailserver when the profile is on, and only then: %v", at(gw, "depends_on"))
	}
	// the gateway env of the mail profile points at the mail server and trusts its CA
	env, err := os.ReadFile("../deploy/mailserver/gateway.env")
	if err != nil {
		t.Fatal(err)
	}
	mountsCerts := slices.ContainsFunc(strs(at(gw, "volumes")), func(v string) bool { return strings.HasPrefix(v, "mail-certs:/certs") })
	if !mountsCerts || !strings.Contains(string(env), "MAIL_CA_FILE=/certs/") || !strings.Contains(string(env), "IMAP_HOST=mail.example.test") {
		t.Errorf("mail profile wiring: certs volume mounted=%v, gateway.env=%s", mountsCerts, env)
	}
	if !slices.Contains(strs(at(ms, "networks.default.aliases")), "mail.example.test") {
		t.Error("the mail server must be reachable as mail.example.test (the name in its certificate)")
	}
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string // instructions, continuation lines joined, comments dropped
	cur := ""
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") || (l == "" && cur == "") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		lines = append(lines, cur+l)
		cur = ""
	}
	has := func(re string) []string {
		var out []string
		r := regexp.MustCompile(re)
		for _, l := range lines {
			if r.MatchString(l) {
				out = append(out, l)
			}
		}
		return out
	}
	froms := has(`^FROM `)
	if len(froms) < 2 || !strings.Contains(froms[0], " AS build") {
		t.Fatalf("want a multi-stage build (FROM ... AS build, then a runtime stage): %v", froms)
	}
	runtime := froms[len(froms)-1]
	if !regexp.MustCompile(`^FROM (scratch|gcr\.io/distroless/static\S*)$`).MatchString(runtime) {
		t.Errorf("runtime stage %q: want scratch or distroless/static", runtime)
	}
	if len(has(`CGO_ENABLED=0 .*go build`)) != 1 {
		t.Error("no CGO_ENABLED=0 go build")
	}
	if len(has(`-ldflags ".*-X github.com/mailbox-mcp/mailbox-mcp/internal/buildinfo.version=\$\{VERSION\}`)) != 1 {
		t.Error("the version is not linked in with -X ...buildinfo.version=${VERSION}")
	}
	if len(has(`^ARG VERSION`)) == 0 {
		t.Error("no ARG VERSION")
	}
	if len(has(`^COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt$`)) != 1 {
		t.Error("the runtime image gets no CA certificates")
	}
	users := has(`^USER `)
	if len(users) == 0 || strings.HasPrefix(users[len(users)-1], "USER root") || strings.HasPrefix(users[len(users)-1], "USER 0") {
		t.Errorf("the image must run as a non-root USER: %v", users)
	}
	if len(has(`^EXPOSE 3000$`)) != 1 {
		t.Error("no EXPOSE 3000")
	}
	if len(has(`^HEALTHCHECK .*CMD \["/mailbox-mcp", "healthcheck"\]$`)) != 1 {
		t.Error(`no HEALTHCHECK ... CMD ["/mailbox-mcp", "healthcheck"]`)
	}
	if len(has(`^ENV BIND_ADDRESS=0\.0\.0\.0`)) != 1 {
		t.Error("BIND_ADDRESS=0.0.0.0 not set in the image")
	}
	if len(has(`^ENTRYPOINT \["/mailbox-mcp"\]$`)) != 1 {
		t.Error(`no ENTRYPOINT ["/mailbox-mcp"]`)
	}
	// everything the build COPYs is in the build context .dockerignore leaves
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"!go.mod", "!go.sum", "!cmd/", "!internal/"} {
		if !strings.Contains(string(ignore), want+"\n") {
			t.Errorf(".dockerignore does not let %s into the context", want)
		}
	}
}

// kube returns the manifests of deploy/kubernetes by kind.
func kube(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob("../deploy/kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	byKind := map[string]map[string]any{}
	for _, f := range files {
		for _, d := range yamlDocs(t, f) {
			kind := str(d["kind"])
			if kind == "" || str(d["apiVersion"]) == "" {
				t.Errorf("%s: a document without kind or apiVersion", f)
				continue
			}
			if _, dup := byKind[kind]; dup && kind != "Kustomization" {
				t.Errorf("two %s manifests", kind)
			}
			byKind[kind] = d
		}
	}
	return byKind
}

func TestKubernetesManifests(t *testing.T) {
	k := kube(t)
	dep := k["Deployment"]
	if dep == nil {
		t.Fatal("no Deployment")
	}
	labels := at(dep, "spec.template.metadata.labels").(map[string]any)
	c := at(dep, "spec.template.spec.containers.0")
	if c == nil {
		t.Fatal("Deployment has no container")
	}
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		if p := str(at(c, probe+".httpGet.path")); p != "/health" {
			t.Errorf("%s path %q, want /health", probe, p)
		}
		if str(at(c, probe+".httpGet.port")) != str(at(c, "ports.0.name")) {
			t.Errorf("%s port %v is not the container port %v", probe, at(c, probe+".httpGet.port"), at(c, "ports.0.name"))
		}
	}
	if at(c, "ports.0.containerPort") != 3000 {
		t.Errorf("containerPort %v", at(c, "ports.0.containerPort"))
	}
	for _, r := range []string{"requests.cpu", "requests.memory", "limits.memory"} {
		if at(c, "resources."+r) == nil {
			t.Errorf("resources.%s not set", r)
		}
	}
	if at(dep, "spec.template.spec.securityContext.runAsNonRoot") != true || at(c, "securityContext.runAsNonRoot") != true {
		t.Error("runAsNonRoot not set")
	}
	if at(c, "securityContext.readOnlyRootFilesystem") != true {
		t.Error("readOnlyRootFilesystem not set")
	}
	if at(c, "securityContext.allowPrivilegeEscalation") != false {
		t.Error("allowPrivilegeEscalation not false")
	}
	if !slices.Contains(strs(at(c, "securityContext.capabilities.drop")), "ALL") {
		t.Error("capabilities not dropped")
	}
	var keyFromSecret string
	if env, ok := at(c, "env").([]any); ok {
		for _, e := range env {
			if str(at(e, "name")) == "ENCRYPTION_KEY" {
				keyFromSecret = str(at(e, "valueFrom.secretKeyRef.name"))
				if str(at(e, "value")) != "" {
					t.Error("ENCRYPTION_KEY has a literal value")
				}
			}
		}
	}
	if keyFromSecret == "" {
		t.Fatal("ENCRYPTION_KEY does not come from a Secret")
	}
	if sec := k["Secret"]; sec == nil || str(at(sec, "metadata.name")) != keyFromSecret {
		t.Errorf("the example Secret is not named %q", keyFromSecret)
	}
	if cm := k["ConfigMap"]; cm == nil || str(at(c, "envFrom.0.configMapRef.name")) != str(at(cm, "metadata.name")) {
		t.Error("the container does not take its ConfigMap")
	} else if at(cm, "data.ENCRYPTION_KEY") != nil {
		t.Error("the key must not be in the ConfigMap")
	} else if str(at(cm, "data.BIND_ADDRESS")) != "0.0.0.0" {
		t.Error("BIND_ADDRESS is not 0.0.0.0 in the ConfigMap")
	}

	svc := k["Service"]
	if svc == nil {
		t.Fatal("no Service")
	}
	if !matches(at(svc, "spec.selector"), labels) || str(at(svc, "spec.ports.0.targetPort")) != "http" {
		t.Errorf("Service selector %v / targetPort %v do not reach the pods %v", at(svc, "spec.selector"), at(svc, "spec.ports.0.targetPort"), labels)
	}
	hpa := k["HorizontalPodAutoscaler"]
	if hpa == nil {
		t.Fatal("no HorizontalPodAutoscaler")
	}
	if str(at(hpa, "apiVersion")) != "autoscaling/v2" || str(at(hpa, "spec.scaleTargetRef.kind")) != "Deployment" ||
		str(at(hpa, "spec.scaleTargetRef.name")) != str(at(dep, "metadata.name")) {
		t.Errorf("HPA does not target the Deployment: %v", at(hpa, "spec.scaleTargetRef"))
	}
	minR, _ := at(hpa, "spec.minReplicas").(int)
	maxR, _ := at(hpa, "spec.maxReplicas").(int)
	if minR < 2 || maxR < minR {
		t.Errorf("HPA replicas %d..%d: want at least 2 for availability", minR, maxR)
	}
	pdb := k["PodDisruptionBudget"]
	if pdb == nil {
		t.Fatal("no PodDisruptionBudget")
	}
	if !matches(at(pdb, "spec.selector.matchLabels"), labels) || at(pdb, "spec.minAvailable") == nil && at(pdb, "spec.maxUnavailable") == nil {
		t.Errorf("PDB does not cover the pods: %v", at(pdb, "spec"))
	}
	kz := k["Kustomization"]
	if kz == nil {
		t.Fatal("no kustomization.yaml")
	}
	res := strs(at(kz, "resources"))
	for _, f := range res {
		if _, err := os.Stat(filepath.Join("../deploy/kubernetes", f)); err != nil {
			t.Errorf("kustomization resource: %v", err)
		}
	}
	for _, want := range []string{"deployment.yaml", "service.yaml", "hpa.yaml", "pdb.yaml", "configmap.yaml"} {
		if !slices.Contains(res, want) {
			t.Errorf("kustomization lacks %s", want)
		}
	}
	if slices.Contains(res, "secret.example.yaml") {
		t.Error("the example Secret must not be applied by kustomize")
	}
	t.Logf("Deployment probes on /health; ENCRYPTION_KEY from Secret %q; HPA %d..%d replicas; PDB", keyFromSecret, minR, maxR)
}

// matches says whether every label of sel is in labels.
func matches(sel any, labels map[string]any) bool {
	m, ok := sel.(map[string]any)
	if !ok || len(m) == 0 {
		return false
	}
	for k, v := range m {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// scripts/docker-build-check.sh builds the binary the way the Dockerfile
// does and runs it.
func TestDockerBuildSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary: not in -short")
	}
	cmd := exec.Command("bash", "../scripts/docker-build-check.sh", "v9.9.9-test")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker-build-check.sh: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ok: version: mailbox-mcp v9.9.9-test") || !strings.Contains(string(out), "PASS") {
		t.Fatalf("unexpected output:\n%s", out)
	}
	t.Logf("%s", out)
}
