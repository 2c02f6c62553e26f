package tests

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
		{"internal/mailstack", []string{mcp, module + "/"}, "the test mail stack knows nothing of MCP or the gateway"},
		{"internal/hydra", []string{mcp, imap, smtp, module + "/"}, "the test OAuth provider (Ory Hydra) knows nothing of mail, MCP or the gateway"},
		{"internal/mcpcall", []string{imap, smtp, module + "/"}, "the MCP call helpers know nothing of mail or the gateway"},
		{"internal/oauth", []string{imap, smtp, mcp, module + "/internal/mailbox", module + "/internal/tools", module + "/internal/httpapi"}, "the authorization server checks logins through a Verifier; no IMAP, MCP or HTTP wiring"},
		{"internal/metrics", []string{mcp, imap, smtp, module + "/internal/tools", module + "/internal/mailbox", module + "/internal/httpapi"}, "metrics knows nothing of MCP, mail protocols or the layers it observes"},
		{"internal/agents", []string{mcp, imap, smtp, module + "/internal/tools", module + "/internal/httpapi"}, "agents compose mailbox operations; they know nothing of MCP, HTTP or the IMAP wire"},
		{"internal/download", []string{mcp, imap, smtp, module + "/internal/tools"}, "downloads stream what the mailbox layer fetches; no MCP, no IMAP wire"},
		{"internal/hosts", []string{mcp, imap, smtp, module + "/internal/mailbox", module + "/internal/tools", module + "/internal/oauth"}, "which mail hosts are served: config facts and DNS, no mail protocol"},
		{"internal/providers", []string{mcp, imap, smtp, module + "/"}, "provider sign-in knows OpenID and OAuth, nothing of mail or the gateway"},
		{"internal/approval", []string{mcp, imap, smtp, module + "/internal/tools", module + "/internal/mailbox", module + "/internal/outbox"}, "approval seals, guards and shows; what an approved call does is the tools' business"},
		{"internal/egress", []string{mcp, imap, smtp, module + "/"}, "the outbound address check knows nothing of the gateway: any package that dials for a caller uses it"},
		{"internal/memory", []string{mcp, imap, smtp, module + "/"}, "the shared memories know nothing of the gateway: oauth, approval and guard name them and use them"},
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

// modulePackage is one package of the module with non-test Go files.
type modulePackage struct {
	rel   string // directory relative to the module root, slash-separated
	pkg   *build.Package
	files map[string]*ast.File // non-test file name -> parsed file, with comments
	fset  *token.FileSet
}

// modulePackages finds every package of the module (cmd/* included): each
// directory under the module root with non-test Go files, testdata and
// hidden directories excepted.
func modulePackages(t *testing.T) []modulePackage {
	t.Helper()
	var pkgs []modulePackage
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != ".." && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(path, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(p.GoFiles)+len(p.CgoFiles) == 0 {
			return nil // tests only, like tests/
		}
		rel, err := filepath.Rel("..", path)
		if err != nil {
			return err
		}
		mp := modulePackage{rel: filepath.ToSlash(rel), pkg: p, files: map[string]*ast.File{}, fset: token.NewFileSet()}
		for _, name := range append(slices.Clone(p.GoFiles), p.CgoFiles...) {
			f, err := parser.ParseFile(mp.fset, filepath.Join(path, name), nil, parser.ParseComments)
			if err != nil {
				return err
			}
			mp.files[name] = f
		}
		pkgs = append(pkgs, mp)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("only %d packages found under the module root: is the walk broken?", len(pkgs))
	}
	return pkgs
}

// pos is a position as a path from the module root, line and column.
func (mp modulePackage) pos(p token.Pos) string {
	position := mp.fset.Position(p)
	if rel, err := filepath.Rel("..", position.Filename); err == nil {
		position.Filename = filepath.ToSlash(rel)
	}
	return position.String()
}

