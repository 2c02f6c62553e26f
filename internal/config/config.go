// Package config owns the gateway's configuration: the Config struct, its
// defaults and its validation. It is the only package that reads the
// environment; everything else receives typed values from here.
package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Security says how a mail connection is protected.
type Security string

const (
	SecurityTLS      Security = "tls"      // implicit TLS from the first byte
	SecurityStartTLS Security = "starttls" // plain connect, STARTTLS required before login
	SecurityPlain    Security = "plain"    // no TLS at all: local development only
)

// Config is the whole configuration of one gateway process. The `env` tags
// name the variables; `envDefault` gives defaults; `desc` is the one-line
// description used by .env.example and docs/configuration.md (a test keeps
// them in step).
type Config struct {
	IMAPHost     string        `env:"IMAP_HOST,required" desc:"IMAP server host name (required)"`
	IMAPPort     int           `env:"IMAP_PORT" envDefault:"993" desc:"IMAP server port"`
	IMAPTLS      bool          `env:"IMAP_TLS" envDefault:"true" desc:"true: implicit TLS; false: STARTTLS (see IMAP_SECURITY)"`
	IMAPSecurity Security      `env:"IMAP_SECURITY" desc:"tls, starttls or plain; overrides IMAP_TLS (plain needs ALLOW_PLAINTEXT_AUTH=true)"`
	IMAPTimeout  time.Duration `env:"IMAP_TIMEOUT" envDefault:"30s" desc:"deadline for one IMAP operation, dial and login included"`

	SMTPHost     string        `env:"SMTP_HOST" desc:"SMTP submission host; empty disables the smtp_ tools"`
	SMTPPort     int           `env:"SMTP_PORT" envDefault:"587" desc:"SMTP submission port"`
	SMTPTLS      bool          `env:"SMTP_TLS" envDefault:"true" desc:"true: implicit TLS on port 465, STARTTLS otherwise; false: plain text"`
	SMTPSecurity Security      `env:"SMTP_SECURITY" desc:"tls, starttls or plain; overrides SMTP_TLS"`
	SMTPTimeout  time.Duration `env:"SMTP_TIMEOUT" envDefault:"60s" desc:"deadline for one SMTP send"`

	MailCAFile         string `env:"MAIL_CA_FILE" desc:"PEM file of extra CA certificates to trust for the IMAP and SMTP servers (self-signed servers)"`
	AllowPlaintextAuth bool   `env:"ALLOW_PLAINTEXT_AUTH" envDefault:"false" desc:"allow sending passwords over an unencrypted mail connection (local development only)"`

	EncryptionKey string `env:"ENCRYPTION_KEY,required" desc:"64 hex characters (32 bytes) sealing credential tokens; make one with 'mailbox-mcp keygen' (required)"`

	BindAddress     string        `env:"BIND_ADDRESS" envDefault:"127.0.0.1" desc:"address the HTTP server listens on; 0.0.0.0 in containers"`
	Port            int           `env:"PORT" envDefault:"3000" desc:"HTTP port"`
	LogLevel        slog.Level    `env:"LOG_LEVEL" envDefault:"info" desc:"debug, info, warn or error"`
	AllowedOrigins  []string      `env:"ALLOWED_ORIGINS" envDefault:"*" envSeparator:"," desc:"comma-separated browser origins allowed to call /mcp; * allows any"`
	MaxRequestBytes int64         `env:"MAX_REQUEST_BYTES" envDefault:"1048576" desc:"largest accepted HTTP request body in bytes"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"15s" desc:"how long in-flight calls may run after SIGTERM"`

	MaxPoolSize    int           `env:"MAX_POOL_SIZE" envDefault:"50" desc:"most IMAP connections open at once, all users together"`
	MaxPoolPerUser int           `env:"MAX_POOL_PER_USER" envDefault:"4" desc:"most IMAP connections open at once for one user"`
	PoolIdleTime   time.Duration `env:"POOL_IDLE_TIMEOUT" envDefault:"5m" desc:"an idle pooled IMAP connection is closed after this long"`
}

// Problems is every reason the configuration was refused, one per line.
type Problems []string

func (p Problems) Error() string { return strings.Join(p, "\n") }

// Load reads the configuration from the process environment; overrides are
// KEY=VALUE pairs that win over it (the demo uses them).
func Load(overrides ...string) (*Config, error) {
	return FromEnv(append(os.Environ(), overrides...))
}

// FromEnv reads the configuration from KEY=VALUE pairs. A variable set to the
// empty string counts as not set: it gets its default, or is reported missing
// when required (caarlos0/env would otherwise let it through).
func FromEnv(environ []string) (*Config, error) {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && v != "" {
			vars[k] = v
		}
	}
	var c Config
	var problems Problems
	err := env.ParseWithOptions(&c, env.Options{Environment: vars})
	if err != nil {
		problems = append(problems, describeEnvErrors(err, vars)...)
	}
	problems = append(problems, c.validate(vars)...)
	if len(problems) > 0 {
		return nil, problems
	}
	return &c, nil
}

