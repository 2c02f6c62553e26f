package tests

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mailbox-mcp/mailbox-mcp"

// The package boundaries of docs/architecture.md, checked on the non-test
// imports of each package: data moves one way, and each library is used
// only where the architecture puts it.
func TestPackageBoundaries(t *testing.T) {
	const (
		imap   = "github.com/emersion/go-imap/v2"
		smtp   = "github.com/emersion/go-smtp"
		mcp    = "github.com/mark3labs/mcp-go"
		envlib = "github.com/caarlos0/env"
	)
	rules := []struct {
		pkg     string
		never   []string // import path prefixes
		because string
	}{
		{"internal/tools", []string{imap, smtp}, "tools talk to mailbox and submission, never IMAP or SMTP"},
		{"internal/mailbox", []string{mcp, smtp, module + "/internal/tools", module + "/internal/httpapi"}, "the IMAP layer knows nothing of MCP or HTTP"},
		{"internal/submission", []string{mcp, imap, module + "/internal/tools", module + "/internal/mailbox"}, "the SMTP layer knows nothing of MCP or IMAP"},
		{"internal/mailmsg", []string{mcp, imap, smtp, module + "/internal/mailbox", module + "/internal/tools"}, "MIME handling does no I/O"},
		{"internal/pool", []string{imap, smtp, mcp, module + "/"}, "the pool knows nothing of IMAP or the rest of the gateway"},
		{"internal/credentials", []string{imap, smtp, mcp, module + "/internal/mailbox", module + "/internal/tools"}, "tokens know nothing of mail or MCP"},
		{"internal/guard", []string{imap, smtp, mcp, module + "/internal/mailbox", module + "/internal/tools"}, "the guard does no I/O"},
		{"internal/httpapi", []string{imap, smtp, module + "/internal/mailbox", module + "/internal/submission"}, "the HTTP layer never touches mail"},
	}
	for _, r := range rules {
		imports := packageImports(t, r.pkg)
		if len(imports) == 0 {
			t.Fatalf("%s: no imports found: the test proves nothing", r.pkg)
		}
		for _, imp := range imports {
			for _, bad := range r.never {
				if imp == strings.TrimSuffix(bad, "/") || strings.HasPrefix(imp, bad) && imp != module+"/"+r.pkg {
					t.Errorf("%s imports %s: %s", r.pkg, imp, r.because)
				}
			}
		}
	}
	// Only internal/config parses the environment.
	for _, pkg := range []string{"internal/app", "internal/httpapi", "internal/tools", "internal/mailbox", "internal/submission", "cmd/mailbox-mcp"} {
		if slices.ContainsFunc(packageImports(t, pkg), func(s string) bool { return strings.HasPrefix(s, envlib) }) {
			t.Errorf("%s imports %s: only internal/config reads the environment", pkg, envlib)
		}
		if calls := envReads(t, pkg); len(calls) > 0 {
			t.Errorf("%s reads the environment (%s): only internal/config does", pkg, strings.Join(calls, ", "))
		}
	}
}

// packageImports lists the imports of a package's non-test files.
func packageImports(t *testing.T, rel string) []string {
	t.Helper()
	p, err := build.ImportDir(filepath.Join("..", rel), 0)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return p.Imports
}

// envReads finds os.Getenv, os.LookupEnv and os.Environ calls in a package's
// non-test files.
func envReads(t *testing.T, rel string) []string {
	t.Helper()
	p, err := build.ImportDir(filepath.Join("..", rel), 0)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	var found []string
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "os" && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv" || sel.Sel.Name == "Environ") {
				found = append(found, fset.Position(sel.Pos()).String())
			}
			return true
		})
	}
	return found
}
