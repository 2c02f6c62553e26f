// Package buildinfo holds the gateway's version, set at link time with
// -ldflags "-X github.com/mailbox-mcp/mailbox-mcp/internal/buildinfo.version=v1.2.3".
package buildinfo

import "runtime/debug"

var version = ""

// Version is the release version, or the module version / VCS revision the
// binary was built from, or "dev".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}