// sortedFiles returns a package's non-test file names in order, so that
// failures come out the same on every run.
func (mp modulePackage) sortedFiles() []string {
	names := make([]string, 0, len(mp.files))
	for name := range mp.files {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// registeredToolNames collects the MCP tool names the gateway registers:
// the string literals of internal/tools that are a whole tool name.
func registeredToolNames(t *testing.T) map[string]bool {
	t.Helper()
	whole := regexp.MustCompile(`^(?:imap|smtp|agent)_[a-z][a-z_]*$`)
	names := map[string]bool{}
	for _, mp := range modulePackages(t) {
		if mp.rel != "internal/tools" {
			continue
		}
		for _, f := range mp.files {
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil && whole.MatchString(s) {
						names[s] = true
					}
				}
				return true
			})
		}
	}
	if len(names) < 5 {
		t.Fatalf("found only %d tool names in internal/tools (%v): has the way tools are named changed?", len(names), names)
	}
	return names
}

// Lower layers speak in facts, the top layer in advice: "folder X does not
// exist" belongs to mailbox, "call imap_list_folders" to tools. No MCP tool
// name appears in the strings or comments of a package outside
// internal/tools, internal/app, internal/demo, internal/config, cmd/ and
// tests/ (programs that drive the gateway from outside).
// (Go identifiers such as imap.Foo and other snake_case words, like
// Dovecot's imap_metadata setting, are not tool names and pass.)
func TestNoToolNamesBelowTools(t *testing.T) {
	names := registeredToolNames(t)
	// cmd/ and tests/ hold programs that drive the gateway from outside
	// (the CLI, the benchmark, the scale-out load generator): they call
	// tools by name like any client.
	allowed := []string{"internal/tools", "internal/app", "internal/demo", "internal/config", "cmd", "tests"}
	word := regexp.MustCompile(`\b(?:imap|smtp|agent)_[a-z][a-z_]*\b`)
	for _, mp := range modulePackages(t) {
		if slices.ContainsFunc(allowed, func(a string) bool { return mp.rel == a || strings.HasPrefix(mp.rel, a+"/") }) {
			continue
		}
		for _, name := range mp.sortedFiles() {
			f := mp.files[name]
			report := func(pos token.Pos, text string) {
				for _, m := range word.FindAllString(text, -1) {
					if names[m] {
						t.Errorf("%s: names the MCP tool %s: only internal/tools (and app, demo, config, cmd) know tool names; lower layers state facts, tools add the advice",
							mp.pos(pos), m)
					}
				}
			}
			for _, cg := range f.Comments {
				for _, c := range cg.List {
					report(c.Pos(), c.Text)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					report(lit.Pos(), lit.Value)
				}
				return true
			})
		}
	}
}

// internal/mailtest imports testing, so only _test.go files may import it;
// and no other package imports testing outside its tests: programs such as
// cmd/mailbox-bench use internal/mailstack and internal/mcpcall instead.
func TestTestingStaysInTests(t *testing.T) {
	const mailtest = module + "/internal/mailtest"
	found := false
	for _, mp := range modulePackages(t) {
		if mp.rel == "internal/mailtest" {
			found = true
			continue
		}
		for _, name := range mp.sortedFiles() {
			for _, imp := range mp.files[name].Imports {
				path, err := strconv.Unquote(imp.Path.Value)
				if err != nil {
					t.Fatal(err)
				}
				switch path {
				case mailtest:
					t.Errorf("%s: imports internal/mailtest: only _test.go files may (it imports testing); use internal/mailstack or internal/mcpcall",
						mp.pos(imp.Pos()))
				case "testing":
					t.Errorf("%s: imports testing in a non-test file: only internal/mailtest may",
						mp.pos(imp.Pos()))
				}
			}
		}
	}
	if !found {
		t.Fatal("internal/mailtest not found: the test proves nothing")
	}
}

// Every package, cmd/* included, says what it owns in exactly one package
// doc comment: a comment directly above the package clause of exactly one
// of its non-test files (go doc shows all of them, one after the other).
func TestOnePackageDocComment(t *testing.T) {
	for _, mp := range modulePackages(t) {
		var with []string
		for _, name := range mp.sortedFiles() {
			if mp.files[name].Doc != nil {
				with = append(with, filepath.Join(mp.rel, name))
			}
		}
		switch len(with) {
		case 1:
		case 0:
			t.Errorf("%s: no package doc comment in any of %s: every package has exactly one (a comment directly above `package %s` in one file)",
				mp.rel, strings.Join(mp.sortedFiles(), ", "), mp.pkg.Name)
		default:
			t.Errorf("%s: package doc comments in %d files (%s): every package has exactly one; keep the one that says what the package owns",
				mp.rel, len(with), strings.Join(with, ", "))
		}
	}
}
