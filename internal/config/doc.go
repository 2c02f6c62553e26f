package config

import (
	"fmt"
	"strings"
)

// EnvExample renders .env.example from the Config struct, so the file and
// the code cannot drift (a test compares them).
func EnvExample() string {
	var b strings.Builder
	b.WriteString("# mailbox-mcp configuration. Copy to .env and edit; every variable is listed\n")
	b.WriteString("# with its default. Generated from internal/config: go test ./internal/config -update\n")
	for _, v := range Variables() {
		fmt.Fprintf(&b, "\n# %s\n", v.Description)
		switch {
		case v.Required:
			fmt.Fprintf(&b, "%s=\n", v.Key)
		case v.Default == "":
			fmt.Fprintf(&b, "# %s=\n", v.Key)
		default:
			fmt.Fprintf(&b, "%s=%s\n", v.Key, v.Default)
		}
	}
	return b.String()
}

// MarkdownTable renders the variables as the table in docs/configuration.md.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| Variable | Default | Meaning |\n|---|---|---|\n")
	for _, v := range Variables() {
		def := "`" + v.Default + "`"
		switch {
		case v.Required:
			def = "**required**"
		case v.Default == "":
			def = "(unset)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Key, def, strings.ReplaceAll(v.Description, "|", "\\|"))
	}
	return b.String()
}
