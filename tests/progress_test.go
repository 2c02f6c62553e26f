package tests

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// A long wait sends a progress notification about every 10 s to the client
// that asked for them with a progress token, on that client's own response
// stream: two clients waiting at once each get their own, never the
// other's.
func TestWaitProgressNotifications(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 12 s")
	}
	s := mailtest.Shared(t)
	g := startGateway(t, s)
	type seen struct {
		mu     sync.Mutex
		tokens []any
	}
	run := func(user, token string, got *seen, wg *sync.WaitGroup) {
		defer wg.Done()
		c := mailtest.MCPClient(t, g.URL, userHeaders(s, user), "")
		c.OnNotification(func(n mcp.JSONRPCNotification) {
			if n.Method == "notifications/progress" {
				got.mu.Lock()
				got.tokens = append(got.tokens, n.Params.AdditionalFields["progressToken"])
				got.mu.Unlock()
			}
		})
		req := mcp.CallToolRequest{}
		req.Params.Name = "imap_wait_for_email"
		req.Params.Arguments = map[string]any{"tag": "never-sent-progress-test", "timeout_s": 12}
		req.Params.Meta = &mcp.Meta{ProgressToken: token}
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		res, err := c.CallTool(ctx, req)
		if err != nil || res.IsError {
			t.Errorf("%s: %v %s", user, err, mailtest.Text(res))
		}
	}
	var a, b seen
	var wg sync.WaitGroup
	wg.Add(2)
	go run(mailtest.Alice, "token-alice", &a, &wg)
	go run(mailtest.Bob, "token-bob", &b, &wg)
	wg.Wait()
	t.Logf("alice got %v, bob got %v", a.tokens, b.tokens)
	for _, x := range []struct {
		got  []any
		want string
	}{{a.tokens, "token-alice"}, {b.tokens, "token-bob"}} {
		if len(x.got) == 0 {
			t.Errorf("no progress notification for %s", x.want)
		}
		for _, tok := range x.got {
			if tok != x.want {
				t.Errorf("a client waiting with %s got the notification of %v", x.want, tok)
			}
		}
	}
}
