package mailbox

// What the mail server differs in, learned once per server and kept in one
// place that the operations consult (a gateway talks to one server, and
// its namespace, delimiter and capabilities are the same for every user):
//
//   - the personal namespace (NAMESPACE, RFC 2342): Cyrus and Courier keep
//     every folder under "INBOX." and refuse a top-level CREATE, Dovecot
//     and the demo have no prefix. Every folder the gateway creates, and
//     every folder a caller names, goes under the prefix (Place);
//   - the hierarchy delimiter;
//   - the capabilities after login;
//   - METADATA entries the server refuses: Cyrus refuses every
//     /private/vendor/… entry (NO Permission denied) while it offers
//     METADATA; asked once with a change that changes nothing, and the
//     store falls back to messages for that server from then on;
//   - IDLE that does not push: Cyrus without idled and Courier with its
//     defaults report new mail only on their own poll (60 s); a wait that
//     finds mail on its re-check that IDLE did not announce records it;
//   - special-use attributes: where the server has none (Courier), roles
//     come from the usual names (Sent, Drafts, Trash, …);
//   - commands sent behind a LOGIN: Courier drops them, Dovecot and Cyrus
//     keep them; known from the server's greeting or ID, else from a probe
//     on its first connections, and until then nothing goes there
//     (pipelining.go).
//
// Two more differences are not learned but avoided on every server, since
// avoiding them costs nothing: APPEND to a folder the same connection has
// selected read-only (Courier: NO Current box is selected READ-ONLY) never
// happens (Conn.append); and STATUS of the folder the connection has
// selected is either not asked (listFolders leaves it first) or follows a
// NOOP (ListEmails): Courier answers it from the session's view, stale
// until a command brings it up to date.

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// Server is what the gateway knows about the mail server.
type Server struct {
	// Namespace is where the user's folders live.
	Namespace Namespace
	// caps are the capabilities after login.
	caps imap.CapSet
	// vendorMetadataRefused: the server refuses /private/vendor/ METADATA
	// entries although it offers METADATA.
	vendorMetadataRefused atomic.Bool
	// lazyIdle: a wait's re-check found mail its IDLE had not announced.
	lazyIdle atomic.Bool
	// flagsMode is a flagsInStore: what FLAGS in the answer to a .SILENT
	// STORE mean (consume.go): from the server's ID, or learned from a
	// claim's answer.
	flagsMode atomic.Int32
	// afterLogin: whether the server keeps commands sent behind a LOGIN
	// (pipelining.go); nil until known, and nothing goes there meanwhile.
	afterLogin atomic.Pointer[afterLogin]
}

// Namespace is the user's personal namespace: its prefix ("" or "INBOX."),
// its delimiter (0 for a flat server), and the prefixes of the others
// (other users', shared), whose names are never moved under the prefix.
type Namespace struct {
	Prefix string
	Delim  rune
	Others []string
}

// Has says whether the server has capability c after login.
func (s *Server) Has(c imap.Cap) bool { return s.caps.Has(c) }

// HasSpecialUse says whether the server marks special folders (RFC 6154).
func (s *Server) HasSpecialUse() bool { return s.Has(imap.CapSpecialUse) }

// LazyIdle says whether the server's IDLE was seen not to announce new
// mail that a re-check found.
func (s *Server) LazyIdle() bool { return s.lazyIdle.Load() }

// Place is name as a folder of this server: "" and INBOX in any case are
// INBOX; a name inside the personal namespace, or inside another
// namespace, stays as it is; any other name goes under the personal
// prefix ("Agents" -> "INBOX.Agents" on Cyrus and Courier).
func (n Namespace) Place(name string) string {
	name = strings.TrimSpace(name)
	switch {
	case name == "" || strings.EqualFold(name, "INBOX"):
		return "INBOX"
	case n.Prefix == "":
		return name
	case n.inside(name):
		return name
	}
	return n.Prefix + name
}

