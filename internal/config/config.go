// Package config owns the gateway's configuration: the Config struct, its
// defaults and its validation. It is the only package that reads the
// environment; everything else receives typed values from here.
package config

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/caarlos0/env/v11"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
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
	IMAPHost     string        `env:"IMAP_HOST,required" desc:"IMAP server host name (required): the mail host of every login that names no other (a MAIL_HOSTS name, a sign-in provider's)"`
	IMAPPort     int           `env:"IMAP_PORT" envDefault:"993" desc:"IMAP server port"`
	IMAPTLS      bool          `env:"IMAP_TLS" envDefault:"true" desc:"true: implicit TLS; false: STARTTLS (see IMAP_SECURITY)"`
	IMAPSecurity Security      `env:"IMAP_SECURITY" desc:"tls, starttls or plain; overrides IMAP_TLS (plain needs ALLOW_PLAINTEXT_AUTH=true)"`
	IMAPTimeout  time.Duration `env:"IMAP_TIMEOUT" envDefault:"30s" desc:"deadline for one IMAP operation, dial and login included"`

	ToolTimeout time.Duration `env:"TOOL_TIMEOUT" envDefault:"60s" desc:"deadline for one whole tool call: waiting for a connection, dial, login, every IMAP command, SMTP and the Sent copy"`

	SMTPHost     string        `env:"SMTP_HOST" desc:"SMTP submission host; empty disables the smtp_ tools"`
	SMTPPort     int           `env:"SMTP_PORT" envDefault:"587" desc:"SMTP submission port"`
	SMTPTLS      bool          `env:"SMTP_TLS" envDefault:"true" desc:"true: implicit TLS on port 465, STARTTLS otherwise; false: plain text"`
	SMTPSecurity Security      `env:"SMTP_SECURITY" desc:"tls, starttls or plain; overrides SMTP_TLS"`
	SMTPTimeout  time.Duration `env:"SMTP_TIMEOUT" envDefault:"60s" desc:"deadline for one SMTP send"`
	// Sending limits and the Sent copy (the smtp_ tools).
	SMTPMaxRecipients  int      `env:"SMTP_MAX_RECIPIENTS" envDefault:"100" desc:"most recipients (To, Cc and Bcc together) of one message sent by the smtp_ tools"`
	MaxAttachmentBytes int64    `env:"MAX_ATTACHMENT_BYTES" envDefault:"5242880" desc:"largest attachment imap_get_attachment returns inside the result (larger ones come as a signed download link), and largest total decoded size of the attachments of one sent message, which is also held to 3/4 of MAX_REQUEST_BYTES (attachments arrive base64-encoded inside the request, so raise both together); 0 means 5 MiB"`
	SMTPFromPolicy     string   `env:"SMTP_FROM_POLICY" envDefault:"login" desc:"who the smtp_ tools may send as: login (the from address must be the login's own address, or one listed in SMTP_ALLOWED_FROM; the display name is free) or any (whatever the mail server accepts)"`
	SMTPAllowedFrom    []string `env:"SMTP_ALLOWED_FROM" envSeparator:"," desc:"with SMTP_FROM_POLICY=login: comma-separated further sender addresses (alias@example.com) or whole domains (@example.com) every user may send as"`
	DraftsFolder       string   `env:"DRAFTS_FOLDER" desc:"folder imap_save_draft saves drafts in; empty finds it (SPECIAL-USE \\Drafts, then common names)"`
	TrashFolder        string   `env:"TRASH_FOLDER" desc:"folder imap_trash_emails moves mail to; empty finds it (SPECIAL-USE \\Trash, then common names)"`
	SentFolder         string   `env:"SENT_FOLDER" desc:"folder that receives the copy of sent mail; empty finds it (SPECIAL-USE \\Sent, then common names); none saves no copy (for servers that file sent mail themselves, such as Gmail)"`

	MailboxAccess      string        `env:"MAILBOX_ACCESS" envDefault:"read" desc:"what the tools may change in a mailbox: read (look, mark what is read as seen, reply), organize (also flags, move, trash, folders, drafts) or full (also delete for good); a token can narrow it, never widen it"`
	Approval           string        `env:"APPROVAL" envDefault:"off" desc:"what a person approves before it happens: off; send (every message that leaves: send, reply, forward, a draft sent, a meeting answer, an unsubscribe); destructive (permanent deletion, deleting a folder, pruning agent mail); all (both). The client asks its user (MCP elicitation) where it can, else the tool answers with a link to an approval page; a token can ask for more, never less"`
	ApprovalTTL        time.Duration `env:"APPROVAL_TTL" envDefault:"30m" desc:"how long an approval link (and the draft waiting behind it) stays valid; a form the client shows its user is valid for 5 minutes"`
	ApprovalMaxPending int           `env:"APPROVAL_MAX_PENDING" envDefault:"20" desc:"how many approvals one mailbox may have waiting for a person's answer at a time (links and forms neither answered nor expired); past it the tool refuses with a sentence, for that mailbox only"`
	Agents             string        `env:"AGENTS" envDefault:"on" desc:"on: the agent_ tools, for several agents working in one mailbox, each with a folder of its own under AGENTS_FOLDER; off removes them"`
	AgentsFolder       string        `env:"AGENTS_FOLDER" envDefault:"Agents" desc:"the folder holding one folder per agent (Agents/backend, Agents/frontend), created on first use"`
	PublicURL          string        `env:"PUBLIC_URL" desc:"the gateway's external base URL (https://mail-mcp.example.com), used in the attachment download links it hands out; empty derives it from each request's Host (and X-Forwarded-Proto from TRUSTED_PROXIES)"`

	// Mail work (invitations, unsubscribe, sender verification).
	AuthServID         []string `env:"AUTHSERV_ID" envSeparator:"," desc:"the authserv-id(s) of the operator's own receiving mail servers, comma-separated: imap_read_email trusts Authentication-Results (SPF, DKIM, DMARC) only from these, as anyone can write such a field under another name; mx.google.com for Gmail, microsoft-365 for Exchange Online (whose fields carry no id), *.domain for all of a domain's hosts, the AuthservID of OpenDKIM/OpenDMARC for your own server; empty: every sender is unverified (docs/sender-verification.md)"`
	EgressAllowPrivate bool     `env:"EGRESS_ALLOW_PRIVATE" envDefault:"false" desc:"TESTS ONLY, never in production: true lets the one-click unsubscribe POST (mail_unsubscribe) go to loopback and private addresses and trust MAIL_CA_FILE's certificates, so that tests can post to a local HTTPS server; the gateway logs a warning at start when it is set"`

	MailCAFile         string `env:"MAIL_CA_FILE" desc:"PEM file of extra CA certificates to trust for the IMAP and SMTP servers (self-signed servers)"`
	AllowPlaintextAuth bool   `env:"ALLOW_PLAINTEXT_AUTH" envDefault:"false" desc:"allow sending passwords over an unencrypted mail connection (local development only)"`

	EncryptionKey         string `env:"ENCRYPTION_KEY,required" desc:"64 hex characters (32 bytes) sealing credential tokens; make one with 'mailbox-mcp keygen' (required)"`
	EncryptionKeyPrevious string `env:"ENCRYPTION_KEY_PREVIOUS" desc:"the key ENCRYPTION_KEY replaced, during a key rotation: tokens sealed with it still open (new tokens use ENCRYPTION_KEY); remove it once old tokens may stop working"`

	BindAddress     string        `env:"BIND_ADDRESS" envDefault:"127.0.0.1" desc:"address the HTTP server listens on; 0.0.0.0 in containers"`
	Port            int           `env:"PORT" envDefault:"3000" desc:"HTTP port"`
	LogLevel        slog.Level    `env:"LOG_LEVEL" envDefault:"info" desc:"debug, info, warn or error"`
	AllowedOrigins  []string      `env:"ALLOWED_ORIGINS" envDefault:"*" envSeparator:"," desc:"comma-separated browser origins allowed to call /mcp; * allows any"`
	MaxRequestBytes int64         `env:"MAX_REQUEST_BYTES" envDefault:"1048576" desc:"largest accepted HTTP request body in bytes"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"15s" desc:"how long in-flight calls may run after SIGTERM"`

	// Flood limits (internal/httpapi; SECURITY.md, "Limits"): what anyone,
	// before any credential check, can make the gateway hold.
	MaxConnections      int           `env:"MAX_CONNECTIONS" envDefault:"1024" desc:"most HTTP connections open at once, idle keep-alive ones included; a connection over it gets 503 and is closed at once"`
	MaxInflightRequests int           `env:"MAX_INFLIGHT_REQUESTS" envDefault:"768" desc:"most /mcp and /v1 requests served at once, waits included (so it must be above MAX_WAITERS); over it a request gets 503 with Retry-After"`
	MaxBufferedBytes    int64         `env:"MAX_BUFFERED_BYTES" envDefault:"33554432" desc:"most request-body bytes all requests together hold in memory (each may hold 16 KiB besides); over it a request gets 503 with Retry-After; at least twice MAX_REQUEST_BYTES (a body is read into a buffer that doubles as it grows)"`
	BodyReadTimeout     time.Duration `env:"BODY_READ_TIMEOUT" envDefault:"10s" desc:"deadline for receiving one request body; a slower client gets 408 and is disconnected"`

	MaxPoolSize       int           `env:"MAX_POOL_SIZE" envDefault:"50" desc:"most IMAP connections open at once, all users together"`
	MaxPoolPerUser    int           `env:"MAX_POOL_PER_USER" envDefault:"4" desc:"most IMAP connections open at once for one account (the user name trimmed and lower-cased: every spelling and password together)"`
	PoolIdleTime      time.Duration `env:"POOL_IDLE_TIMEOUT" envDefault:"5m" desc:"an idle pooled IMAP connection is closed after this long"`
	PoolRevalidate    time.Duration `env:"POOL_REVALIDATE" envDefault:"60s" desc:"a pooled IMAP connection whose login is older than this is replaced by a fresh login before it serves again, so a changed password stops the old one within this time (plus a call already running)"`
	MaxWaiters        int           `env:"MAX_WAITERS" envDefault:"500" desc:"most imap_wait_for_email calls waiting at once, all users together (each holds an IMAP connection of its own)"`
	MaxWaitersPerUser int           `env:"MAX_WAITERS_PER_USER" envDefault:"6" desc:"most imap_wait_for_email calls waiting at once for one account (with MAX_POOL_PER_USER=4 this stays within Dovecot's default of 10 connections per user and address)"`
	WaitRecheck       time.Duration `env:"WAIT_RECHECK" envDefault:"10s" desc:"while a wait sits in IMAP IDLE, it also looks at the folder itself this often (DONE, NOOP, IDLE again), so that it wakes within this time on a server whose IDLE reports new mail late or never (Cyrus without idled, Courier with its defaults: 60 s); 0 turns the re-check off"`
	WaitPollInterval  time.Duration `env:"WAIT_POLL_INTERVAL" envDefault:"0s" desc:"0 (the default): waits use IMAP IDLE, which costs nothing while waiting but wakes only as fast as the server notifies (Dovecot 2.3: 0.5 s after delivery); a duration such as 100ms polls with NOOP instead: faster wake-up (about 60 ms on Dovecot) at a steady cost on the mail server and the gateway for every waiting call"`

	// Abuse limits and host checks (internal/guard, internal/httpapi; SECURITY.md).
	RateLimitPerMinute     float64       `env:"RATE_LIMIT_PER_MINUTE" envDefault:"0" desc:"tool calls one account (the user name trimmed and lower-cased) may make per minute, sustained; 0 turns the rate limit off"`
	RateLimitBurst         int           `env:"RATE_LIMIT_BURST" envDefault:"30" desc:"tool calls one account may make at once above the sustained rate"`
	LoginBackoffFailures   int           `env:"LOGIN_BACKOFF_FAILURES" envDefault:"5" desc:"failed logins for one account from one client address after which the gateway stops trying that account's logins from that address for a while; 0 turns it off"`
	LoginBackoffAccount    int           `env:"LOGIN_BACKOFF_ACCOUNT_FAILURES" envDefault:"50" desc:"failed logins for one account from all client addresses together after which the gateway stops trying that account's logins for a while, except with a password that logged in recently; 0 turns it off"`
	LoginBackoffPerAddress int           `env:"LOGIN_BACKOFF_FAILURES_PER_ADDRESS" envDefault:"20" desc:"failed logins from one client address (any user names) after which that address's logins are refused for a while; a later successful login of an account from there takes that account's failures back, so only failures at other accounts, or that no success followed, count; 0 turns it off"`
	LoginBackoffDelay      time.Duration `env:"LOGIN_BACKOFF_DELAY" envDefault:"1m" desc:"first refusal period of the login back-off; it doubles with each further failure"`
	LoginBackoffMax        time.Duration `env:"LOGIN_BACKOFF_MAX" envDefault:"15m" desc:"longest refusal period of the login back-off"`
	AllowedHosts           []string      `env:"ALLOWED_HOSTS" envSeparator:"," desc:"comma-separated Host header values accepted besides localhost, 127.0.0.1 and [::1] (e.g. the name a same-host reverse proxy forwards); empty: only those when BIND_ADDRESS is loopback, any otherwise"`
	TrustedProxies         []string      `env:"TRUSTED_PROXIES" envSeparator:"," desc:"comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For names the client (for the per-address login back-off); empty trusts none"`
	ClientIPv6Prefix       int           `env:"CLIENT_IPV6_PREFIX" envDefault:"64" desc:"the per-address limits (login back-off, sign-in rate) count an IPv6 client by this many leading bits of its address (64: one subscriber's /64, which a single host can fill with addresses); IPv4 clients count by their whole address; 32 to 128"`

	// Sign-in (OAuth 2.1, the gateway its own authorization server) and metrics.
	OAuth                 string        `env:"OAUTH" envDefault:"on" desc:"on: with PUBLIC_URL set, the gateway is an OAuth 2.1 authorization server for MCP clients that add a server by URL and sign in (tokens carry the sealed credentials; nothing is stored); off: headers and credentials tokens only"`
	OAuthAccessTTL        time.Duration `env:"OAUTH_ACCESS_TTL" envDefault:"1h" desc:"lifetime of an OAuth access token"`
	OAuthRefreshTTL       time.Duration `env:"OAUTH_REFRESH_TTL" envDefault:"720h" desc:"lifetime of an OAuth refresh token (each use returns a new one)"`
	OAuthRatePerAccount   float64       `env:"OAUTH_RATE_PER_ACCOUNT" envDefault:"20" desc:"requests to the sign-in server for one account per minute, sustained (sign-in form posted, code exchanged, token refreshed), with bursts of a minute's worth; past it 429 with Retry-After; 0 turns it off"`
	OAuthRatePerAddress   float64       `env:"OAUTH_RATE_PER_ADDRESS" envDefault:"60" desc:"requests to the sign-in server from one client address per minute, sustained (the same, plus client registrations and refused tokens), with bursts of a minute's worth; 0 turns it off"`
	OAuthMaxGrants        int           `env:"OAUTH_MAX_GRANTS" envDefault:"250000" desc:"most entries the sign-in server remembers for single use in this process (with REDIS_URL, Redis's maxmemory bounds them instead): codes redeemed in the last minute and live sign-ins (about 170 bytes each: 250000 is about 40 MiB), and as many provider sign-ins under way; when it is full and none has expired, new sign-ins get 503 with Retry-After instead of anything being forgotten"`
	OAuthGrantsPerAccount int           `env:"OAUTH_GRANTS_PER_ACCOUNT" envDefault:"64" desc:"entries one account holds: its live sign-ins (one per signed-in client) and the codes it redeemed in the last minute; a new sign-in ends the account's least recently refreshed ones (for good), and waits when its codes alone fill it; 2 to 10000"`
	// Sign-in with the mailbox's provider (PUBLIC_URL + /authorize/callback is
	// the redirect URI to register at each).
	MicrosoftClientID     string   `env:"MICROSOFT_CLIENT_ID" desc:"Microsoft Entra app (client) id: the sign-in page offers Continue with Microsoft (Exchange Online over IMAP and SMTP with OAuth); docs/providers.md says how to register the app"`
	MicrosoftClientSecret string   `env:"MICROSOFT_CLIENT_SECRET" desc:"the Entra app's client secret (required with MICROSOFT_CLIENT_ID)"`
	MicrosoftTenant       string   `env:"MICROSOFT_TENANT" envDefault:"common" desc:"which Microsoft accounts may sign in: common (work, school and personal), organizations (work and school), or one tenant's id or domain"`
	GoogleClientID        string   `env:"GOOGLE_CLIENT_ID" desc:"Google Cloud OAuth client id: the sign-in page offers Continue with Google (Gmail and Workspace over IMAP and SMTP with OAuth)"`
	GoogleClientSecret    string   `env:"GOOGLE_CLIENT_SECRET" desc:"the Google OAuth client's secret (required with GOOGLE_CLIENT_ID)"`
	OIDCName              string   `env:"OIDC_NAME" desc:"name of another OpenID provider, shown as Continue with NAME (required with OIDC_ISSUER)"`
	OIDCIssuer            string   `env:"OIDC_ISSUER" desc:"issuer URL of another OpenID provider (its endpoints come from OpenID discovery); the mailbox is at OIDC_IMAP_HOST"`
	OIDCClientID          string   `env:"OIDC_CLIENT_ID" desc:"the gateway's client id at OIDC_ISSUER"`
	OIDCClientSecret      string   `env:"OIDC_CLIENT_SECRET" desc:"the gateway's client secret at OIDC_ISSUER (empty for a public client)"`
	OIDCScopes            string   `env:"OIDC_SCOPES" envDefault:"openid email offline_access" desc:"scopes asked of OIDC_ISSUER (space-separated), besides what the mail server needs"`
	OIDCEmailClaim        string   `env:"OIDC_EMAIL_CLAIM" envDefault:"email" desc:"the ID token claim that holds the mailbox address"`
	OIDCIMAPHost          string   `env:"OIDC_IMAP_HOST" desc:"IMAP host of the mailboxes OIDC_ISSUER signs in to (required with OIDC_ISSUER); it serves only that provider's sign-ins, unless MAIL_HOSTS allows the name too"`
	OIDCIMAPPort          int      `env:"OIDC_IMAP_PORT" envDefault:"993" desc:"its IMAP port (implicit TLS)"`
	OIDCSMTPHost          string   `env:"OIDC_SMTP_HOST" desc:"SMTP submission host of those mailboxes; empty: no sending for them"`
	OIDCSMTPPort          int      `env:"OIDC_SMTP_PORT" envDefault:"465" desc:"its submission port: 465 implicit TLS, any other STARTTLS"`
	MailHosts             []string `env:"MAIL_HOSTS" envSeparator:"," desc:"comma-separated mail hosts besides IMAP_HOST that people may use with a password (x-imap-host header, the sign-in page's host field): exact names and *.domain patterns, each optionally :PORT for IMAP (else IMAP_PORT); SMTP goes to the same host on SMTP_PORT; a name that is no host name, does not resolve or resolves to a non-public address is refused with the same sentence"`
	MailHostsPrivate      bool     `env:"MAIL_HOSTS_PRIVATE" envDefault:"false" desc:"true lets MAIL_HOSTS names resolve to loopback, private and link-local addresses; false (the default) refuses such a name before any connection is made"`
	// Several replicas as one (internal/memory; docs/scaling.md).
	RedisURL     string        `env:"REDIS_URL" desc:"redis://[user:password@]host[:port][/db], or rediss:// for TLS (Redis 7, Valkey 7 or 8): one memory for every replica sharing it and ENCRYPTION_KEY, so that codes, refresh tokens and approvals stay single-use, and rate limits and the login back-off count, across replicas; empty: each process remembers alone (enough for one replica). Keys are HMACs; no token, password or message is stored"`
	RedisFail    string        `env:"REDIS_FAIL" envDefault:"closed" desc:"what rate limits and the login back-off do while REDIS_URL does not answer: closed (refuse, 503 with Retry-After) or open (each replica counts on its own until Redis is back); single-use decisions always refuse (503) meanwhile"`
	RedisTimeout time.Duration `env:"REDIS_TIMEOUT" envDefault:"200ms" desc:"longest one Redis operation may take (waiting for a connection included) before it counts as unavailable"`
	RedisCAFile  string        `env:"REDIS_CA_FILE" desc:"PEM file of extra CA certificates to trust for a rediss:// server"`
	MetricsAddr  string        `env:"METRICS_ADDR" desc:"host:port of a separate listener serving Prometheus metrics at /metrics; empty turns it off; no metric label ever carries a user, address, folder or token"`

	PprofAddr string `env:"PPROF_ADDR" desc:"host:port of a separate admin listener serving net/http/pprof (CPU and heap profiles); empty turns it off; keep it on loopback, never the public address"`
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
	case reflect.Float64:
		return "expected a number"
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
	if _, err := access.ParseApproval(c.Approval); err != nil {
		bad("APPROVAL", "%v", err)
	}
	if c.ApprovalMaxPending < 1 || c.ApprovalMaxPending > 10_000 {
		bad("APPROVAL_MAX_PENDING", "expected a number from 1 to 10000, got %q", vars["APPROVAL_MAX_PENDING"])
	}
	if c.ApprovalTTL < time.Minute || c.ApprovalTTL > 24*time.Hour {
		bad("APPROVAL_TTL", "expected a duration from 1m to 24h, got %q", vars["APPROVAL_TTL"])
	}
	if _, err := access.Parse(c.MailboxAccess); err != nil {
		bad("MAILBOX_ACCESS", "%v", err)
	}
	if a := strings.ToLower(c.Agents); a != "on" && a != "off" {
		bad("AGENTS", "expected on or off, got %q", c.Agents)
	}
	if f := strings.TrimSpace(c.AgentsFolder); f == "" || strings.ContainsAny(f, "*%") || strings.ContainsFunc(f, unicode.IsControl) || strings.EqualFold(f, "INBOX") {
		bad("AGENTS_FOLDER", "expected a folder name without * or %% (and not INBOX), got %q", c.AgentsFolder)
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			bad("PUBLIC_URL", "expected an absolute http or https URL such as https://mail-mcp.example.com, got %q", c.PublicURL)
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
		{"MAX_CONNECTIONS", int64(c.MaxConnections)}, {"MAX_INFLIGHT_REQUESTS", int64(c.MaxInflightRequests)},
		{"MAX_BUFFERED_BYTES", c.MaxBufferedBytes}, {"BODY_READ_TIMEOUT", int64(c.BodyReadTimeout)},
		{"IMAP_TIMEOUT", int64(c.IMAPTimeout)}, {"SMTP_TIMEOUT", int64(c.SMTPTimeout)}, {"TOOL_TIMEOUT", int64(c.ToolTimeout)},
		{"SHUTDOWN_TIMEOUT", int64(c.ShutdownTimeout)}, {"POOL_IDLE_TIMEOUT", int64(c.PoolIdleTime)},
		{"POOL_REVALIDATE", int64(c.PoolRevalidate)},
		{"MAX_WAITERS", int64(c.MaxWaiters)}, {"MAX_WAITERS_PER_USER", int64(c.MaxWaitersPerUser)},
	}
	for _, n := range positive {
		if n.v <= 0 {
			bad(n.key, "expected a value greater than zero, got %q", vars[n.key])
		}
	}
	if c.MaxBufferedBytes > 0 && c.MaxRequestBytes > 0 && c.MaxBufferedBytes/2 < c.MaxRequestBytes {
		bad("MAX_BUFFERED_BYTES", "expected at least twice MAX_REQUEST_BYTES (%d): a body is read into a buffer that doubles as it grows, so a request of the largest size needs up to twice its size while it is read; got %d", c.MaxRequestBytes, c.MaxBufferedBytes)
	}
	if c.MaxPoolPerUser > c.MaxPoolSize && c.MaxPoolSize > 0 {
		bad("MAX_POOL_PER_USER", "expected at most MAX_POOL_SIZE (%d), got %d", c.MaxPoolSize, c.MaxPoolPerUser)
	}
	if c.PprofAddr != "" {
		if msg := checkAdminAddr(c.PprofAddr, c.Port, "127.0.0.1:6060"); msg != "" {
			bad("PPROF_ADDR", "%s", msg)
		}
	}
	if c.MetricsAddr != "" {
		if msg := checkAdminAddr(c.MetricsAddr, c.Port, "127.0.0.1:9090"); msg != "" {
			bad("METRICS_ADDR", "%s", msg)
		}
		if c.MetricsAddr == c.PprofAddr {
			bad("METRICS_ADDR", "must not be PPROF_ADDR (%s): each admin listener has its own port", c.PprofAddr)
		}
	}
	if a := strings.ToLower(c.OAuth); a != "on" && a != "off" {
		bad("OAUTH", "expected on or off, got %q", c.OAuth)
	}
	if c.OAuthAccessTTL < time.Minute || c.OAuthAccessTTL > 24*time.Hour {
		bad("OAUTH_ACCESS_TTL", "expected a duration from 1m to 24h, got %q", vars["OAUTH_ACCESS_TTL"])
	}
	if c.OAuthRefreshTTL < c.OAuthAccessTTL || c.OAuthRefreshTTL > 90*24*time.Hour {
		bad("OAUTH_REFRESH_TTL", "expected a duration from OAUTH_ACCESS_TTL to 2160h (90 days), got %q", vars["OAUTH_REFRESH_TTL"])
	}
	c.checkProviders(bad)
	if c.OAuthRatePerAccount < 0 {
		bad("OAUTH_RATE_PER_ACCOUNT", "expected zero (off) or a positive number of requests per minute, got %q", vars["OAUTH_RATE_PER_ACCOUNT"])
	}
	if c.OAuthRatePerAddress < 0 {
		bad("OAUTH_RATE_PER_ADDRESS", "expected zero (off) or a positive number of requests per minute, got %q", vars["OAUTH_RATE_PER_ADDRESS"])
	}
	if c.OAuthMaxGrants < 100 || c.OAuthMaxGrants > 100_000_000 {
		bad("OAUTH_MAX_GRANTS", "expected a number from 100 to 100000000, got %q", vars["OAUTH_MAX_GRANTS"])
	}
	if c.OAuthGrantsPerAccount < 2 || c.OAuthGrantsPerAccount > 10_000 {
		// A sign-in takes two entries at once: its code and itself.
		bad("OAUTH_GRANTS_PER_ACCOUNT", "expected a number from 2 to 10000, got %q", vars["OAUTH_GRANTS_PER_ACCOUNT"])
	}
	if c.SMTPMaxRecipients < 1 {
		bad("SMTP_MAX_RECIPIENTS", "expected a value greater than zero, got %q", vars["SMTP_MAX_RECIPIENTS"])
	}
	if c.MaxAttachmentBytes < 0 {
		bad("MAX_ATTACHMENT_BYTES", "expected zero (5 MiB) or a positive number of bytes, got %q", vars["MAX_ATTACHMENT_BYTES"])
	}
	switch c.SMTPFromPolicy {
	case "login", "any":
	default:
		bad("SMTP_FROM_POLICY", "expected login or any, got %q", c.SMTPFromPolicy)
	}
	for _, a := range c.SMTPAllowedFrom {
		a = strings.TrimSpace(a)
		_, domain, ok := strings.Cut(a, "@")
		if !ok || domain == "" || strings.ContainsAny(a, " <>,;\r\n\x00") || strings.Contains(domain, "@") {
			bad("SMTP_ALLOWED_FROM", "expected addresses (alias@example.com) or domains (@example.com), got %q", a)
		}
	}
	for _, id := range c.AuthServID {
		if id = strings.TrimSpace(id); id == "" || len(id) > 253 || strings.ContainsAny(strings.TrimPrefix(id, "*."), " \t;()\"\\@/*\r\n\x00") {
			bad("AUTHSERV_ID", "expected authserv-ids (host names such as mx.example.com, *.example.com for all of a domain's hosts, or microsoft-365) separated by commas, got %q", id)
		}
	}
	if strings.ContainsAny(c.SentFolder, "\r\n\x00") {
		bad("SENT_FOLDER", "must not contain line breaks or NUL")
	}
	if c.MaxWaiters > 0 && c.MaxInflightRequests > 0 && c.MaxWaiters >= c.MaxInflightRequests {
		bad("MAX_WAITERS", "%d waits would fill MAX_INFLIGHT_REQUESTS (%d): every wait is a request in flight, and other calls need room; keep MAX_WAITERS below it", c.MaxWaiters, c.MaxInflightRequests)
	}
	if c.WaitRecheck < 0 || c.WaitRecheck > 0 && c.WaitRecheck < 100*time.Millisecond {
		bad("WAIT_RECHECK", "expected 0 (no re-check) or a duration of at least 100ms, got %q", vars["WAIT_RECHECK"])
	}
	if c.WaitPollInterval < 0 || c.WaitPollInterval > 0 && c.WaitPollInterval < 20*time.Millisecond {
		bad("WAIT_POLL_INTERVAL", "expected 0 (IDLE) or a duration of at least 20ms, got %q", vars["WAIT_POLL_INTERVAL"])
	}
	p = append(p, c.validateGuard(vars)...)
	if c.MailCAFile != "" {
		if _, err := c.LoadCAs(); err != nil {
			bad("MAIL_CA_FILE", "%v", err)
		}
	}
	return p
}