// describeEnvErrors turns caarlos0/env's errors into one line per variable.
func describeEnvErrors(err error, vars map[string]string) []string {
	var agg env.AggregateError
	errs := []error{err}
	if errors.As(err, &agg) {
		errs = agg.Errors
	}
	keys := fieldKeys()
	var out []string
	for _, e := range errs {
		var notSet env.VarIsNotSetError
		var parse env.ParseError
		switch {
		case errors.As(e, &notSet):
			out = append(out, fmt.Sprintf("%s: required but not set", notSet.Key))
		case errors.As(e, &parse):
			key := keys[parse.Name]
			out = append(out, fmt.Sprintf("%s: %s, got %q", key, expectation(parse.Type), vars[key]))
		default:
			out = append(out, e.Error())
		}
	}
	return out
}

func expectation(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[time.Duration]():
		return "expected a duration such as 30s or 5m"
	case reflect.TypeFor[slog.Level]():
		return "expected debug, info, warn or error"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "expected true or false"
	case reflect.Int, reflect.Int64:
		return "expected a whole number"
	}
	return "expected a value of type " + t.String()
}

// fieldKeys maps struct field names to their variable names.
func fieldKeys() map[string]string {
	m := map[string]string{}
	for _, v := range Variables() {
		m[v.Field] = v.Key
	}
	return m
}

func (c *Config) validate(vars map[string]string) []string {
	var p []string
	bad := func(key, format string, args ...any) { p = append(p, key+": "+fmt.Sprintf(format, args...)) }

	if c.EncryptionKey != "" {
		if msg := checkKey(c.EncryptionKey); msg != "" {
			bad("ENCRYPTION_KEY", "%s", msg)
		}
	}
	if c.IMAPHost != "" && strings.ContainsAny(c.IMAPHost, " /:@") && net.ParseIP(c.IMAPHost) == nil {
		bad("IMAP_HOST", "expected a host name or IP address, got %q", c.IMAPHost)
	}
	for _, pp := range []struct {
		key  string
		port int
	}{{"IMAP_PORT", c.IMAPPort}, {"SMTP_PORT", c.SMTPPort}, {"PORT", c.Port}} {
		if _, set := vars[pp.key]; set && (pp.port < 1 || pp.port > 65535) {
			bad(pp.key, "expected a port number from 1 to 65535, got %q", vars[pp.key])
		}
	}
	for _, s := range []struct {
		key string
		v   Security
	}{{"IMAP_SECURITY", c.IMAPSecurity}, {"SMTP_SECURITY", c.SMTPSecurity}} {
		switch s.v {
		case "", SecurityTLS, SecurityStartTLS, SecurityPlain:
		default:
			bad(s.key, "expected tls, starttls or plain, got %q", string(s.v))
		}
	}
	if !c.AllowPlaintextAuth {
		if c.IMAPHost != "" && c.IMAPMode() == SecurityPlain {
			bad("IMAP_SECURITY", "plain sends mailbox passwords unencrypted; use tls or starttls, or set ALLOW_PLAINTEXT_AUTH=true for local development")
		}
		if c.SMTPHost != "" && c.SMTPMode() == SecurityPlain {
			bad("SMTP_TLS", "plain SMTP would send mailbox passwords unencrypted; use SMTP_TLS=true, or set ALLOW_PLAINTEXT_AUTH=true for local development")
		}
	}
	switch c.LogLevel {
	case slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError:
	default:
		bad("LOG_LEVEL", "expected debug, info, warn or error, got %q", vars["LOG_LEVEL"])
	}
	if net.ParseIP(c.BindAddress) == nil && c.BindAddress != "localhost" {
		bad("BIND_ADDRESS", "expected an IP address such as 127.0.0.1 or 0.0.0.0, got %q", c.BindAddress)
	}
	for _, o := range c.AllowedOrigins {
		o = strings.TrimSpace(o)
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			bad("ALLOWED_ORIGINS", "expected * or a comma-separated list of origins such as https://app.example.com, got %q", o)
		}
	}
	positive := []struct {
		key string
		v   int64
	}{
		{"MAX_POOL_SIZE", int64(c.MaxPoolSize)}, {"MAX_POOL_PER_USER", int64(c.MaxPoolPerUser)},
		{"MAX_REQUEST_BYTES", c.MaxRequestBytes},
		{"IMAP_TIMEOUT", int64(c.IMAPTimeout)}, {"SMTP_TIMEOUT", int64(c.SMTPTimeout)},
		{"SHUTDOWN_TIMEOUT", int64(c.ShutdownTimeout)}, {"POOL_IDLE_TIMEOUT", int64(c.PoolIdleTime)},
	}
	for _, n := range positive {
		if n.v <= 0 {
			bad(n.key, "expected a value greater than zero, got %q", vars[n.key])
		}
	}
	if c.MaxPoolPerUser > c.MaxPoolSize && c.MaxPoolSize > 0 {
		bad("MAX_POOL_PER_USER", "expected at most MAX_POOL_SIZE (%d), got %d", c.MaxPoolSize, c.MaxPoolPerUser)
	}
	if c.MailCAFile != "" {
		if _, err := c.LoadCAs(); err != nil {
			bad("MAIL_CA_FILE", "%v", err)
		}
	}
	return p
}