// inside says whether name is already inside the personal namespace or
// another one.
func (n Namespace) inside(name string) bool {
	if hasPrefixFold(name, n.Prefix) {
		return true
	}
	for _, p := range n.Others {
		if p != "" && strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// hasPrefixFold is strings.HasPrefix, with an INBOX at the start of prefix
// matched in any case (RFC 3501: INBOX is case-insensitive).
func hasPrefixFold(name, prefix string) bool {
	if len(name) < len(prefix) {
		return false
	}
	if len(prefix) >= 5 && strings.EqualFold(prefix[:5], "INBOX") {
		return strings.EqualFold(name[:5], "INBOX") && name[5:len(prefix)] == prefix[5:]
	}
	return strings.HasPrefix(name, prefix)
}

// Display is name without the personal prefix ("INBOX.Agents.beta" ->
// "Agents.beta"), or "" when that is name itself.
func (n Namespace) Display(name string) string {
	if n.Prefix == "" || strings.EqualFold(name, "INBOX") || !hasPrefixFold(name, n.Prefix) || len(name) == len(n.Prefix) {
		return ""
	}
	return name[len(n.Prefix):]
}

// Leaf is the last level of name.
func (n Namespace) Leaf(name string) string {
	if n.Delim != 0 {
		if i := strings.LastIndex(name, string(n.Delim)); i >= 0 {
			return name[i+len(string(n.Delim)):]
		}
	}
	return name
}

// roleByName is the role of a folder on a server without special-use
// attributes, from its usual name: directly inside the personal namespace
// (or at the top level), any case.
func (n Namespace) roleByName(name string) string {
	rest := name
	if d := n.Display(name); d != "" {
		rest = d
	}
	if n.Delim != 0 && strings.ContainsRune(rest, n.Delim) {
		return ""
	}
	for _, r := range wellKnownRoles {
		for _, want := range r.names {
			if strings.EqualFold(rest, want) {
				return r.role
			}
		}
	}
	return ""
}

// wellKnownRoles are the names that mean a role where the server marks no
// special folders, most usual first.
var wellKnownRoles = []struct {
	role  string
	names []string
}{
	{"sent", []string{"Sent", "Sent Items", "Sent Messages", "Sent Mail"}},
	{"drafts", []string{"Drafts", "Draft"}},
	{"trash", []string{"Trash", "Deleted Items", "Deleted Messages", "Bin"}},
	{"junk", []string{"Junk", "Spam", "Junk E-mail", "Junk Mail", "Bulk Mail"}},
	{"archive", []string{"Archive", "Archives"}},
}

// Server returns what the gateway knows about the mail server, learning it
// with this user's login the first time (NAMESPACE, the delimiter, the
// capabilities, and whether vendor METADATA entries are refused).
func (c *Client) Server(ctx context.Context, creds credentials.Credentials) (*Server, error) {
	if cfg, err := c.hostConfig(creds); err == nil {
		if s := cfg.state.server(); s != nil {
			return s, nil
		}
	}
	var s *Server
	err := c.do(ctx, creds, "asking the server's namespace", true, func(ctx context.Context, conn *Conn) error {
		var err error
		s, err = c.learn(conn)
		return err
	})
	return s, err
}

// Namespace is the personal namespace of the server (see Server).
func (c *Client) Namespace(ctx context.Context, creds credentials.Credentials) (Namespace, error) {
	s, err := c.Server(ctx, creds)
	if err != nil {
		return Namespace{}, err
	}
	return s.Namespace, nil
}

// Place is name as a folder of this server (Namespace.Place).
func (c *Client) Place(ctx context.Context, creds credentials.Credentials, name string) (string, error) {
	ns, err := c.Namespace(ctx, creds)
	if err != nil {
		return "", err
	}
	return ns.Place(name), nil
}

// folderArg is a folder a caller named, as this server has it (Place).
func (c *Client) folderArg(ctx context.Context, creds credentials.Credentials, name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || strings.EqualFold(name, "INBOX") {
		return "INBOX", nil
	}
	return c.Place(ctx, creds, name)
}

// learn learns the server on conn, once per host.
func (c *Client) learn(conn *Conn) (*Server, error) {
	if s := conn.host.server(); s != nil {
		return s, nil
	}
	cl := conn.client()
	s := &Server{caps: imap.CapSet{}}
	for k, v := range cl.Caps() {
		s.caps[k] = v
	}
	// NAMESPACE and ID go in one flight.
	var nsCmd *imapclient.NamespaceCommand
	var idCmd *imapclient.IDCommand
	if s.Has(imap.CapNamespace) || s.Has(imap.CapIMAP4rev2) {
		nsCmd = cl.Namespace()
	}
	if s.Has(imap.CapID) {
		idCmd = cl.ID(&imap.IDData{Name: "mailbox-mcp"})
	}
	if nsCmd != nil {
		ns, err := nsCmd.Wait()
		if err != nil && !asIMAP(err, new(*imap.Error)) {
			return nil, imapError(err, "")
		}
		if err == nil {
			if len(ns.Personal) > 0 {
				s.Namespace.Prefix, s.Namespace.Delim = ns.Personal[0].Prefix, ns.Personal[0].Delim
			}
			for _, d := range append(append([]imap.NamespaceDescriptor{}, ns.Other...), ns.Shared...) {
				if d.Prefix != "" {
					s.Namespace.Others = append(s.Namespace.Others, d.Prefix)
				}
			}
		}
	}
	// Who the server is says what it does with commands behind a LOGIN
	// (pipelining.go): its greeting, else its ID, else (below) what this
	// connection's probe found.
	s.noteAfterLogin(afterLoginOf(conn.greet.greeting(), "greeting"))
	if idCmd != nil {
		// Its name says what FLAGS in a STORE's answer mean (consume.go).
		if id, err := idCmd.Wait(); err == nil && id != nil {
			s.flagsMode.Store(int32(storeFlagsOf(id.Name)))
			s.noteAfterLogin(afterLoginOf(id.Name, "ID"))
		} else if err != nil && !asIMAP(err, new(*imap.Error)) {
			return nil, imapError(err, "")
		}
	}
	if s.Namespace.Delim == 0 {
		d, err := delimiter(cl)
		if err != nil {
			return nil, err
		}
		s.Namespace.Delim = d
	}
	if s.Has(imap.CapMetadata) || s.Has(imap.CapMetadataServer) {
		// Removing an entry that does not exist changes nothing; Cyrus
		// answers NO Permission denied for any /private/vendor/ entry.
		err := cl.SetMetadata("INBOX", map[string]*[]byte{probeEntry: nil}).Wait()
		var ie *imap.Error
		if errors.As(err, &ie) && ie.Type == imap.StatusResponseTypeNo {
			s.vendorMetadataRefused.Store(true)
			c.log.Info("the mail server refuses METADATA entries under /private/vendor/; agent state and status use messages in the state folder instead", "said", ie.Text)
		} else if err != nil && !errors.As(err, &ie) {
			return nil, imapError(err, "")
		}
	}
	// The commands above were answered after the probe's NOOP.
	s.noteAfterLogin(conn.afterLoginOn())
	if conn.host == nil { // a connection of its own, made without a host (tests)
		return s, nil
	}
	if conn.host.srv.CompareAndSwap(nil, s) {
		c.logAfterLogin(s)
	}
	return conn.host.srv.Load(), nil
}

// probeEntry is the METADATA entry learn removes to see whether vendor
// entries are allowed.
const probeEntry = "/private/vendor/mailbox-mcp/probe"

// metadataUsable says whether METADATA can hold this gateway's entries on
// the server conn talks to.
func (c *Client) metadataUsable(conn *Conn) (bool, error) {
	s, err := c.learn(conn)
	if err != nil {
		return false, err
	}
	return (s.Has(imap.CapMetadata) || s.Has(imap.CapMetadataServer)) && !s.vendorMetadataRefused.Load(), nil
}

// noteLazyIdle records that the server's IDLE missed new mail.
func (c *Client) noteLazyIdle(conn *Conn) {
	if s := conn.host.server(); s != nil && !s.lazyIdle.Swap(true) {
		c.log.Info("the mail server's IDLE did not announce new mail that a re-check found; waits on it wake by their re-check (WAIT_RECHECK)")
	}
}
