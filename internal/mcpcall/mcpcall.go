// Package mcpcall calls the gateway's tools over MCP with mcp-go's client,
// for tests and the benchmark; it is never used by the gateway. It does not
// import testing: internal/mailtest wraps it for tests (MCPClient, Call,
// Decode), cmd/mailbox-bench uses it directly.
package mcpcall

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// CallTimeout bounds one CallErr.
const CallTimeout = 60 * time.Second

// Options configure Connect.
type Options struct {
	Headers     map[string]string // HTTP headers sent with every request (credentials)
	Protocol    string            // MCP protocol version; "" for mcp-go's default
	HTTPTimeout time.Duration     // per HTTP request; 0 means 60 s
	ClientName  string            // clientInfo.name; "" means "mailbox-mcp-test"
	// Elicit, when set, answers the server's forms (and declares the
	// elicitation capability).
	Elicit client.ElicitationHandler
	// HTTPClient, when set, makes the requests (tests that watch or
	// change them).
	HTTPClient *http.Client
}

// Connect connects an mcp-go client to url over streamable HTTP and
// initialises it. The caller closes the client.
func Connect(ctx context.Context, url string, o Options) (*client.Client, error) {
	if o.HTTPTimeout == 0 {
		o.HTTPTimeout = 60 * time.Second
	}
	if o.ClientName == "" {
		o.ClientName = "mailbox-mcp-test"
	}
	topts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(o.Headers), transport.WithHTTPTimeout(o.HTTPTimeout)}
	if o.HTTPClient != nil {
		topts = append(topts, transport.WithHTTPBasicClient(o.HTTPClient))
	}
	tr, err := transport.NewStreamableHTTP(url, topts...)
	if err != nil {
		return nil, err
	}
	var opts []client.ClientOption
	if o.Protocol != "" {
		opts = append(opts, client.WithProtocolVersion(o.Protocol))
	}
	if o.Elicit != nil {
		opts = append(opts, client.WithElicitationHandler(o.Elicit))
	}
	c := client.NewClient(tr, opts...)
	if err := c.Start(ctx); err != nil {
		c.Close()
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = o.Protocol
	if o.Protocol == "" {
		init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	}
	init.Params.ClientInfo = mcp.Implementation{Name: o.ClientName, Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// CallErr calls a tool, bounded by CallTimeout, and returns its result; a
// tool error comes back as a result with IsError set, not as an error.
func CallErr(c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return c.CallTool(ctx, req)
}

// Text returns the concatenated text content of a result ("" for nil).
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

// DecodeErr decodes a result's structured content into v (through JSON, as
// a client that received it would).
func DecodeErr(res *mcp.CallToolResult, v any) error {
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