// IMAPMode is the effective IMAP connection security.
func (c *Config) IMAPMode() Security {
	if c.IMAPSecurity != "" {
		return c.IMAPSecurity
	}
	if c.IMAPTLS {
		return SecurityTLS
	}
	return SecurityStartTLS
}

// SMTPMode is the effective SMTP connection security: SMTP_TLS=true means
// implicit TLS on port 465 and STARTTLS on any other port.
func (c *Config) SMTPMode() Security {
	if c.SMTPSecurity != "" {
		return c.SMTPSecurity
	}
	if !c.SMTPTLS {
		return SecurityPlain
	}
	if c.SMTPPort == 465 {
		return SecurityTLS
	}
	return SecurityStartTLS
}

// SMTPEnabled reports whether the smtp_ tools are offered.
func (c *Config) SMTPEnabled() bool { return c.SMTPHost != "" }

// Key returns the decoded token key. It is valid only after FromEnv succeeded.
func (c *Config) Key() []byte {
	k, _ := hex.DecodeString(c.EncryptionKey)
	return k
}

// ListenAddr is the HTTP listen address.
func (c *Config) ListenAddr() string {
	return net.JoinHostPort(c.BindAddress, strconv.Itoa(c.Port))
}

// LoadCAs returns the system roots plus MAIL_CA_FILE's certificates, or nil
// (the system roots) when no file is configured.
func (c *Config) LoadCAs() (*x509.CertPool, error) {
	if c.MailCAFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(c.MailCAFile)
	if err != nil {
		return nil, fmt.Errorf("cannot read the CA file: %v", errors.Unwrap(err))
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("expected PEM certificates in %s, found none", c.MailCAFile)
	}
	return pool, nil
}

// TLSConfig is the client TLS configuration for a mail server host.
func (c *Config) TLSConfig(host string) (*tls.Config, error) {
	roots, err := c.LoadCAs()
	if err != nil {
		return nil, err
	}
	return &tls.Config{ServerName: host, RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}

// Variable describes one environment variable of Config.
type Variable struct {
	Key, Field, Default, Description string
	Required                         bool
}

// Variables lists every variable Config reads, in declaration order.
func Variables() []Variable {
	t := reflect.TypeFor[Config]()
	var out []Variable
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("env")
		if !ok {
			continue
		}
		key, opts, _ := strings.Cut(tag, ",")
		out = append(out, Variable{
			Key: key, Field: f.Name, Default: f.Tag.Get("envDefault"),
			Description: f.Tag.Get("desc"), Required: strings.Contains(opts, "required"),
		})
	}
	return out
}

// LoadKey reads and checks only ENCRYPTION_KEY, for commands that need
// nothing else (token).
func LoadKey() ([]byte, error) { return keyFromEnv(os.Environ()) }

func keyFromEnv(environ []string) ([]byte, error) {
	var key string
	for _, kv := range environ {
		if k, v, _ := strings.Cut(kv, "="); k == "ENCRYPTION_KEY" {
			key = v
		}
	}
	if key == "" {
		return nil, Problems{"ENCRYPTION_KEY: required but not set (make one with 'mailbox-mcp keygen')"}
	}
	if msg := checkKey(key); msg != "" {
		return nil, Problems{"ENCRYPTION_KEY: " + msg}
	}
	k, _ := hex.DecodeString(key)
	return k, nil
}

func checkKey(key string) string {
	if len(key) != 64 {
		return fmt.Sprintf("expected exactly 64 hex characters, got %d characters (make one with 'mailbox-mcp keygen')", len(key))
	}
	if _, err := hex.DecodeString(key); err != nil {
		return "expected 64 hex characters (0-9, a-f), found a non-hex character"
	}
	return ""
}

// HealthURL is the URL of the local gateway's /health endpoint as
// configured by PORT and BIND_ADDRESS, for the healthcheck command.
func HealthURL() string { return healthURL(os.Environ()) }

func healthURL(environ []string) string {
	port, host := "3000", "127.0.0.1"
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "PORT" && v != "":
			port = v
		case k == "BIND_ADDRESS" && v != "" && v != "0.0.0.0" && v != "::":
			host = v
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/health"
}
