// Package agents is many agents working inside one mailbox: each has a
// name and a folder of its own under one root (Agents/NAME), messages
// between them are APPENDed straight into the recipient's folder (no SMTP,
// any IMAP server), and they share a directory, conversations, status
// lines and a small key/value state kept in the mailbox itself (IMAP
// METADATA where the server has it). Nothing is stored on the gateway.
// It composes the mailbox package's operations; it never talks MCP.
package agents

import (
	"context"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// DefaultRoot is the folder the agents' folders live in (AGENTS_FOLDER).
const DefaultRoot = "Agents"

// MaxStateBytes is the largest value agent state holds for one key.
const MaxStateBytes = 64 << 10

// CheckName refuses what is not an agent name (credentials.ValidAgentName:
// lower-case letters, digits, '.', '_' and '-', 1 to 40 characters, no
// leading '.', which is reserved for the gateway's own folders), with a
// sentence saying what one is; what names the value (the header, the
// argument) is the caller's to add.
func CheckName(name string) error {
	if credentials.ValidAgentName(name) {
		return nil
	}
	return mailerr.New(mailerr.BadInput, credentials.AgentNameRule)
}

// dotInFolder stands for '.' in folder names: Dovecot's Maildir++ layout
// refuses '.' in a folder name whatever the delimiter, and where '.' is
// the delimiter it would make a subfolder. U+2024 ONE DOT LEADER looks
// the same in a mail app and maps back exactly.
const dotInFolder = '\u2024'

// Config is the agents' settings.
type Config struct {
	// Root is the folder holding every agent's folder (default Agents).
	Root string
}

// Service runs the agent operations over a mailbox client.
type Service struct {
	cfg Config
	mb  *mailbox.Client
	// folders are agent folders known to exist (per account), so that
	// a peek or a send does not ask the server again on every call;
	// touched are the agents whose last call was recorded (Touch).
	folders, touched *recent
}

// folderKnownFor is how long a folder seen to exist is taken to still
// exist: one deleted by hand in the meantime is created again after it.
const folderKnownFor = 10 * time.Minute

// New makes a Service.
func New(cfg Config, mb *mailbox.Client) *Service {
	if strings.TrimSpace(cfg.Root) == "" {
		cfg.Root = DefaultRoot
	}
	return &Service{cfg: cfg, mb: mb,
		folders: &recent{ttl: folderKnownFor, max: 10000},
		touched: &recent{ttl: touchEvery, max: 10000}}
}

// Root is the folder holding the agents' folders, as configured
// (AGENTS_FOLDER); RootIn is where it is on a server.
func (s *Service) Root() string { return s.cfg.Root }

// RootIn is the root folder on a server with namespace ns: inside the
// personal namespace ("INBOX.Agents" on Cyrus and Courier), unless the
// configured name is inside a namespace already.
func (s *Service) RootIn(ns mailbox.Namespace) string { return ns.Place(s.cfg.Root) }

// root is RootIn for creds' server.
func (s *Service) root(ctx context.Context, creds credentials.Credentials) (string, error) {
	ns, err := s.mb.Namespace(ctx, creds)
	if err != nil {
		return "", err
	}
	return s.RootIn(ns), nil
}

type folderKey struct{ account, folder string }

// FolderOf is the folder of agent name on a server with namespace ns. A
// flat server (no delimiter) gets "Root-name".
func (s *Service) FolderOf(ns mailbox.Namespace, name string) string {
	sep := "-"
	if ns.Delim != 0 {
		sep = string(ns.Delim)
	}
	return s.RootIn(ns) + sep + strings.ReplaceAll(name, ".", string(dotInFolder))
}

// NameOf is the agent whose folder is folder, if it is one.
func (s *Service) NameOf(ns mailbox.Namespace, folder string) (string, bool) {
	sep := "-"
	if ns.Delim != 0 {
		sep = string(ns.Delim)
	}
	rest, ok := strings.CutPrefix(folder, s.RootIn(ns)+sep)
	if !ok {
		return "", false
	}
	name := strings.ReplaceAll(rest, string(dotInFolder), ".")
	if CheckName(name) != nil {
		return "", false
	}
	return name, true
}

// Folder returns the folder of agent name for creds, creating it when it
// does not exist yet (created says so): mail for an agent waits for it
// even before it first comes.
func (s *Service) Folder(ctx context.Context, creds credentials.Credentials, name string) (folder string, created bool, err error) {
	if err := CheckName(name); err != nil {
		return "", false, err
	}
	ns, err := s.mb.Namespace(ctx, creds)
	if err != nil {
		return "", false, err
	}
	folder = s.FolderOf(ns, name)
	k := folderKey{creds.AccountKey(), folder}
	now := time.Now()
	if s.folders.fresh(k, now) {
		return folder, false, nil
	}
	if created, err = s.mb.EnsureFolder(ctx, creds, folder); err == nil {
		s.folders.mark(k, now)
	}
	return folder, created, err
}
