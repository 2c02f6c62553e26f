package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
)

var update = flag.Bool("update", false, "rewrite .env.example and the table in docs/configuration.md")

const goodKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func base(extra ...string) []string {
	return append([]string{"IMAP_HOST=imap.example.test", "ENCRYPTION_KEY=" + goodKey}, extra...)
}

func TestDefaults(t *testing.T) {
	c, err := FromEnv(base())
	if err != nil {
		t.Fatal(err)
	}
	if c.IMAPPort != 993 || !c.IMAPTLS || c.SMTPPort != 587 || !c.SMTPTLS || c.Port != 3000 ||
		c.MaxPoolSize != 50 || c.MaxPoolPerUser != 4 || c.IMAPTimeout != 30*time.Second ||
		len(c.AllowedOrigins) != 1 || c.AllowedOrigins[0] != "*" || c.MaxRequestBytes != 1<<20 || c.BindAddress != "127.0.0.1" {
		t.Fatalf("defaults wrong: %+v", c)
	}
	if c.IMAPMode() != SecurityTLS || c.SMTPEnabled() {
		t.Fatalf("mode %s, smtp %v", c.IMAPMode(), c.SMTPEnabled())
	}
	if len(c.Key()) != 32 {
		t.Fatal("key not decoded")
	}
}

func TestEmptyMeansUnset(t *testing.T) {
	c, err := FromEnv(base("PORT=", "IMAP_PORT=", "LOG_LEVEL="))
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 3000 || c.IMAPPort != 993 {
		t.Fatalf("empty values did not fall back to defaults: %d %d", c.Port, c.IMAPPort)
	}
}

func TestProblems(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want []string // each must appear in some line
	}{
		{"no key", []string{"IMAP_HOST=h"}, []string{"ENCRYPTION_KEY: required"}},
		{"empty host", []string{"IMAP_HOST=", "ENCRYPTION_KEY=" + goodKey}, []string{"IMAP_HOST: required"}},
		{"no host", []string{"ENCRYPTION_KEY=" + goodKey}, []string{"IMAP_HOST: required"}},
		{"short key", base("ENCRYPTION_KEY=" + goodKey[:63]), []string{"ENCRYPTION_KEY: expected exactly 64 hex characters, got 63"}},
		{"non-hex key", base("ENCRYPTION_KEY=" + goodKey[:63] + "z"), []string{"ENCRYPTION_KEY: expected 64 hex characters"}},
		{"port abc", base("PORT=abc"), []string{`PORT: expected a whole number, got "abc"`}},
		{"port range", base("PORT=70000"), []string{"PORT: expected a port number"}},
		{"imap port zero", base("IMAP_PORT=0"), []string{"IMAP_PORT: expected a port number"}},
		{"bool", base("IMAP_TLS=maybe"), []string{"IMAP_TLS: expected true or false"}},
		{"duration", base("IMAP_TIMEOUT=soon"), []string{"IMAP_TIMEOUT: expected a duration"}},
		{"log level", base("LOG_LEVEL=loud"), []string{"LOG_LEVEL: expected debug, info, warn or error"}},
		{"security", base("IMAP_SECURITY=ssl"), []string{"IMAP_SECURITY: expected tls, starttls or plain"}},
		{"plain imap", base("IMAP_SECURITY=plain"), []string{"IMAP_SECURITY: plain sends mailbox passwords"}},
		{"plain smtp", base("SMTP_HOST=smtp.example.test", "SMTP_TLS=false"), []string{"SMTP_TLS: plain SMTP"}},
		{"pool", base("MAX_POOL_SIZE=0"), []string{"MAX_POOL_SIZE: expected a value greater than zero"}},
		{"per user over total", base("MAX_POOL_SIZE=2", "MAX_POOL_PER_USER=3"), []string{"MAX_POOL_PER_USER: expected at most MAX_POOL_SIZE"}},
		{"origins", base("ALLOWED_ORIGINS=https://ok.example,notaurl"), []string{`ALLOWED_ORIGINS: expected * or a comma-separated list`}},
		{"ca file", base("MAIL_CA_FILE=/nonexistent/ca.pem"), []string{"MAIL_CA_FILE: cannot read"}},
		{"bind", base("BIND_ADDRESS=everywhere"), []string{"BIND_ADDRESS: expected an IP address"}},
		{"authserv-id", base("AUTHSERV_ID=mx.example.com,mx.example.com; dkim=pass"), []string{`AUTHSERV_ID: expected authserv-ids`}},
		{"authserv-id wildcard inside", base("AUTHSERV_ID=mx.*.example.com"), []string{`AUTHSERV_ID: expected authserv-ids`}},
		{"egress bool", base("EGRESS_ALLOW_PRIVATE=yes please"), []string{"EGRESS_ALLOW_PRIVATE: expected true or false"}},
		{"max recipients", base("SMTP_MAX_RECIPIENTS=0"), []string{"SMTP_MAX_RECIPIENTS: expected a value greater than zero"}},
		{"unknown access level", base("MAILBOX_ACCESS=admin"), []string{`MAILBOX_ACCESS: expected read, organize or full, got "admin"`}},
		{"relative public URL", base("PUBLIC_URL=mail.example.com"), []string{"PUBLIC_URL: expected an absolute http or https URL"}},
		{"negative attachments", base("MAX_ATTACHMENT_BYTES=-1"), []string{"MAX_ATTACHMENT_BYTES: expected zero"}},
		{"pprof not host:port", base("PPROF_ADDR=6060"), []string{"PPROF_ADDR: expected host:port"}},
		{"pprof bad host", base("PPROF_ADDR=my host:6060"), []string{"PPROF_ADDR: expected an IP address or localhost"}},
		{"pprof on the public port", base("PORT=3000", "PPROF_ADDR=127.0.0.1:3000"), []string{"PPROF_ADDR: must not share PORT 3000"}},
		{"several at once", []string{"PORT=abc"}, []string{"IMAP_HOST: required", "ENCRYPTION_KEY: required", "PORT: expected a whole number"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromEnv(tt.env)
			var p Problems
			if !errors.As(err, &p) {
				t.Fatalf("err = %v, want Problems", err)
			}
			for _, w := range tt.want {
				found := false
				for _, line := range p {
					found = found || strings.Contains(line, w)
				}
				if !found {
					t.Errorf("no line contains %q in:\n%s", w, p)
				}
			}
		})
	}
}

