package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/buildinfo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/config"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// The client commands call a running gateway's REST mirror (/v1/), for
// shell scripts and hooks: one command per route, flags named after the
// tool arguments, the tool's text form by default or its structured
// result with --json, and exit codes a script can branch on.

// Exit codes of the client commands.
const (
	exitFound       = 0   // found something, or done
	exitNothing     = 1   // nothing: no unread mail, no message, the wait timed out
	exitUsage       = 2   // bad flags or arguments, or a bad MAILBOX_URL
	exitUnavailable = 3   // the gateway cannot be reached, or it answered 5xx
	exitRefused     = 4   // the gateway refused the call (4xx: bad argument, credentials, no such message)
	exitApproval    = 5   // waiting for a person's approval: the link was printed
	exitInterrupted = 130 // interrupted (Ctrl-C)
)

const clientHelp = `Exit status:
  0  found or done (peek: unread mail; check, wait, list: at least one message)
  1  nothing (peek: no unread mail; check, list: no message; wait: timed out)
  2  usage error (bad flags or arguments, or a bad MAILBOX_URL)
  3  the gateway is unavailable (cannot connect, or it answered 5xx: the mail
     server is down, busy or too slow)
  4  the gateway refused the call (a bad argument, missing or wrong
     credentials, no such message or folder)
  5  a person must approve the call first (APPROVAL): the approval link was
     printed; on a terminal you are asked instead, and the status is then
     0 when approved and done, 1 when rejected

Environment:
  MAILBOX_URL    the gateway, e.g. https://mail-gateway.example.com (default:
                 the local gateway, http://127.0.0.1:$PORT, PORT 3000)
  MAILBOX_TOKEN  a credentials token (from 'mailbox-mcp token'); or else
  IMAP_USER, IMAP_PASS  the mailbox login
  MAILBOX_AGENT  the agent of the mailbox to act as (like --agent)

Output: the text an MCP client sees, or with --json the structured result
(one JSON object; see /v1/openapi.json for its schema). Errors go to stderr.
`

// argKind is how a flag's value becomes a tool argument.
type argKind int

const (
	argString argKind = iota
	argInt
	argBool
	argList  // repeatable flag: a list
	argFalse // a bool flag that, when given, sets the argument to false
)

type clientFlag struct {
	name, arg string
	kind      argKind
	usage     string
}

type clientCommand struct {
	method, path string
	summary      string
	// positional names the one positional argument, which fills {uid} in
	// path ("" when the command takes none).
	positional string
	flags      []clientFlag
	// nothing reports a result that found nothing: exit status 1.
	nothing func(result map[string]any) bool
	// prepare, when set, reads the positional arguments into the call
	// (method, path, arguments) instead of positional.
	prepare func(c *clientCall, positional []string, stdin io.Reader) error
}

// clientCall is one call to the gateway being prepared.
type clientCall struct {
	method, path string
	args         map[string]any
}

var (
	folderFlag = clientFlag{"folder", "folder", argString, "folder (default INBOX)"}
	tagFlag    = clientFlag{"tag", "tag", argString, "only messages carrying this tag"}
	fromFlag   = clientFlag{"from", "from", argString, "only messages from this sender (name or address)"}
)

