package tests

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// A client that goes away mid-wait frees the wait's IMAP connection within
// a second, through the whole gateway: the HTTP request is cancelled and
// Dovecot (doveadm who) no longer lists the connection.
func TestWaitDisconnectFreesConnection(t *testing.T) {
	s := mailtest.Shared(t)
	g := startGateway(t, s)
	user := mailtest.Alice
	base := imapConnections(t, s)[user]
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(g.URL, "/mcp")+"/v1/wait?timeout_s=60&tag=never-sent-disconnect", nil)
	for k, v := range userHeaders(s, user) {
		req.Header.Set(k, v)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
	}()
	// The wait's own connection shows up at the server.
	deadline := time.Now().Add(10 * time.Second)
	for imapConnections(t, s)[user] <= base && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	during := imapConnections(t, s)[user]
	if during <= base {
		t.Fatalf("the wait holds no connection of its own (%d before, %d during)", base, during)
	}
	cancel()
	<-done
	start := time.Now()
	for imapConnections(t, s)[user] >= during && time.Since(start) < 3*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	freed := time.Since(start)
	t.Logf("connections: %d before, %d during the wait; freed %v after the client went away", base, during, freed.Round(time.Millisecond))
	if freed > time.Second {
		t.Fatalf("the wait's connection was still there %v after the client went away", freed)
	}
}