// The attachment cap follows the request limit unless set, and may not
// exceed what a request can carry.
func TestAttachmentLimit(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want int64
	}{
		{nil, 786432},
		{[]string{"MAX_REQUEST_BYTES=4194304"}, 3145728},
		{[]string{"MAX_ATTACHMENT_BYTES=500000"}, 500000},
		{[]string{"MAX_ATTACHMENT_BYTES=0"}, 786432},
		{[]string{"MAX_REQUEST_BYTES=16777216"}, 5242880},
		{[]string{"MAX_REQUEST_BYTES=4194304", "MAX_ATTACHMENT_BYTES=3000000"}, 3000000},
	} {
		c, err := FromEnv(base(tc.env...))
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		if got := c.AttachmentLimit(); got != tc.want {
			t.Errorf("%v: AttachmentLimit %d, want %d", tc.env, got, tc.want)
		}
		if c.SMTPMaxRecipients != 100 || c.SentFolder != "" {
			t.Errorf("defaults: %d %q", c.SMTPMaxRecipients, c.SentFolder)
		}
	}
}

func TestPlainAllowedExplicitly(t *testing.T) {
	c, err := FromEnv(base("IMAP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true", "SMTP_HOST=s", "SMTP_TLS=false"))
	if err != nil {
		t.Fatal(err)
	}
	if c.IMAPMode() != SecurityPlain || c.SMTPMode() != SecurityPlain {
		t.Fatal("modes")
	}
	c, _ = FromEnv(base("SMTP_HOST=s", "SMTP_PORT=465"))
	if c.SMTPMode() != SecurityTLS {
		t.Fatalf("465 should be implicit TLS, got %s", c.SMTPMode())
	}
	c, _ = FromEnv(base("SMTP_HOST=s"))
	if c.SMTPMode() != SecurityStartTLS {
		t.Fatalf("587 should be STARTTLS, got %s", c.SMTPMode())
	}
	c, _ = FromEnv(base("IMAP_TLS=false"))
	if c.IMAPMode() != SecurityStartTLS {
		t.Fatalf("IMAP_TLS=false should be STARTTLS, got %s", c.IMAPMode())
	}
}

func TestKeyOnly(t *testing.T) {
	if _, err := keyFromEnv([]string{"ENCRYPTION_KEY=" + goodKey}); err != nil {
		t.Fatal(err)
	}
	if _, err := keyFromEnv(nil); err == nil || !strings.Contains(err.Error(), "ENCRYPTION_KEY") {
		t.Fatalf("missing key: %v", err)
	}
	if _, err := keyFromEnv([]string{"ENCRYPTION_KEY=abc"}); err == nil {
		t.Fatal("short key accepted")
	}
}

