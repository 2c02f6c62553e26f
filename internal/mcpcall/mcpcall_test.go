package mcpcall_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mcpcall"
)

// echoServer is an in-process MCP server with one tool, "echo", that returns
// its argument "say" as structured content and text, the header "x-who" it
// received, and a tool error when say is empty.
func echoServer(t *testing.T) string {
	t.Helper()
	s := server.NewMCPServer("echo", "1")
	s.AddTool(mcp.NewTool("echo", mcp.WithString("say")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		say := req.GetString("say", "")
		if say == "" {
			return mcp.NewToolResultError("nothing to say"), nil
		}
		return mcp.NewToolResultStructured(map[string]any{"said": say, "who": req.Header.Get("x-who"), "n": 3}, "said "+say), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStateLess(true), server.WithDisableStreaming(true)))
	t.Cleanup(hs.Close)
	return hs.URL
}

func TestConnectCallDecode(t *testing.T) {
	url := echoServer(t)
	for _, protocol := range []string{"", mcp.ProtocolVersion20250618} {
		t.Run("protocol="+protocol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := mcpcall.Connect(ctx, url, mcpcall.Options{Headers: map[string]string{"x-who": "alice"}, Protocol: protocol})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()

			res, err := mcpcall.CallErr(c, "echo", map[string]any{"say": "hi"})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || mcpcall.Text(res) != "said hi" {
				t.Fatalf("IsError %v, Text %q; want false, %q", res.IsError, mcpcall.Text(res), "said hi")
			}
			var got struct {
				Said, Who string
				N         int
			}
			if err := mcpcall.DecodeErr(res, &got); err != nil {
				t.Fatal(err)
			}
			if got.Said != "hi" || got.Who != "alice" || got.N != 3 {
				t.Errorf("decoded %+v, want said=hi who=alice n=3", got)
			}

			// a tool error is a result, not an error
			res, err = mcpcall.CallErr(c, "echo", map[string]any{})
			if err != nil || !res.IsError || mcpcall.Text(res) != "nothing to say" {
				t.Errorf("tool error: err %v, IsError %v, Text %q", err, res != nil && res.IsError, mcpcall.Text(res))
			}
			// an unknown tool is a protocol error
			if _, err := mcpcall.CallErr(c, "no_such_tool", nil); err == nil {
				t.Error("calling an unknown tool: no error")
			}
		})
	}
}

func TestConnectRefused(t *testing.T) {
	hs := httptest.NewServer(nil)
	url := hs.URL
	hs.Close() // nothing listens there any more
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := mcpcall.Connect(ctx, url, mcpcall.Options{}); err == nil {
		c.Close()
		t.Fatal("Connect to a closed port succeeded")
	}
}

func TestText(t *testing.T) {
	if got := mcpcall.Text(nil); got != "" {
		t.Errorf("Text(nil) = %q", got)
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{
		mcp.NewTextContent("a"),
		mcp.NewImageContent("AAAA", "image/png"),
		mcp.NewTextContent("b"),
	}}
	if got := mcpcall.Text(res); got != "ab" {
		t.Errorf("Text = %q, want %q (text parts only, in order)", got, "ab")
	}
}
