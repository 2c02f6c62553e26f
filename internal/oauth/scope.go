package oauth

import (
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
)

// The scopes mirror the access levels; mail.send adds sending.
const (
	scopeRead     = "mail.read"
	scopeOrganize = "mail.organize"
	scopeFull     = "mail.full"
	scopeSend     = "mail.send"
)

var scopesSupported = []string{scopeRead, scopeOrganize, scopeFull, scopeSend}

// parseScope turns a scope parameter into an access scope: the level is
// the highest of read/organize/full asked (read when only mail.send is),
// capped by the operator's level; sending only if mail.send is asked and
// possible. No scope at all asks for everything the operator allows (the
// sign-in page shows what is granted). Unknown scopes are refused.
func (s *Server) parseScope(param string) (access.Scope, bool) {
	fields := strings.Fields(param)
	if len(fields) == 0 {
		fields = scopesSupported
	}
	var level access.Level
	send := false
	for _, f := range fields {
		switch f {
		case scopeRead:
			level = max(level, access.Read)
		case scopeOrganize:
			level = max(level, access.Organize)
		case scopeFull:
			level = max(level, access.Full)
		case scopeSend:
			send = true
		default:
			return access.Scope{}, false
		}
	}
	if level == 0 {
		level = access.Read
	}
	if s.cfg.Operator != 0 && level > s.cfg.Operator {
		level = s.cfg.Operator
	}
	return access.Scope{Level: level, NoSend: !send || !s.anyCanSend()}, true
}

// scopeString is the granted scope as the token response names it.
func scopeString(sc access.Scope) string {
	var out []string
	for _, l := range access.Levels {
		if l <= sc.Level {
			out = append(out, map[access.Level]string{access.Read: scopeRead, access.Organize: scopeOrganize, access.Full: scopeFull}[l])
		}
	}
	if !sc.NoSend {
		out = append(out, scopeSend)
	}
	return strings.Join(out, " ")
}

// describe says in words what a scope lets the client do, for the page.
func describe(sc access.Scope) []string {
	out := []string{"read your messages and folders"}
	if sc.Level >= access.Organize {
		out = append(out, "flag, move and trash messages, manage folders and drafts")
	}
	if sc.Level >= access.Full {
		out = append(out, "delete messages and folders permanently")
	}
	if !sc.NoSend {
		out = append(out, "send mail as you")
	}
	return out
}

// narrower reports whether a is within b (for a refresh that narrows).
func narrower(a, b access.Scope) bool {
	return a.Level <= b.Level && (a.NoSend || !b.NoSend)
}