var clientCommands = map[string]clientCommand{
	"send": {
		method: http.MethodPost, path: "/v1/send",
		summary: "Send an email. --text - reads the body from standard input.\nWith --agent NAME (or MAILBOX_AGENT), a message to other agents of the mailbox\ninstead: --to their names ('*' for all), --subject, --text, --tag, --conversation.",
		flags: []clientFlag{
			{"to", "to", argList, "recipient (repeat for several)"},
			{"cc", "cc", argList, "carbon-copy recipient (repeatable)"},
			{"bcc", "bcc", argList, "blind-copy recipient (repeatable)"},
			{"subject", "subject", argString, "subject"},
			{"text", "text", argString, "plain-text body; - reads standard input"},
			{"html", "html", argString, "HTML body, sent alongside the text"},
			{"from", "from", argString, `sender, "Name <user@example.com>" (default: the logged-in user)`},
			{"reply-to", "reply_to", argList, "Reply-To address (repeatable)"},
			{"tag", "tags", argList, "tag carried in the X-Mailbox-Tags header (repeatable)"},
			{"conversation", "conversation", argString, "with --agent: continue this conversation (sent to all its participants)"},
		},
	},
	"agents": {
		method: http.MethodGet, path: "/v1/agents",
		summary: "List the agents of this mailbox: unread and total messages, last activity,\nstatus line, and how many unread messages each has from you (with --agent).",
	},
	"state": {
		method: http.MethodGet, path: "/v1/agents/state", positional: "get KEY | get --prefix P | set KEY JSON",
		summary: "Read or set the state shared by the agents of this mailbox. 'state get KEY'\nprints one key, 'state get --prefix P' every key starting with P, 'state set\nKEY JSON' sets a key to a JSON value (- reads it from standard input).",
		flags:   []clientFlag{{"prefix", "prefix", argString, "with get: every key starting with this"}},
		prepare: prepareState,
	},
	"peek": {
		method: http.MethodGet, path: "/v1/peek",
		summary: "Look at the unread mail without changing anything: counts and who it is from.\nExit status 1 when there is no unread mail.",
		flags:   []clientFlag{folderFlag, tagFlag},
		nothing: func(r map[string]any) bool { n, ok := r["unread"].(float64); return ok && n == 0 },
	},
	"check": {
		method: http.MethodPost, path: "/v1/check-inbox",
		summary: "Take the unread messages, oldest first, with their text, and mark exactly\nthose as read: no other caller gets them again. Exit status 1 when there are none.",
		flags:   []clientFlag{folderFlag, {"limit", "limit", argInt, "at most this many messages"}, tagFlag, fromFlag},
		nothing: noMessages,
	},
	"wait": {
		method: http.MethodGet, path: "/v1/wait",
		summary: "Wait until a new message matching the filters arrives, or the timeout runs out\n(exit status 1).",
		flags: []clientFlag{
			{"timeout", "timeout_s", argInt, "seconds to wait at most (the gateway's default when not given)"},
			folderFlag, tagFlag, fromFlag,
			{"cursor", "cursor", argString, "start here: next_cursor of the last wait or peek (nothing missed or repeated)"},
			{"since-uid", "since_uid", argInt, "the older form of --cursor: return messages with a UID above this one (0: from the folder's start)"},
			{"unread-only", "unread_only", argBool, "only unread messages (the gateway's default: true)"},
		},
		nothing: noMessages,
	},
	"list": {
		method: http.MethodGet, path: "/v1/emails",
		summary: "List the messages of a folder, newest first (a search when --from, --subject,\n--unread or --tag is given). Exit status 1 when there are none.",
		flags: []clientFlag{
			folderFlag,
			{"limit", "limit", argInt, "how many messages"},
			{"cursor", "cursor", argString, "next_cursor of the previous page"},
			tagFlag, fromFlag,
			{"subject", "subject", argString, "only messages whose subject contains this"},
			{"unread", "seen", argFalse, "only unread messages"},
		},
		nothing: noMessages,
	},
	"read": {
		method: http.MethodGet, path: "/v1/emails/{uid}", positional: "UID",
		summary: "Read one message (reading never marks it as read).",
		flags: []clientFlag{
			folderFlag,
			{"max-chars", "max_chars", argInt, "most characters of body text"},
			{"offset", "offset", argInt, "character offset to start the body at (next_offset)"},
		},
	},
}

// agentSendFlags are the send flags that agent_send takes; the others
// are for email.
var agentSendFlags = []string{"to", "subject", "text", "tag", "conversation"}

// prepareState reads "get KEY", "get" (with --prefix) or "set KEY JSON".
func prepareState(c *clientCall, pos []string, stdin io.Reader) error {
	if len(pos) == 0 {
		return errors.New("expected get or set")
	}
	_, prefix := c.args["prefix"]
	switch {
	case pos[0] == "get" && len(pos) == 2 && !prefix:
		c.args["key"] = pos[1]
	case pos[0] == "get" && len(pos) == 1 && prefix:
	case pos[0] == "get":
		return errors.New("expected 'state get KEY' or 'state get --prefix P'")
	case pos[0] == "set" && len(pos) == 3 && !prefix:
		raw := pos[2]
		if raw == "-" {
			b, err := io.ReadAll(stdin)
			if err != nil {
				return fmt.Errorf("cannot read the value from standard input: %v", err)
			}
			raw = string(b)
		}
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil || dec.More() {
			return errors.New(`the value must be JSON, e.g. '"text"', 42, '{"a":1}' (quote a string in JSON)`)
		}
		c.method, c.path = http.MethodPost, "/v1/agents/state"
		c.args["key"], c.args["value"] = pos[1], v
	case pos[0] == "set":
		return errors.New("expected 'state set KEY JSON'")
	default:
		return fmt.Errorf("expected get or set, got %q", pos[0])
	}
	return nil
}

