package mailtest

import (
	"context"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mcpcall"
)

// MCPClient connects an mcp-go client to url with the given HTTP headers and
// protocol version ("" for mcp-go's default), initialised and ready. It is
// closed when the test ends.
func MCPClient(t testing.TB, url string, headers map[string]string, protocol string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpcall.Connect(ctx, url, mcpcall.Options{Headers: headers, Protocol: protocol})
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Call calls a tool and returns its result; a protocol-level error fails the
// test (tool errors come back as results with IsError set).
func Call(t testing.TB, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := mcpcall.CallErr(c, name, args)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// CallErr is mcpcall.CallErr: Call without the test, for use from several
// goroutines.
func CallErr(c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, error) {
	return mcpcall.CallErr(c, name, args)
}

// Text is mcpcall.Text: the concatenated text content of a result.
func Text(res *mcp.CallToolResult) string { return mcpcall.Text(res) }

// Decode decodes a result's structured content into v, failing the test if
// the result is an error or has none.
func Decode(t testing.TB, res *mcp.CallToolResult, v any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", Text(res))
	}
	if err := mcpcall.DecodeErr(res, v); err != nil {
		t.Fatal(err)
	}
}

// DecodeErr is mcpcall.DecodeErr: Decode without the test.
func DecodeErr(res *mcp.CallToolResult, v any) error { return mcpcall.DecodeErr(res, v) }