// checkAdminAddr checks that an admin listener (profiles, metrics) is a
// host:port of its own: never the public listener, whose port it must not
// share.
func checkAdminAddr(addr string, public int, example string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("expected host:port such as %s, got %q", example, addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("expected a port number from 1 to 65535, got %q", addr)
	}
	if host != "" && host != "localhost" && net.ParseIP(host) == nil {
		return fmt.Sprintf("expected an IP address or localhost as host, got %q", addr)
	}
	if n == public {
		return fmt.Sprintf("must not share PORT %d with the public listener: admin data must never be served on the public address", public)
	}
	return ""
}

// validateGuard checks the key rotation, abuse-limit and host variables.
func (c *Config) validateGuard(vars map[string]string) []string {
	var p []string
	bad := func(key, format string, args ...any) { p = append(p, key+": "+fmt.Sprintf(format, args...)) }
	if c.EncryptionKeyPrevious != "" {
		if msg := checkKey(c.EncryptionKeyPrevious); msg != "" {
			bad("ENCRYPTION_KEY_PREVIOUS", "%s", msg)
		} else if strings.EqualFold(c.EncryptionKeyPrevious, c.EncryptionKey) {
			bad("ENCRYPTION_KEY_PREVIOUS", "%s", samePrevious)
		}
	}
	if c.RateLimitPerMinute < 0 {
		bad("RATE_LIMIT_PER_MINUTE", "expected 0 (off) or a positive number, got %q", vars["RATE_LIMIT_PER_MINUTE"])
	}
	if c.RateLimitBurst < 1 {
		bad("RATE_LIMIT_BURST", "expected a value greater than zero, got %q", vars["RATE_LIMIT_BURST"])
	}
	for _, n := range []struct {
		key string
		v   int
	}{{"LOGIN_BACKOFF_FAILURES", c.LoginBackoffFailures}, {"LOGIN_BACKOFF_ACCOUNT_FAILURES", c.LoginBackoffAccount},
		{"LOGIN_BACKOFF_FAILURES_PER_ADDRESS", c.LoginBackoffPerAddress}} {
		if n.v < 0 {
			bad(n.key, "expected 0 (off) or a positive number, got %q", vars[n.key])
		}
	}
	if c.LoginBackoffDelay <= 0 {
		bad("LOGIN_BACKOFF_DELAY", "expected a value greater than zero, got %q", vars["LOGIN_BACKOFF_DELAY"])
	}
	if c.LoginBackoffMax < c.LoginBackoffDelay {
		bad("LOGIN_BACKOFF_MAX", "expected at least LOGIN_BACKOFF_DELAY (%s), got %s", c.LoginBackoffDelay, c.LoginBackoffMax)
	}
	for _, h := range c.AllowedHosts {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, " /@,*") {
			bad("ALLOWED_HOSTS", "expected host names (optionally with :port) such as mail-mcp.example.com, got %q", h)
		}
	}
	if _, err := c.ProxyNets(); err != nil {
		bad("TRUSTED_PROXIES", "%v", err)
	}
	if c.ClientIPv6Prefix < 32 || c.ClientIPv6Prefix > 128 {
		bad("CLIENT_IPV6_PREFIX", "expected a prefix length from 32 to 128, got %q", vars["CLIENT_IPV6_PREFIX"])
	}
	return append(p, c.validateRedis(vars)...)
}

