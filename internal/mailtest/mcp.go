package mailtest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// MCPClient connects an mcp-go client to url with the given HTTP headers and
// protocol version ("" for mcp-go's default), initialised and ready. It is
// closed when the test ends.
func MCPClient(t testing.TB, url string, headers map[string]string, protocol string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers), transport.WithHTTPTimeout(60*time.Second))
	if err != nil {
		t.Fatalf("mcp transport: %v", err)
	}
	var opts []client.ClientOption
	if protocol != "" {
		opts = append(opts, client.WithProtocolVersion(protocol))
	}
	c := client.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("mcp start: %v", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = protocol
	if protocol == "" {
		init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	}
	init.Params.ClientInfo = mcp.Implementation{Name: "mailbox-mcp-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("mcp initialize: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Call calls a tool and returns its result; a protocol-level error fails the
// test (tool errors come back as results with IsError set).
func Call(t testing.TB, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := CallErr(c, name, args)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// CallErr is Call without the test: for use from several goroutines.
func CallErr(c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return c.CallTool(ctx, req)
}

// Text returns the concatenated text content of a result.
func Text(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var s string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}

// Decode decodes a result's structured content into v, failing the test if
// the result is an error or has none.
func Decode(t testing.TB, res *mcp.CallToolResult, v any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", Text(res))
	}
	if err := DecodeErr(res, v); err != nil {
		t.Fatal(err)
	}
}

// DecodeErr is Decode without the test.
func DecodeErr(res *mcp.CallToolResult, v any) error {
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