func noMessages(r map[string]any) bool {
	list, ok := r["messages"].([]any)
	return ok && len(list) == 0
}

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func cmdClient(name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cc := clientCommands[name]
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	synopsis := name + " [options]"
	if cc.positional != "" {
		synopsis = name + " " + cc.positional + " [options]"
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: mailbox-mcp %s\n\n%s\nCalls %s %s on a running gateway.\n\nOptions:\n", synopsis, cc.summary, cc.method, cc.path)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\n%s", clientHelp)
	}
	env := config.ClientEnv()
	base := fs.String("url", env.URL, "the gateway's URL (MAILBOX_URL)")
	asJSON := fs.Bool("json", false, "print the structured result as JSON instead of text")
	agentUsage := "act as this agent of the mailbox (MAILBOX_AGENT; sent as x-mailbox-agent): peek, check and wait default to its folder"
	if name == "send" {
		agentUsage += "; send goes to other agents by name (--to NAME, or --to '*' for all) instead of by email (--agent= sends email)"
	}
	agent := fs.String("agent", env.Agent, agentUsage)
	values := map[string]any{}
	for _, f := range cc.flags {
		switch f.kind {
		case argString:
			values[f.name] = fs.String(f.name, "", f.usage)
		case argInt:
			values[f.name] = fs.Int64(f.name, 0, f.usage)
		case argBool, argFalse:
			values[f.name] = fs.Bool(f.name, false, f.usage)
		case argList:
			l := &listFlag{}
			fs.Var(l, f.name, f.usage)
			values[f.name] = l
		}
	}
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "mailbox-mcp %s: %s\n", name, fmt.Sprintf(format, a...))
		fmt.Fprintf(stderr, "Run 'mailbox-mcp %s --help' for the options.\n", name)
		return exitUsage
	}
	path := cc.path
	switch {
	case cc.prepare != nil:
	case cc.positional != "" && len(positional) != 1:
		return usageErr("expected one %s argument, got %d", cc.positional, len(positional))
	case cc.positional == "" && len(positional) > 0:
		return usageErr("unexpected argument %q", positional[0])
	case cc.positional != "":
		uid, err := strconv.ParseUint(positional[0], 10, 32)
		if err != nil || uid == 0 {
			return usageErr("%s must be a message UID, a whole number from 1 (got %q)", cc.positional, positional[0])
		}
		path = strings.Replace(path, "{uid}", strconv.FormatUint(uid, 10), 1)
	}
	env.Agent = strings.TrimSpace(*agent)
	if env.Agent != "" && !credentials.ValidAgentName(env.Agent) {
		return usageErr("--agent (or MAILBOX_AGENT) is not a valid agent name: %s", credentials.AgentNameRule)
	}

	// Only the flags given become arguments: the gateway has the defaults.
	targs := map[string]any{}
	var flagErr error
	byName := map[string]clientFlag{}
	for _, f := range cc.flags {
		byName[f.name] = f
	}
	method := cc.method
	if name == "send" && env.Agent != "" {
		// From an agent, send is agent_send: by name, inside the mailbox.
		path = "/v1/agents/send"
		var email []string
		fs.Visit(func(fl *flag.Flag) {
			if _, ok := byName[fl.Name]; ok && !slices.Contains(agentSendFlags, fl.Name) {
				email = append(email, "--"+fl.Name)
			}
		})
		if len(email) > 0 {
			return usageErr("%s is for email, and with --agent send goes to other agents (it takes --%s); give --agent= to send email", strings.Join(email, ", "), strings.Join(agentSendFlags, ", --"))
		}
	} else if name == "send" {
		var conv bool
		fs.Visit(func(fl *flag.Flag) { conv = conv || fl.Name == "conversation" })
		if conv {
			return usageErr("--conversation is for messages between agents: give --agent NAME (or MAILBOX_AGENT)")
		}
	}
	fs.Visit(func(fl *flag.Flag) {
		f, ok := byName[fl.Name]
		if !ok {
			return
		}
		switch f.kind {
		case argString:
			v := *values[f.name].(*string)
			if f.name == "text" && v == "-" {
				b, err := io.ReadAll(stdin)
				if err != nil {
					flagErr = fmt.Errorf("cannot read the text from standard input: %v", err)
				}
				v = string(b)
			}
			targs[f.arg] = v
		case argInt:
			targs[f.arg] = *values[f.name].(*int64)
		case argBool:
			targs[f.arg] = *values[f.name].(*bool)
		case argFalse:
			if *values[f.name].(*bool) {
				targs[f.arg] = false
			}
		case argList:
			targs[f.arg] = []string(*values[f.name].(*listFlag))
		}
	})
	if flagErr != nil {
		return usageErr("%v", flagErr)
	}
	if cc.prepare != nil {
		call := &clientCall{method: method, path: path, args: targs}
		if err := cc.prepare(call, positional, stdin); err != nil {
			return usageErr("%v", err)
		}
		method, path = call.method, call.path
	}
	endpoint, err := gatewayURL(*base, path)
	if err != nil {
		return usageErr("%v", err)
	}
	_, timeoutGiven := targs["timeout_s"]
	limit := 5 * time.Minute
	if name == "wait" && timeoutGiven {
		limit = time.Duration(targs["timeout_s"].(int64))*time.Second + 2*time.Minute
	}

	ctx, cancel := signalContext()
	defer cancel()
	req, err := clientRequest(ctx, method, endpoint, targs, env)
	if err != nil {
		return usageErr("%v", err)
	}
	client := &http.Client{Timeout: limit, Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
	}}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "mailbox-mcp %s: interrupted\n", name)
			return exitInterrupted
		}
		fmt.Fprintf(stderr, "mailbox-mcp %s: cannot reach the gateway at %s: %v\n", name, gatewayBase(endpoint), unwrapURLError(err))
		return exitUnavailable
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		fmt.Fprintf(stderr, "mailbox-mcp %s: the gateway's answer broke off: %v\n", name, err)
		return exitUnavailable
	}
	if resp.StatusCode == http.StatusAccepted {
		return approvalPending(ctx, name, body, stdin, stdout, stderr)
	}
	if resp.StatusCode != http.StatusOK {
		msg := errorMessage(resp, body)
		if resp.StatusCode == http.StatusUnauthorized && env.Token == "" && env.User == "" {
			msg += " (set MAILBOX_TOKEN, or IMAP_USER and IMAP_PASS)"
		}
		fmt.Fprintf(stderr, "mailbox-mcp %s: %s\n", name, msg)
		if resp.StatusCode >= 500 {
			return exitUnavailable
		}
		return exitRefused
	}
	var both struct {
		Result json.RawMessage `json:"result"`
		Text   *string         `json:"text"`
	}
	var result map[string]any
	if json.Unmarshal(body, &both) != nil || both.Text == nil || json.Unmarshal(both.Result, &result) != nil {
		fmt.Fprintf(stderr, "mailbox-mcp %s: %s did not answer like a mailbox-mcp gateway (is the URL right?)\n", name, gatewayBase(endpoint))
		return exitUnavailable
	}
	if *asJSON {
		stdout.Write(append(bytes.TrimSpace(both.Result), '\n'))
	} else {
		text := *both.Text
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		io.WriteString(stdout, text)
	}
	if cc.nothing != nil && cc.nothing(result) {
		return exitNothing
	}
	return exitFound
}