// validateRedis checks REDIS_URL and the variables that go with it.
func (c *Config) validateRedis(vars map[string]string) []string {
	var p []string
	bad := func(key, format string, args ...any) { p = append(p, key+": "+fmt.Sprintf(format, args...)) }
	if c.RedisURL != "" {
		if _, err := memory.ParseURL(c.RedisURL); err != nil {
			bad("REDIS_URL", "%v (such as redis://redis:6379/0 or rediss://user:password@redis.internal:6380/0)", err)
		}
	}
	if _, err := memory.ParseFailPolicy(c.RedisFail); err != nil {
		bad("REDIS_FAIL", "%v", err)
	}
	if c.RedisTimeout < 10*time.Millisecond || c.RedisTimeout > 5*time.Second {
		bad("REDIS_TIMEOUT", "expected a duration from 10ms to 5s, got %q", vars["REDIS_TIMEOUT"])
	}
	if c.RedisCAFile != "" {
		if _, err := loadCAs(c.RedisCAFile); err != nil {
			bad("REDIS_CA_FILE", "%v", err)
		}
	}
	return p
}

// RedisFailPolicy is REDIS_FAIL, checked at load.
func (c *Config) RedisFailPolicy() memory.FailPolicy {
	f, _ := memory.ParseFailPolicy(c.RedisFail)
	return f
}

