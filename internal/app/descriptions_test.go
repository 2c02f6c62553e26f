package app_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// toolName is how a tool is named in a description.
var toolName = regexp.MustCompile(`\b(?:imap|smtp|agent)_[a-z_]+[a-z]\b`)

// TestDescriptionsNameOnlyListedTools: in every configuration (sending on
// or off, agents on or off, each operator level, a token that may not
// send or only read), no description in tools/list (of a tool, of an
// argument, of a result field) names a tool that list does not hold: a
// model told to call a tool it cannot see is misled.
func TestDescriptionsNameOnlyListedTools(t *testing.T) {
	for _, smtp := range []bool{false, true} {
		for _, agents := range []string{"on", "off"} {
			for _, level := range access.Levels {
				name := "smtp=" + map[bool]string{false: "off", true: "on"}[smtp] + "/AGENTS=" + agents + "/MAILBOX_ACCESS=" + level.String()
				t.Run(name, func(t *testing.T) {
					g := startDemoGatewayWith(t, smtp, "AGENTS="+agents, "MAILBOX_ACCESS="+level.String())
					key, _ := hex.DecodeString(g.Key)
					sealer, err := credentials.NewSealer(key)
					if err != nil {
						t.Fatal(err)
					}
					u := g.Users[0]
					for _, sc := range []struct {
						name  string
						scope *access.Scope
					}{{"headers", nil}, {"token no-send", &access.Scope{NoSend: true}}, {"token read", &access.Scope{Level: access.Read}}} {
						hdr := headers(u)
						if sc.scope != nil {
							c := credentials.New(u.Address, u.Password)
							c.Scope = *sc.scope
							tok, err := sealer.Seal(c)
							if err != nil {
								t.Fatal(err)
							}
							hdr = map[string]string{"x-mailbox-token": tok}
						}
						c := mailtest.MCPClient(t, g.URL, hdr, "")
						res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
						if err != nil {
							t.Fatal(err)
						}
						var listed []string
						for _, tool := range res.Tools {
							listed = append(listed, tool.Name)
						}
						for _, tool := range res.Tools {
							raw, err := json.Marshal(tool)
							if err != nil {
								t.Fatal(err)
							}
							var bad []string
							for _, n := range toolName.FindAllString(string(raw), -1) {
								if n != tool.Name && !slices.Contains(listed, n) && !slices.Contains(bad, n) {
									bad = append(bad, n)
								}
							}
							sort.Strings(bad)
							if len(bad) > 0 {
								t.Errorf("%s: %s names %v, which are not listed", sc.name, tool.Name, bad)
							}
						}
					}
				})
			}
		}
	}
}
