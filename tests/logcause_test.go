package tests

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// When the mail server cannot be used, the request's info-level log line
// says why (the class of the failure), without secrets: a refused dial and
// a refused login.
func TestLogLineNamesTheCause(t *testing.T) {
	s := mailtest.Shared(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	for _, tc := range []struct {
		name, cause string
		env         []string
		pass        string
	}{
		{"dial_refused", `"cause":"dial_refused"`, []string{"IMAP_PORT=" + strconv.Itoa(closed), "LOG_LEVEL=info"}, s.Users[mailtest.Alice]},
		{"auth", `"cause":"auth"`, []string{"LOG_LEVEL=info"}, "wrong-password-for-the-log-test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, s, tc.env...)
			c := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": mailtest.Alice, "x-imap-pass": tc.pass}, "")
			res := mailtest.Call(t, c, "imap_list_folders", nil)
			if !res.IsError {
				t.Fatalf("the call succeeded: %s", mailtest.Text(res))
			}
			// The request's line is written when the handler returns,
			// which may be after the client has read the answer.
			var line string
			for deadline := time.Now().Add(5 * time.Second); line == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				for _, l := range strings.Split(g.Logs.String(), "\n") {
					if strings.Contains(l, `"level":"INFO"`) && strings.Contains(l, `"tool":"imap_list_folders"`) {
						line = l
					}
				}
			}
			if !strings.Contains(line, tc.cause) {
				t.Fatalf("the info line does not carry %s: %s", tc.cause, line)
			}
			if strings.Contains(g.Logs.String(), tc.pass) {
				t.Fatal("the log holds the password")
			}
		})
	}
}