// RedisCAs returns the system roots plus REDIS_CA_FILE's certificates, or
// nil (the system roots) when no file is configured.
func (c *Config) RedisCAs() (*x509.CertPool, error) {
	if c.RedisCAFile == "" {
		return nil, nil
	}
	return loadCAs(c.RedisCAFile)
}

// AuthServIDs is AUTHSERV_ID as a list, without blanks.
func (c *Config) AuthServIDs() []string {
	var out []string
	for _, id := range c.AuthServID {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
		}
	}
	return out
}

// PreviousKey returns the decoded ENCRYPTION_KEY_PREVIOUS, or nil. It is
// valid only after FromEnv succeeded.
func (c *Config) PreviousKey() []byte {
	if c.EncryptionKeyPrevious == "" {
		return nil
	}
	k, _ := hex.DecodeString(c.EncryptionKeyPrevious)
	return k
}

// ProxyNets parses TRUSTED_PROXIES: each an IP address or a CIDR.
func (c *Config) ProxyNets() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range c.TrustedProxies {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.Contains(s, "/") {
			pfx, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("expected IP addresses or CIDRs such as 10.0.0.0/8, got %q", s)
			}
			out = append(out, pfx.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("expected IP addresses or CIDRs such as 10.0.0.0/8, got %q", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// LoopbackBind reports whether BIND_ADDRESS only accepts local connections.
func (c *Config) LoopbackBind() bool {
	if c.BindAddress == "localhost" {
		return true
	}
	ip := net.ParseIP(c.BindAddress)
	return ip != nil && ip.IsLoopback()
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

// AttachmentLimit is the largest total decoded attachment size of one sent
// message: MAX_ATTACHMENT_BYTES, held to 3/4 of MAX_REQUEST_BYTES (base64
// makes 3 bytes 4 characters).
func (c *Config) AttachmentLimit() int64 {
	return min(c.InlineAttachmentLimit(), c.MaxRequestBytes/4*3)
}

// InlineAttachmentLimit is the largest attachment returned inside a tool
// result: MAX_ATTACHMENT_BYTES, 5 MiB when that is 0.
func (c *Config) InlineAttachmentLimit() int64 {
	if c.MaxAttachmentBytes > 0 {
		return c.MaxAttachmentBytes
	}
	return 5 << 20
}

// ApprovalPolicy is what a person must approve (APPROVAL), checked at load.
func (c *Config) ApprovalPolicy() access.Approval {
	a, _ := access.ParseApproval(c.Approval)
	return a
}

// Access is the operator's access level (MAILBOX_ACCESS), checked at load.
func (c *Config) Access() access.Level {
	l, err := access.Parse(c.MailboxAccess)
	if err != nil {
		return access.Read
	}
	return l
}

// OAuthEnabled reports whether the gateway is its own OAuth authorization
// server: OAUTH on and PUBLIC_URL set (the issuer must be a fixed URL).
func (c *Config) OAuthEnabled() bool {
	return strings.EqualFold(c.OAuth, "on") && c.PublicURL != ""
}

// AgentsEnabled reports whether the agent_ tools are offered (AGENTS).
func (c *Config) AgentsEnabled() bool { return strings.EqualFold(c.Agents, "on") }

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
	return loadCAs(c.MailCAFile)
}

// loadCAs returns the system roots plus the certificates of a PEM file.
func loadCAs(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read the CA file: %v", errors.Unwrap(err))
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("expected PEM certificates in %s, found none", file)
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

// LoadAccess reads only MAILBOX_ACCESS, for commands that check a scope
// against it (token): set is false when the variable is not set, and a
// value that is not a level is a Problem naming the variable.
func LoadAccess() (level access.Level, set bool, err error) { return accessFromEnv(os.Environ()) }

func accessFromEnv(environ []string) (access.Level, bool, error) {
	var v string
	for _, kv := range environ {
		if k, val, _ := strings.Cut(kv, "="); k == "MAILBOX_ACCESS" {
			v = val
		}
	}
	if v == "" {
		return 0, false, nil
	}
	l, err := access.Parse(v)
	if err != nil {
		return 0, true, Problems{"MAILBOX_ACCESS: " + err.Error()}
	}
	return l, true, nil
}

const samePrevious = "is the same as ENCRYPTION_KEY; during a rotation it holds the old key"

// LoadOptionalKeys reads ENCRYPTION_KEY and ENCRYPTION_KEY_PREVIOUS for the
// demo, which makes its own key when none is given: each is nil when not
// set, and one that is set but invalid is a Problem naming its variable, as
// Load would report it.
func LoadOptionalKeys() (key, previous []byte, err error) { return optionalKeys(os.Environ()) }

func optionalKeys(environ []string) (key, previous []byte, err error) {
	vars := map[string]string{}
	for _, kv := range environ {
		if k, v, _ := strings.Cut(kv, "="); k == "ENCRYPTION_KEY" || k == "ENCRYPTION_KEY_PREVIOUS" {
			vars[k] = v // the last one wins, as for Load
		}
	}
	var p Problems
	decode := func(name string) []byte {
		v := vars[name]
		if v == "" {
			return nil
		}
		if msg := checkKey(v); msg != "" {
			p = append(p, name+": "+msg)
			return nil
		}
		k, _ := hex.DecodeString(v)
		return k
	}
	key, previous = decode("ENCRYPTION_KEY"), decode("ENCRYPTION_KEY_PREVIOUS")
	if key != nil && bytes.Equal(key, previous) {
		p = append(p, "ENCRYPTION_KEY_PREVIOUS: "+samePrevious)
	}
	if len(p) > 0 {
		return nil, nil, p
	}
	return key, previous, nil
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

// checkProviders checks the sign-in providers and MAIL_HOSTS.
func (c *Config) checkProviders(bad func(key, format string, args ...any)) {
	pairs := []struct{ id, secret, idKey, secretKey string }{
		{c.MicrosoftClientID, c.MicrosoftClientSecret, "MICROSOFT_CLIENT_ID", "MICROSOFT_CLIENT_SECRET"},
		{c.GoogleClientID, c.GoogleClientSecret, "GOOGLE_CLIENT_ID", "GOOGLE_CLIENT_SECRET"},
	}
	for _, p := range pairs {
		switch {
		case p.id != "" && p.secret == "":
			bad(p.secretKey, "is required with %s (the provider's token endpoint asks for it)", p.idKey)
		case p.id == "" && p.secret != "":
			bad(p.idKey, "is required with %s", p.secretKey)
		}
	}
	if c.OIDCIssuer != "" {
		if u, err := url.Parse(c.OIDCIssuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("OIDC_ISSUER", "expected an https URL such as https://id.example.com, got %q", c.OIDCIssuer)
		}
		for _, req := range []struct{ v, key string }{{c.OIDCName, "OIDC_NAME"}, {c.OIDCClientID, "OIDC_CLIENT_ID"}, {c.OIDCIMAPHost, "OIDC_IMAP_HOST"}} {
			if strings.TrimSpace(req.v) == "" {
				bad(req.key, "is required with OIDC_ISSUER")
			}
		}
		if n := strings.ToLower(strings.TrimSpace(c.OIDCName)); n == "microsoft" || n == "google" {
			bad("OIDC_NAME", "%q is taken by the preset of that name: use MICROSOFT_CLIENT_ID or GOOGLE_CLIENT_ID, or another name", c.OIDCName)
		}
	}
	if c.ProvidersConfigured() && !c.OAuthEnabled() {
		bad("PUBLIC_URL", "is required for sign-in with a provider (the provider sends people back to PUBLIC_URL/authorize/callback), and OAUTH must be on")
	}
	for _, h := range c.MailHosts {
		if _, _, err := ParseMailHost(h); err != nil {
			bad("MAIL_HOSTS", "%v", err)
		}
	}
}

// ProvidersConfigured reports whether any sign-in provider is set up.
func (c *Config) ProvidersConfigured() bool {
	return c.MicrosoftClientID != "" || c.GoogleClientID != "" || c.OIDCIssuer != ""
}

// ParseMailHost reads one MAIL_HOSTS entry: a host name or *.domain
// pattern, optionally with :PORT (0 when none is given).
func ParseMailHost(entry string) (pattern string, port int, err error) {
	e := strings.ToLower(strings.TrimSpace(entry))
	if h, p, ok := strings.Cut(e, ":"); ok {
		n, perr := strconv.Atoi(p)
		if perr != nil || n < 1 || n > 65535 {
			return "", 0, fmt.Errorf("%q: the port after : must be 1 to 65535", entry)
		}
		e, port = h, n
	}
	name := strings.TrimPrefix(e, "*.")
	if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" || strings.Contains(name, "..") || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
		return "", 0, fmt.Errorf("%q is not a host name or *.domain pattern", entry)
	}
	if strings.HasPrefix(e, "*.") && !strings.Contains(name, ".") {
		return "", 0, fmt.Errorf("%q: a pattern must name a domain with at least two labels (*.example.com)", entry)
	}
	return e, port, nil
}
