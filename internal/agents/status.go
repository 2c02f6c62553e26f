package agents

// Status lines and last calls. With IMAP METADATA they are entries on the
// agent's folder: /private/comment (RFC 5464's comment on a mailbox, which
// some mail apps show) and /private/vendor/mailbox-mcp/last-seen. Without
// it they are keys of the state store that agents cannot set themselves
// (".status/NAME", ".seen/NAME": a key starting with '.' is refused by
// CheckKey).

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Meta is what the directory shows about an agent besides its mail.
type Meta struct {
	Status   string    // the agent's status line, "" when none
	LastSeen time.Time // the agent's last call, zero when unknown
}

// MaxStatusLen is the longest status line, in characters.
const MaxStatusLen = 200

// touchEvery is how often Touch records an agent's call, at most.
const touchEvery = time.Minute

const (
	commentEntry  = "/private/comment"
	lastSeenEntry = "/private/vendor/mailbox-mcp/last-seen"
	statusKey     = ".status/"
	seenKey       = ".seen/"
)

// CheckStatus refuses a status line that is too long or holds control,
// invisible or bidi characters; it returns the line trimmed.
func CheckStatus(text string) (string, error) {
	text = strings.TrimSpace(text)
	if !utf8.ValidString(text) || strings.IndexFunc(text, invisible) >= 0 {
		return "", mailerr.New(mailerr.BadInput, "status must be one line of text without control, invisible or bidi characters")
	}
	if n := utf8.RuneCountInString(text); n > MaxStatusLen {
		return "", mailerr.Newf(mailerr.BadInput, "status is %d characters; at most %d are allowed", n, MaxStatusLen)
	}
	return text, nil
}

// invisible is a control or format character (bidi overrides, zero-width
// characters): a status line is shown to other agents and in mail apps.
func invisible(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// SetStatus sets agent's status line ("" clears it).
func (s *Service) SetStatus(ctx context.Context, creds credentials.Credentials, agent, text string) error {
	text, err := CheckStatus(text)
	if err != nil {
		return err
	}
	folder, _, err := s.Folder(ctx, creds, agent)
	if err != nil {
		return err
	}
	var value *[]byte
	if text != "" {
		b := []byte(text)
		value = &b
	}
	err = s.mb.SetMetadata(ctx, creds, folder, map[string]*[]byte{commentEntry: value})
	if !errors.Is(err, mailbox.ErrNoMetadata) {
		return err
	}
	v, _ := json.Marshal(text)
	return s.putState(ctx, creds, &StateEntry{Key: statusKey + agent, Value: v, UpdatedAt: time.Now().UTC().Truncate(time.Second), By: agent})
}

type touchKey struct{ account, agent string }

// Touch records that agent made a call now. It writes at most once a
// minute per account and agent in this process, and ignores errors: it
// only feeds the directory's "last activity".
func (s *Service) Touch(ctx context.Context, creds credentials.Credentials, agent string) {
	if CheckName(agent) != nil {
		return
	}
	now := time.Now().UTC()
	k := touchKey{creds.AccountKey(), agent}
	if s.touched.fresh(k, now) {
		return
	}
	stamp := []byte(now.Format(time.RFC3339))
	folder, _, err := s.Folder(ctx, creds, agent)
	if err != nil {
		return
	}
	s.touched.mark(k, now)
	err = s.mb.SetMetadata(ctx, creds, folder, map[string]*[]byte{lastSeenEntry: &stamp})
	if errors.Is(err, mailbox.ErrNoMetadata) {
		v, _ := json.Marshal(string(stamp))
		_ = s.putState(ctx, creds, &StateEntry{Key: seenKey + agent, Value: v, UpdatedAt: now.Truncate(time.Second), By: agent})
	}
}

// Statuses returns the status line and last call of every agent that has
// either.
func (s *Service) Statuses(ctx context.Context, creds credentials.Credentials) (map[string]Meta, error) {
	out := map[string]Meta{}
	root, err := s.root(ctx, creds)
	if err != nil {
		return nil, err
	}
	byFolder, err := s.mb.ChildMetadata(ctx, creds, root, []string{commentEntry, lastSeenEntry})
	switch {
	case errors.Is(err, mailbox.ErrNoMetadata):
		return s.statusesFromState(ctx, creds)
	case err != nil:
		return nil, err
	}
	ns, err := s.mb.Namespace(ctx, creds)
	if err != nil {
		return nil, err
	}
	for folder, entries := range byFolder {
		name, ok := s.NameOf(ns, folder)
		if !ok {
			continue
		}
		var m Meta
		if v, ok := lookup(entries, commentEntry); ok {
			m.Status = string(v)
		}
		if v, ok := lookup(entries, lastSeenEntry); ok {
			m.LastSeen, _ = time.Parse(time.RFC3339, string(v))
		}
		if m != (Meta{}) {
			out[name] = m
		}
	}
	return out, nil
}

// statusesFromState reads the reserved keys of the message store.
func (s *Service) statusesFromState(ctx context.Context, creds credentials.Credentials) (map[string]Meta, error) {
	out := map[string]Meta{}
	entries, err := s.readKeyed(ctx, creds, ".", true)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		var text string
		if json.Unmarshal(e.Value, &text) != nil {
			continue
		}
		if name, ok := strings.CutPrefix(e.Key, statusKey); ok && CheckName(name) == nil && text != "" {
			m := out[name]
			m.Status = text
			out[name] = m
		} else if name, ok := strings.CutPrefix(e.Key, seenKey); ok && CheckName(name) == nil {
			m := out[name]
			m.LastSeen, _ = time.Parse(time.RFC3339, text)
			out[name] = m
		}
	}
	for name, m := range out {
		if m == (Meta{}) {
			delete(out, name)
		}
	}
	return out, nil
}