// parseInterleaved parses flags that may come before or after the
// positional arguments ("read 42 --folder Sent").
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		// After "--" everything is positional.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// gatewayURL makes the URL of path on the gateway at base. base may be
// given with its /mcp or /v1 path, as people copy it from elsewhere.
func gatewayURL(base, path string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("the gateway URL must be http:// or https:// with a host, like https://mail-gateway.example.com (got %q): set --url or MAILBOX_URL", base)
	}
	p := strings.TrimRight(u.Path, "/")
	for _, suffix := range []string{"/mcp", "/v1"} {
		p = strings.TrimSuffix(p, suffix)
	}
	u.Path, u.RawQuery, u.Fragment = p+path, "", ""
	return u.String(), nil
}

// gatewayBase is the scheme and host of a URL, for messages.
func gatewayBase(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint
	}
	return u.Scheme + "://" + u.Host
}

// clientRequest makes the call: GET arguments in the query, POST ones as
// a JSON body, credentials in headers (never in the URL), and
// format=both, so that one call (check consumes what it returns) gives
// both the text and the result the exit status is read from.
func clientRequest(ctx context.Context, method, endpoint string, args map[string]any, env config.Client) (*http.Request, error) {
	q := url.Values{"format": {"both"}}
	var body io.Reader
	if method == http.MethodGet {
		for k, v := range args {
			switch x := v.(type) {
			case []string:
				q[k] = x
			default:
				q.Set(k, fmt.Sprint(x))
			}
		}
	} else {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint+"?"+q.Encode(), body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "mailbox-mcp-cli/"+buildinfo.Version())
	if env.Agent != "" {
		req.Header.Set("X-Mailbox-Agent", env.Agent)
	}
	switch {
	case env.Token != "":
		req.Header.Set("X-Mailbox-Token", env.Token)
	case env.User != "" || env.Password != "":
		if env.User == "" || env.Password == "" {
			return nil, errors.New("set both IMAP_USER and IMAP_PASS, or MAILBOX_TOKEN")
		}
		req.Header.Set("X-Imap-User", env.User)
		req.Header.Set("X-Imap-Pass", env.Password)
	}
	return req, nil
}

