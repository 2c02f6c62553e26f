package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/submission"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// fuzzDeps are Deps whose mail servers refuse every connection at once
// (a closed port): argument decoding and validation run for real, and the
// rare input that gets as far as the network fails fast.
func fuzzDeps(f *testing.F) *Deps {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	log := slog.New(slog.DiscardHandler)
	sealer, _ := credentials.NewSealer(bytes.Repeat([]byte{9}, credentials.KeyLength))
	mb := mailbox.New(mailbox.Config{Host: "127.0.0.1", Port: port, Security: transport.TLS, Timeout: time.Second},
		pool.Config{MaxTotal: 2, MaxPerGroup: 1}, log)
	f.Cleanup(func() { mb.Close(context.Background()) })
	sub := submission.New(submission.Config{Host: "127.0.0.1", Port: port, Security: transport.TLS, Timeout: time.Second}, log)
	return &Deps{Sealer: sealer, Mailbox: mb, Log: log, Outbox: outbox.New(outbox.Config{}, mb, sub, log),
		Guard: guard.New(guard.Config{RatePerMinute: 1e9, Burst: 1e6, FailuresPerUser: 1e6}), MaxRequestBytes: 1 << 20}
}

// FuzzToolArguments calls every tool's handler with arbitrary JSON
// arguments, bypassing mcp-go's schema validation: no panic, never a Go
// error (mcp-go would send its text to the client), and every refusal is a
// tool error with a sentence, not the generic internal error.
func FuzzToolArguments(f *testing.F) {
	d := fuzzDeps(f)
	all := All(d)
	seeds := []string{
		`{}`, `null`, `[]`, `"x"`, `{"uid":1}`, `{"uid":-1}`, `{"uid":1e300}`, `{"uid":"12"}`, `{"uid":4294967296}`,
		`{"limit":0}`, `{"limit":1000000}`, `{"cursor":"!!"}`, `{"cursor":"djE6MTox"}`, `{"folder":"\u0000INBOX"}`,
		`{"since":"2026-02-30"}`, `{"before":"yesterday"}`, `{"seen":"yes"}`, `{"larger":-5}`, `{"text":"a\r\nb"}`,
		`{"credentials":"mbx1.AAAA"}`, `{"credentials":7}`, `{"user":"a\u0000b","password":"x"}`, `{"user":"a","password":"b","verify":false}`,
		`{"to":["x"],"subject":"s","body":"b"}`, `{"to":"a@b","subject":"s\r\nBcc: c@d","body":"b"}`,
		`{"uid":1,"body":"b","reply_all":true}`, `{"max_chars":0,"offset":-1}`, `{"attachments":[{"filename":"../x","content_base64":"!"}]}`,
	}
	for i, s := range seeds {
		f.Add(byte(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, which byte, data []byte) {
		var args any
		if err := json.Unmarshal(data, &args); err != nil {
			return // mcp-go never hands a handler invalid JSON
		}
		tool := all[int(which)%len(all)]
		req := mcp.CallToolRequest{}
		req.Params.Name = tool.Def.Name
		req.Params.Arguments = args
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := tool.Handler(ctx, req)
		if err != nil {
			t.Fatalf("%s(%s): Go error %v", tool.Def.Name, data, err)
		}
		if res == nil {
			t.Fatalf("%s(%s): nil result", tool.Def.Name, data)
		}
		if res.IsError {
			var text string
			for _, c := range res.Content {
				if tc, ok := c.(mcp.TextContent); ok {
					text += tc.Text
				}
			}
			if strings.TrimSpace(text) == "" || strings.Contains(text, "internal error") {
				t.Fatalf("%s(%s): unclear error %q", tool.Def.Name, data, text)
			}
		}
	})
}
