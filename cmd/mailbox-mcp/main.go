// Command mailbox-mcp is the MCP gateway to a mailbox: it serves the MCP
// tools over streamable HTTP, runs a self-contained demo, and makes keys and
// credential tokens.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/app"
	"github.com/mailbox-mcp/mailbox-mcp/internal/buildinfo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/config"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// Exit codes.
const (
	exitOK     = 0
	exitFail   = 1
	exitConfig = 2 // bad configuration or usage
)

const usage = `mailbox-mcp: an MCP gateway to a mailbox (IMAP + SMTP)

Usage:
  mailbox-mcp [serve]        run the gateway (configured by environment variables)
  mailbox-mcp demo           run the gateway on an embedded demo mail server
  mailbox-mcp keygen         print a new ENCRYPTION_KEY
  mailbox-mcp token          seal a user and password into a credentials token
  mailbox-mcp healthcheck    exit 0 if the local gateway's /health answers
  mailbox-mcp version        print the version

Client of a running gateway (its REST mirror, /v1/; MAILBOX_URL, MAILBOX_TOKEN
or IMAP_USER/IMAP_PASS; exit 0 found, 1 nothing, 2 usage, 3 unavailable, 4 refused;
--agent NAME or MAILBOX_AGENT acts as one agent of the mailbox):
  mailbox-mcp send           send an email (with --agent: a message to other agents)
  mailbox-mcp peek           count unread mail without changing anything
  mailbox-mcp check          take the unread messages (marks them read)
  mailbox-mcp wait           wait for a new message
  mailbox-mcp list           list or search a folder
  mailbox-mcp read UID       read one message
  mailbox-mcp agents         list the agents of the mailbox
  mailbox-mcp state get KEY | state get --prefix P | state set KEY JSON
                             read or set the agents' shared state

Run 'mailbox-mcp COMMAND --help' for a command's options.
Configuration: see .env.example or docs/configuration.md.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	} else if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	switch cmd {
	case "serve":
		return cmdServe(args, stdout, stderr)
	case "demo":
		return cmdDemo(args, stdout, stderr)
	case "keygen":
		return cmdKeygen(args, stdout, stderr)
	case "token":
		return cmdToken(args, stdin, stdout, stderr)
	case "healthcheck":
		return cmdHealthcheck(args, stdout, stderr)
	case "send", "peek", "check", "wait", "list", "read", "agents", "state":
		return cmdClient(cmd, args, stdin, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "mailbox-mcp", buildinfo.Version())
		return exitOK
	case "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "tools-doc": // hidden: go run ./cmd/mailbox-mcp tools-doc > docs/tools.md
		doc, err := app.ToolsDoc(context.Background())
		if err != nil {
			fmt.Fprintln(stderr, "mailbox-mcp tools-doc:", err)
			return exitFail
		}
		stdout.Write(doc)
		return exitOK
	}
	fmt.Fprintf(stderr, "mailbox-mcp: unknown command %q\n\n%s", cmd, usage)
	return exitConfig
}

// newFlags makes a FlagSet whose --help prints the command's summary.
func newFlags(name, summary string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: mailbox-mcp %s [options]\n\n%s\n", name, summary)
		var any bool
		fs.VisitAll(func(*flag.Flag) { any = true })
		if any {
			fmt.Fprintln(stderr, "\nOptions:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parse parses flags; the second result is the exit code when it should stop.
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, true
		}
		return exitConfig, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "mailbox-mcp %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitConfig, true
	}
	return 0, false
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func printProblems(stderr io.Writer, err error) {
	var p config.Problems
	if errors.As(err, &p) {
		fmt.Fprintln(stderr, "mailbox-mcp: invalid configuration:")
		for _, line := range p {
			fmt.Fprintln(stderr, "  "+line)
		}
		return
	}
	fmt.Fprintln(stderr, "mailbox-mcp:", err)
}

func cmdServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve", "Run the gateway. Every setting comes from environment variables (see .env.example);\nan invalid or missing one stops start-up with exit status 2.", stderr)
	if code, stop := parse(fs, args); stop {
		return code
	}
	a, code := newApp("mailbox-mcp", stderr)
	if a == nil {
		return code
	}
	ctx, cancel := signalContext()
	defer cancel()
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "mailbox-mcp:", err)
		return exitFail
	}
	return exitOK
}

// newApp loads the configuration (the environment, overridden by
// overrides) and builds the gateway; on failure it says why on stderr and
// returns the exit code.
func newApp(name string, stderr io.Writer, overrides ...string) (*app.App, int) {
	cfg, err := config.Load(overrides...)
	if err != nil {
		printProblems(stderr, err)
		return nil, exitConfig
	}
	a, err := app.New(cfg, app.NewLogger(stderr, cfg.LogLevel))
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return nil, exitFail
	}
	return a, exitOK
}

func cmdKeygen(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("keygen", "Print a new random ENCRYPTION_KEY (64 hex characters = 32 bytes).", stderr)
	if code, stop := parse(fs, args); stop {
		return code
	}
	k, err := credentials.NewKey()
	if err != nil {
		fmt.Fprintln(stderr, "mailbox-mcp keygen:", err)
		return exitFail
	}
	fmt.Fprintln(stdout, k)
	return exitOK
}

func cmdToken(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("token", `Seal a mailbox user and password into a credentials token for the key in
ENCRYPTION_KEY. The password is never taken from the command line: it is read
from standard input (first line) or, on a terminal, prompted for without echo.
The token is printed on standard output; nothing is written anywhere else.
It is not checked against the mail server (use imap_encrypt_credentials for that).
-access and -send narrow what the token may do; a token never gets more than
the gateway's MAILBOX_ACCESS allows. -agent binds the token to one agent of the
mailbox: every call with it acts as that agent, and a request naming another
agent (x-mailbox-agent, ?agent=) is refused. -approval makes the token's calls
ask a person first (more than the gateway's APPROVAL, never less).`, stderr)
	user := fs.String("user", "", "mailbox user name, usually the email address (prompted for if empty)")
	level := fs.String("access", "", "narrow the token to read, organize or full (empty: what the gateway allows)")
	send := fs.Bool("send", true, "allow sending mail with the token (-send=false forbids it)")
	agent := fs.String("agent", "", "bind the token to this agent name (lower-case letters, digits, '.', '_', '-'; 1 to 40)")
	approve := fs.String("approval", "", "make calls with the token ask a person first, besides the gateway's APPROVAL: send, destructive or all")
	if code, stop := parse(fs, args); stop {
		return code
	}
	if *agent != "" && !credentials.ValidAgentName(*agent) {
		fmt.Fprintln(stderr, "mailbox-mcp token: -agent:", credentials.AgentNameRule)
		return exitConfig
	}
	scope := access.Scope{NoSend: !*send}
	ap, err := access.ParseApproval(*approve)
	if err != nil {
		fmt.Fprintln(stderr, "mailbox-mcp token: -approval:", err)
		return exitConfig
	}
	scope.Approval = ap
	if *level != "" {
		l, err := access.Parse(*level)
		if err != nil {
			fmt.Fprintln(stderr, "mailbox-mcp token: -access:", err)
			return exitConfig
		}
		op, set, err := config.LoadAccess()
		if err != nil {
			printProblems(stderr, err)
			return exitConfig
		}
		if set && l > op {
			fmt.Fprintf(stderr, "mailbox-mcp token: -access %s is more than the gateway allows (MAILBOX_ACCESS=%s)\n", l, op)
			return exitConfig
		}
		scope.Level = l
	}
	key, err := config.LoadKey()
	if err != nil {
		printProblems(stderr, err)
		return exitConfig
	}
	sealer, err := credentials.NewSealer(key)
	if err != nil {
		fmt.Fprintln(stderr, "mailbox-mcp token:", err)
		return exitFail
	}
	in := bufio.NewReader(stdin)
	tty := isTerminal(stdin)
	if *user == "" {
		if tty {
			fmt.Fprint(stderr, "User: ")
		}
		line, _ := in.ReadString('\n')
		*user = strings.TrimSpace(line)
	}
	var pass string
	if f, ok := stdin.(*os.File); ok && tty {
		fmt.Fprint(stderr, "Password: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			fmt.Fprintln(stderr, "mailbox-mcp token: cannot read the password:", err)
			return exitFail
		}
		pass = string(b)
	} else {
		line, _ := in.ReadString('\n')
		pass = strings.TrimRight(line, "\r\n")
	}
	if *user == "" || pass == "" {
		fmt.Fprintln(stderr, "mailbox-mcp token: a user and a password are required (password on standard input)")
		return exitConfig
	}
	creds := credentials.New(*user, pass)
	creds.Scope = scope
	creds.Agent = *agent
	tok, err := sealer.Seal(creds)
	if err != nil {
		fmt.Fprintln(stderr, "mailbox-mcp token:", err)
		return exitFail
	}
	fmt.Fprintln(stdout, tok)
	return exitOK
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func cmdHealthcheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("healthcheck", "Exit 0 if the gateway's /health answers \"ok\" (or \"degraded\": alive, a shared dependency\nsuch as Redis away) within the timeout, 1 otherwise.\nMeant for container health checks; uses PORT and BIND_ADDRESS.", stderr)
	url := fs.String("url", config.HealthURL(), "health URL to check")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait")
	if code, stop := parse(fs, args); stop {
		return code
	}
	client := &http.Client{Timeout: *timeout}
	resp, err := client.Get(*url)
	if err != nil {
		fmt.Fprintln(stderr, "unhealthy:", err)
		return exitFail
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	degraded := strings.Contains(string(body), `"status":"degraded"`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"ok"`) && !degraded {
		fmt.Fprintf(stderr, "unhealthy: %s %s\n", resp.Status, strings.TrimSpace(string(body)))
		return exitFail
	}
	// Degraded is alive: every replica shares the dependency, and a
	// restart would not bring it back.
	if degraded {
		fmt.Fprintf(stdout, "healthy, degraded: %s\n", strings.TrimSpace(string(body)))
		return exitOK
	}
	fmt.Fprintln(stdout, "healthy")
	return exitOK
}