// The token command's view of MAILBOX_ACCESS: unset says so, a level is
// read, anything else is a problem naming the variable.
func TestAccessOnly(t *testing.T) {
	if l, set, err := accessFromEnv([]string{"PATH=/bin", "MAILBOX_ACCESS="}); l != 0 || set || err != nil {
		t.Fatalf("unset: %v %v %v", l, set, err)
	}
	if l, set, err := accessFromEnv([]string{"MAILBOX_ACCESS=Organize"}); l != access.Organize || !set || err != nil {
		t.Fatalf("organize: %v %v %v", l, set, err)
	}
	if _, _, err := accessFromEnv([]string{"MAILBOX_ACCESS=admin"}); err == nil || !strings.HasPrefix(err.Error(), "MAILBOX_ACCESS: ") {
		t.Fatalf("admin: %v", err)
	}
}

// The demo's keys: absent is no key (the demo makes one), set must be valid.
func TestOptionalKeys(t *testing.T) {
	const otherKey = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	tests := []struct {
		name          string
		env           []string
		key, previous bool
		wantProblem   string // "" for none
	}{
		{name: "none", env: []string{"PATH=/bin", "ENCRYPTION_KEY="}},
		{name: "key", env: []string{"ENCRYPTION_KEY=" + goodKey}, key: true},
		{name: "both", env: []string{"ENCRYPTION_KEY=" + goodKey, "ENCRYPTION_KEY_PREVIOUS=" + otherKey}, key: true, previous: true},
		{name: "previous only", env: []string{"ENCRYPTION_KEY_PREVIOUS=" + otherKey}, previous: true},
		{name: "short key", env: []string{"ENCRYPTION_KEY=abc"}, wantProblem: "ENCRYPTION_KEY: expected exactly 64 hex characters, got 3"},
		{name: "non-hex previous", env: []string{"ENCRYPTION_KEY=" + goodKey, "ENCRYPTION_KEY_PREVIOUS=" + otherKey[:62] + "zz"}, wantProblem: "ENCRYPTION_KEY_PREVIOUS: expected 64 hex characters"},
		{name: "previous equals key", env: []string{"ENCRYPTION_KEY=" + goodKey, "ENCRYPTION_KEY_PREVIOUS=" + strings.ToUpper(goodKey)}, wantProblem: "ENCRYPTION_KEY_PREVIOUS: is the same as ENCRYPTION_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, prev, err := optionalKeys(tt.env)
			if tt.wantProblem == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				var p Problems
				if !errors.As(err, &p) || !strings.Contains(err.Error(), tt.wantProblem) {
					t.Fatalf("got %v, want a problem %q", err, tt.wantProblem)
				}
			}
			if (len(key) == 32) != tt.key || (len(prev) == 32) != tt.previous {
				t.Fatalf("key %x previous %x", key, prev)
			}
		})
	}
	// A set key must open what Load's key opens.
	key, _, _ := optionalKeys([]string{"ENCRYPTION_KEY=" + goodKey})
	c, err := FromEnv(base())
	if err != nil || string(c.Key()) != string(key) {
		t.Fatalf("optional key %x, Load's %x (%v)", key, c.Key(), err)
	}
}

func TestHealthURL(t *testing.T) {
	if u := healthURL([]string{"PORT=4000", "BIND_ADDRESS=0.0.0.0"}); u != "http://127.0.0.1:4000/health" {
		t.Fatal(u)
	}
}

// The checked-in .env.example and docs/configuration.md must list exactly
// what the Config struct reads.
func TestGeneratedFilesInStep(t *testing.T) {
	root := filepath.Join("..", "..")
	envPath := filepath.Join(root, ".env.example")
	docPath := filepath.Join(root, "docs", "configuration.md")
	const begin, end = "<!-- BEGIN VARIABLES (generated: go test ./internal/config -update) -->\n", "<!-- END VARIABLES -->"
	if *update {
		if err := os.WriteFile(envPath, []byte(EnvExample()), 0o644); err != nil {
			t.Fatal(err)
		}
		doc, err := os.ReadFile(docPath)
		if err != nil {
			t.Fatal(err)
		}
		s := string(doc)
		i, j := strings.Index(s, begin), strings.Index(s, end)
		if i < 0 || j < i {
			t.Fatalf("%s lacks the BEGIN/END VARIABLES markers", docPath)
		}
		s = s[:i+len(begin)] + MarkdownTable() + s[j:]
		if err := os.WriteFile(docPath, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(envPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != EnvExample() {
		t.Errorf(".env.example is out of step with internal/config; run: go test ./internal/config -update")
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), begin+MarkdownTable()+end) {
		t.Errorf("docs/configuration.md is out of step with internal/config; run: go test ./internal/config -update")
	}
	for _, v := range Variables() {
		if v.Description == "" {
			t.Errorf("%s has no desc tag", v.Key)
		}
	}
}
