package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// Exactly once across gateway replicas: 200 unread messages drained by 8
// concurrent consumers, 4 through MCP on one gateway and 4 through the
// REST mirror on another (separate pools, as two processes): every message
// is returned exactly once and none is left unread in Dovecot.
func TestExactlyOnceAcrossGatewaysAndREST(t *testing.T) {
	s := mailtest.Shared(t)
	user := mailtest.Bob
	folder := fmt.Sprintf("Drain%d", time.Now().UnixNano()%1e6)
	d := direct(t, s, user)
	if err := d.Create(folder, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Delete(folder).Wait() })
	const total = 200
	for i := range total {
		raw := fmt.Sprintf("From: Worker <w%d@example.org>\r\nTo: %s\r\nSubject: job %d\r\nMessage-ID: <job%d.%s@example.org>\r\n\r\njob %d\r\n", i%7, user, i, i, folder, i)
		cmd := d.Append(folder, int64(len(raw)), nil)
		cmd.Write([]byte(raw))
		cmd.Close()
		if _, err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	g1 := startGateway(t, s)
	g2 := startGateway(t, s)
	restURL := strings.TrimSuffix(g2.URL, "/mcp") + "/v1/check-inbox"

	var mu sync.Mutex
	got := map[uint32]int{}
	exact := true
	record := func(uids []uint32, ex bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, u := range uids {
			got[u]++
		}
		exact = exact && ex
	}
	type consumed struct {
		Messages []struct {
			UID uint32 `json:"uid"`
		} `json:"messages"`
		ExactlyOnce bool `json:"exactly_once"`
	}
	uidsOf := func(c consumed) []uint32 {
		var out []uint32
		for _, m := range c.Messages {
			out = append(out, m.UID)
		}
		return out
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mcpCall func() (consumed, error)
			if i%2 == 0 {
				c := mailtest.MCPClient(t, g1.URL, userHeaders(s, user), "")
				mcpCall = func() (consumed, error) {
					var out consumed
					res, err := mailtest.CallErr(c, "imap_check_inbox", map[string]any{"folder": folder, "limit": 10, "max_chars": 100})
					if err == nil && res.IsError {
						err = fmt.Errorf("%s", mailtest.Text(res))
					}
					if err == nil {
						err = mailtest.DecodeErr(res, &out)
					}
					return out, err
				}
			} else {
				mcpCall = func() (consumed, error) {
					var out consumed
					body, _ := json.Marshal(map[string]any{"folder": folder, "limit": 10, "max_chars": 100})
					req, _ := http.NewRequest("POST", restURL, bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					for k, v := range userHeaders(s, user) {
						req.Header.Set(k, v)
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						return out, err
					}
					defer resp.Body.Close()
					if resp.StatusCode != 200 {
						return out, fmt.Errorf("REST status %d", resp.StatusCode)
					}
					return out, json.NewDecoder(resp.Body).Decode(&out)
				}
			}
			for empty := 0; empty < 2; {
				c, err := mcpCall()
				if err != nil {
					t.Errorf("consumer %d: %v", i, err)
					return
				}
				if len(c.Messages) == 0 {
					empty++
					continue
				}
				empty = 0
				record(uidsOf(c), c.ExactlyOnce)
			}
		}()
	}
	wg.Wait()
	twice := 0
	for _, n := range got {
		if n > 1 {
			twice++
		}
	}
	t.Logf("%d messages returned, %d more than once, exactly_once=%v", len(got), twice, exact)
	if len(got) != total || twice != 0 || !exact {
		t.Fatalf("%d of %d messages returned, %d of them more than once (exactly_once=%v)", len(got), total, twice, exact)
	}
	if _, err := d.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	res, err := d.UIDSearch(&imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}}, nil).Wait()
	if err != nil || len(res.AllUIDs()) != 0 {
		t.Fatalf("unread left in Dovecot: %v %v", res.AllUIDs(), err)
	}
}