// errorMessage is the sentence of a failed call: the mirror's
// {"error":{"message"}}, the middleware's {"error": "..."}, or the status.
func errorMessage(resp *http.Response, body []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && len(e.Error) > 0 {
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return s
		}
		var d struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &d) == nil && d.Message != "" {
			return d.Message
		}
	}
	return fmt.Sprintf("the gateway answered %s", resp.Status)
}

// unwrapURLError drops net/http's "Get \"URL\":" prefix, which repeats
// the URL the message already names.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// approvalPending handles a call that waits for a person's approval: it
// prints the link; on a terminal it shows the approval page's summary and
// asks, and answers the page (Approve or Reject) for the person.
func approvalPending(ctx context.Context, name string, body []byte, stdin io.Reader, stdout, stderr io.Writer) int {
	var both struct {
		Result struct {
			Approval struct {
				URL     string `json:"url"`
				Message string `json:"message"`
			} `json:"approval"`
		} `json:"result"`
		Text string `json:"text"`
	}
	if json.Unmarshal(body, &both) != nil || both.Result.Approval.URL == "" {
		fmt.Fprintf(stderr, "mailbox-mcp %s: the gateway asked for approval without a link\n", name)
		return exitUnavailable
	}
	link := both.Result.Approval.URL
	if !isTerminal(stdin) {
		fmt.Fprintf(stdout, "Waiting for approval: nothing has happened yet. Open this link to approve or reject (it works once):\n%s\n", link)
		return exitApproval
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	page, err := fetchPage(ctx, hc, http.MethodGet, link, nil)
	if err != nil {
		fmt.Fprintf(stderr, "mailbox-mcp %s: the approval page: %v\n", name, err)
		return exitUnavailable
	}
	fmt.Fprintf(stderr, "%s\n\nApprove? [y/N] ", pageText(page))
	answer, _ := bufio.NewReader(stdin).ReadString('\n')
	action := "reject"
	if a := strings.ToLower(strings.TrimSpace(answer)); a == "y" || a == "yes" {
		action = "approve"
	}
	m := csrfValue.FindStringSubmatch(page)
	if m == nil {
		fmt.Fprintf(stderr, "mailbox-mcp %s: the approval page has no form: %s\n", name, pageText(page))
		return exitRefused
	}
	done, err := fetchPage(ctx, hc, http.MethodPost, link, url.Values{"csrf": {html.UnescapeString(m[1])}, "action": {action}})
	if err != nil {
		fmt.Fprintf(stderr, "mailbox-mcp %s: %v\n", name, err)
		return exitRefused
	}
	fmt.Fprintln(stdout, pageText(done))
	if action == "reject" {
		return exitNothing
	}
	return exitFound
}

var (
	csrfValue = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	tags      = regexp.MustCompile(`(?s)<style.*?</style>|<[^>]+>`)
	blankRuns = regexp.MustCompile(`\n\s*\n+`)
)

// fetchPage gets or posts to the approval page; a status other than 200
// is an error carrying the page's text.
func fetchPage(ctx context.Context, hc *http.Client, method, link string, form url.Values) (string, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, link, body)
	if err != nil {
		return "", err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", unwrapURLError(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(pageText(string(b)))
	}
	return string(b), nil
}

// pageText is the approval page as plain text, for the terminal.
func pageText(page string) string {
	main := page
	if i := strings.Index(page, "<main>"); i >= 0 {
		main = page[i:]
	}
	if i := strings.Index(main, "<form"); i >= 0 {
		main = main[:i]
	}
	t := html.UnescapeString(tags.ReplaceAllString(main, "\n"))
	return strings.TrimSpace(blankRuns.ReplaceAllString(t, "\n"))
}
