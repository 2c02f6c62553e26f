package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/config"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
)

// mcpRemote is the mcp-remote the printed Claude Desktop snippet runs: the
// version tests/clients locks and the README shows (a test keeps all three
// in step). Pinned, and run with -y, because Claude Desktop shows no
// terminal where npx could ask to install it.
const mcpRemote = "mcp-remote@0.15.1"

func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("demo", `Run the gateway against an embedded IMAP and SMTP server on loopback, seeded
with two demo mailboxes. Nothing outside this process is needed or touched.
PORT and LOG_LEVEL are honoured. ENCRYPTION_KEY (and ENCRYPTION_KEY_PREVIOUS)
are used when set, so tokens made by 'mailbox-mcp token' open; without them the
encryption key is ephemeral.`, stderr)
	port := fs.Int("port", 0, "HTTP port (default: $PORT or 3000; a free port if that is taken)")
	if code, stop := parse(fs, args); stop {
		return code
	}
	key, previous, err := config.LoadOptionalKeys()
	if err != nil {
		printProblems(stderr, err)
		return exitConfig
	}
	ctx, cancel := signalContext()
	defer cancel()

	start := time.Now()
	srv, err := demo.Start(ctx, demo.Options{})
	if err != nil {
		fmt.Fprintln(stderr, "mailbox-mcp demo: cannot start the embedded mail server:", err)
		return exitFail
	}
	defer srv.Close()
	keyHex := hex.EncodeToString(key)
	if key == nil {
		if keyHex, err = credentials.NewKey(); err != nil {
			fmt.Fprintln(stderr, "mailbox-mcp demo:", err)
			return exitFail
		}
	}
	imapHost, imapPort, _ := net.SplitHostPort(srv.IMAPAddr)
	smtpHost, smtpPort, _ := net.SplitHostPort(srv.SMTPAddr)
	overrides := []string{
		"IMAP_HOST=" + imapHost, "IMAP_PORT=" + imapPort, "IMAP_SECURITY=plain",
		"SMTP_HOST=" + smtpHost, "SMTP_PORT=" + smtpPort, "SMTP_SECURITY=plain",
		"ALLOW_PLAINTEXT_AUTH=true", "ENCRYPTION_KEY=" + keyHex, "BIND_ADDRESS=127.0.0.1",
		"AUTHSERV_ID=" + demo.AuthServID,
	}
	if previous != nil {
		overrides = append(overrides, "ENCRYPTION_KEY_PREVIOUS="+hex.EncodeToString(previous))
	}
	if *port != 0 {
		overrides = append(overrides, "PORT="+strconv.Itoa(*port))
	}
	a, code := newApp("mailbox-mcp demo", stderr, overrides...)
	if a == nil {
		return code
	}
	ln, err := a.Listen()
	if err != nil && *port == 0 {
		// The default port is taken: any free port will do for a demo.
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		fmt.Fprintln(stderr, "mailbox-mcp demo:", err)
		return exitFail
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	printDemo(stdout, url, srv.Users, time.Since(start))
	if err := a.Serve(ctx, ln); err != nil {
		fmt.Fprintln(stderr, "mailbox-mcp demo:", err)
		return exitFail
	}
	return exitOK
}

// The printed snippets, with their keys in the README's order.
type (
	snippet struct {
		MCPServers map[string]any `json:"mcpServers"`
	}
	httpServer struct {
		Type    string       `json:"type"`
		URL     string       `json:"url"`
		Headers loginHeaders `json:"headers"`
	}
	loginHeaders struct {
		User string `json:"x-imap-user"`
		Pass string `json:"x-imap-pass"`
	}
	stdioServer struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
)

func printDemo(w io.Writer, url string, users []demo.User, took time.Duration) {
	u := users[0]
	mcpJSON, _ := json.MarshalIndent(snippet{map[string]any{
		"mailbox": httpServer{"http", url, loginHeaders{u.Address, u.Password}},
	}}, "", "  ")
	desktop, _ := json.MarshalIndent(snippet{map[string]any{
		"mailbox": stdioServer{"npx", []string{"-y", mcpRemote, url,
			"--header", "x-imap-user:" + u.Address, "--header", "x-imap-pass:" + u.Password}},
	}}, "", "  ")
	fmt.Fprintf(w, "mailbox-mcp demo is running (ready in %s).\n\n", took.Round(time.Millisecond))
	fmt.Fprintf(w, "MCP URL: %s\n\nDemo mailboxes (embedded server, in memory, gone when this stops):\n", url)
	for _, x := range users {
		fmt.Fprintf(w, "  user %-20s password %s\n", x.Address, x.Password)
	}
	fmt.Fprintf(w, "\nClaude Code (.mcp.json in your project, or: claude mcp add --transport http mailbox %s --header \"x-imap-user: %s\" --header \"x-imap-pass: %s\"):\n%s\n",
		url, u.Address, u.Password, mcpJSON)
	fmt.Fprintf(w, "\nClaude Desktop (claude_desktop_config.json), through mcp-remote:\n%s\n", desktop)
	fmt.Fprintf(w, "\nor from a shell: npx -y %s %s --header x-imap-user:%s --header x-imap-pass:%s\n\nPress Ctrl-C to stop.\n",
		mcpRemote, url, u.Address, u.Password)
}
