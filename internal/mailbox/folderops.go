package mailbox

// Creating, renaming and deleting folders. Names are UTF-8 here; go-imap
// encodes them as modified UTF-7 on the wire unless the server accepts
// UTF-8. INBOX and the special folders (and any folder holding one) are
// never renamed or deleted: mail clients and this gateway find Sent,
// Drafts and Trash by them.

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// MaxFolderNameLen bounds a new folder name, in characters.
const MaxFolderNameLen = 200

// FolderChange is what a folder operation did.
type FolderChange struct {
	Folder    string `json:"folder" desc:"the folder's name (after a rename, its new name), as the server has it: inside the server's personal namespace (INBOX. on Cyrus and Courier)"`
	Display   string `json:"display_name,omitempty" desc:"the name without the server's personal prefix, where it has one"`
	From      string `json:"from,omitempty" desc:"rename: the folder's old name"`
	Delimiter string `json:"delimiter,omitempty" desc:"the server's hierarchy delimiter: a name with it is a folder inside another"`
	// Messages is how many messages were deleted with the folder.
	Messages *uint32 `json:"messages,omitempty" desc:"delete: how many messages the folder held, now deleted with it"`
}

// CreateFolder creates folder name (UTF-8; with the server's hierarchy
// delimiter, a folder inside another, whose missing parents the server
// makes) and subscribes to it so that mail clients show it. A folder that
// exists already is an error naming it, not a silent success: the caller
// may have meant another name.
func (c *Client) CreateFolder(ctx context.Context, creds credentials.Credentials, name string) (*FolderChange, error) {
	name = strings.TrimSpace(name)
	if err := checkNewName("name", name, 0); err != nil {
		return nil, err
	}
	var out *FolderChange
	err := c.do(ctx, creds, "creating the folder", false, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		srv, err := c.learn(conn)
		if err != nil {
			return err
		}
		ns := srv.Namespace
		delim := ns.Delim
		if err := checkNewName("name", name, delim); err != nil {
			return err
		}
		// At the top level means inside the personal namespace: Cyrus and
		// Courier refuse a folder beside INBOX.
		name = ns.Place(name)
		if strings.EqualFold(name, "INBOX") {
			return exists(name)
		}
		if d, err := listOne(cl, name); err != nil {
			return err
		} else if d != nil && selectable(d) {
			return exists(name)
		}
		if err := cl.Create(name, nil).Wait(); err != nil {
			return folderOpError(err, name, "create")
		}
		// A client that shows only subscribed folders would hide it.
		_ = cl.Subscribe(name).Wait()
		out = &FolderChange{Folder: name, Display: ns.Display(name), Delimiter: delimString(delim)}
		return nil
	})
	return out, err
}

// RenameFolder renames folder from to to (its subfolders go along). INBOX
// and special folders, and folders holding one, are refused; so is a new
// name that exists.
func (c *Client) RenameFolder(ctx context.Context, creds credentials.Credentials, from, to string) (*FolderChange, error) {
	from, to = strings.TrimSpace(from), strings.TrimSpace(to)
	if from == "" {
		return nil, mailerr.New(mailerr.BadInput, "folder must name the folder to rename")
	}
	if err := checkNewName("new_name", to, 0); err != nil {
		return nil, err
	}
	if to == from {
		return nil, mailerr.Newf(mailerr.BadInput, "the folder is already called %s; nothing was changed", quote(from))
	}
	var out *FolderChange
	err := c.do(ctx, creds, "renaming the folder", false, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		srv, err := c.learn(conn)
		if err != nil {
			return err
		}
		ns := srv.Namespace
		all, err := listAll(cl)
		if err != nil {
			return err
		}
		delim := delimOf(all)
		if err := checkNewName("new_name", to, delim); err != nil {
			return err
		}
		from, to = ns.Place(from), ns.Place(to)
		if to == from {
			return mailerr.Newf(mailerr.BadInput, "the folder is already called %s; nothing was changed", quote(from))
		}
		if err := c.changeable(cl, all, from, delim, "renamed"); err != nil {
			return err
		}
		if strings.EqualFold(to, "INBOX") || find(all, to) != nil {
			return exists(to)
		}
		if delim != 0 && strings.HasPrefix(to, from+string(delim)) {
			return mailerr.Newf(mailerr.BadInput, "folder %s cannot be moved inside itself (%s); nothing was changed", quote(from), quote(to))
		}
		// Subscriptions follow the names (RFC 3501 leaves them behind, and
		// so does Dovecot): the folder's and those of the folders inside.
		subs, err := subscribedWithin(cl, from, delim)
		if err != nil {
			return err
		}
		if err := conn.leave(from, delim); err != nil {
			return err
		}
		if err := cl.Rename(from, to, nil).Wait(); err != nil {
			return folderOpError(err, from, "rename")
		}
		for _, old := range subs {
			_ = cl.Subscribe(to + strings.TrimPrefix(old, from)).Wait()
			_ = cl.Unsubscribe(old).Wait()
		}
		out = &FolderChange{Folder: to, Display: ns.Display(to), From: from, Delimiter: delimString(delim)}
		return nil
	})
	return out, err
}

// DeleteFolder deletes folder name and every message in it. INBOX and
// special folders, and folders holding one, are refused; a folder with
// subfolders is refused by most servers (Dovecot among them).
//
// With want (the facts a person approved, FolderFacts), the folder is
// deleted only while it still has them: the same folder (UIDVALIDITY),
// with the same messages (their count, and its HIGHESTMODSEQ or UIDNEXT).
func (c *Client) DeleteFolder(ctx context.Context, creds credentials.Credentials, name string, want *Facts) (*FolderChange, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, mailerr.New(mailerr.BadInput, "folder must name the folder to delete")
	}
	var out *FolderChange
	err := c.do(ctx, creds, "deleting the folder", false, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		srv, err := c.learn(conn)
		if err != nil {
			return err
		}
		name = srv.Namespace.Place(name)
		all, err := listAll(cl)
		if err != nil {
			return err
		}
		delim := delimOf(all)
		if err := c.changeable(cl, all, name, delim, "deleted"); err != nil {
			return err
		}
		// Refused here, whatever the server would do: some delete the
		// folders inside too.
		if inside := within(all, name, delim); len(inside) > 0 {
			return mailerr.Newf(mailerr.BadInput, "folder %s has folders inside it (%s); delete those first; nothing was changed", quote(name), strings.Join(quoteAll(inside), ", "))
		}
		if err := conn.leave(name, delim); err != nil {
			return err
		}
		if err := checkFolder(conn, name, want); err != nil {
			return err
		}
		var count *uint32
		if d := find(all, name); selectable(d) {
			if sd, err := cl.Status(name, &imap.StatusOptions{NumMessages: true}).Wait(); err == nil {
				count = sd.NumMessages
			}
		}
		if err := cl.Delete(name).Wait(); err != nil {
			return folderOpError(err, name, "delete")
		}
		_ = cl.Unsubscribe(name).Wait()
		out = &FolderChange{Folder: name, Display: srv.Namespace.Display(name), Delimiter: delimString(delim), Messages: count}
		return nil
	})
	return out, err
}

// changeable refuses renaming or deleting name (done says which, "renamed"
// or "deleted") when it does not exist, is INBOX, or is or holds a special
// folder: one with a special-use attribute, one configured, or on a server
// without SPECIAL-USE one found by its usual name.
func (c *Client) changeable(cl *imapclient.Client, all []*imap.ListData, name string, delim rune, done string) error {
	if strings.EqualFold(name, "INBOX") {
		return mailerr.Newf(mailerr.BadInput, "INBOX cannot be %s; nothing was changed", done)
	}
	if find(all, name) == nil {
		return mailerr.Newf(mailerr.NotFound, "folder %s does not exist; nothing was changed", quote(name)).About(mailerr.SubjectFolder)
	}
	holds := func(f string) bool {
		return delim != 0 && strings.HasPrefix(f, name+string(delim))
	}
	special := map[string]string{} // folder -> why it is special
	for _, d := range all {
		if r := roleOf(d); r != "" && r != "inbox" {
			special[d.Mailbox] = "the " + roleName(r) + " folder"
		} else if strings.EqualFold(d.Mailbox, "INBOX") {
			special[d.Mailbox] = "INBOX"
		}
	}
	for _, cf := range []struct{ name, what string }{{c.cfg.TrashFolder, "TRASH_FOLDER"}, {c.cfg.DraftsFolder, "DRAFTS_FOLDER"}} {
		if cf.name != "" {
			special[normFolder(cf.name)] = "the folder configured as " + cf.what
		}
	}
	if !cl.Caps().Has(imap.CapSpecialUse) {
		for _, s := range []struct {
			names []string
			role  string
		}{{sentNames, "sent"}, {draftsNames, "drafts"}, {trashNames, "trash"}} {
			if f := pickSpecial(all, "", s.names); f != "" {
				special[f] = "the " + roleName(s.role) + " folder"
			}
		}
	}
	for f, why := range special {
		switch {
		case f == name:
			return mailerr.Newf(mailerr.BadInput, "folder %s is %s; special folders cannot be %s; nothing was changed", quote(name), why, done)
		case holds(f):
			return mailerr.Newf(mailerr.BadInput, "folder %s holds %s (%s); a folder holding a special folder cannot be %s; nothing was changed", quote(name), why, quote(f), done)
		}
	}
	return nil
}

func roleName(role string) string {
	switch role {
	case "all":
		return "All Mail"
	case "junk":
		return "Junk"
	}
	return strings.ToUpper(role[:1]) + role[1:]
}

// leave closes name (or a folder inside it) if conn has it selected:
// Dovecot drops a connection whose selected mailbox is deleted. UNSELECT,
// never CLOSE, which would expunge the folder's \Deleted messages.
func (conn *Conn) leave(name string, delim rune) error {
	sel := conn.selected
	if sel == "" || sel != name && !(delim != 0 && strings.HasPrefix(sel, name+string(delim))) {
		return nil
	}
	cl := conn.client()
	conn.selected = ""
	if cl.State() != imap.ConnStateSelected {
		return nil
	}
	if cl.Caps().Has(imap.CapUnselect) {
		if err := cl.Unselect().Wait(); err != nil {
			return imapError(err, "")
		}
		return nil
	}
	_, err := conn.sel("INBOX", true)
	return err
}

// checkNewName refuses a name a new folder cannot have; arg names the
// argument. With delim 0 (not known yet) the delimiter is not checked.
func checkNewName(arg, name string, delim rune) error {
	switch n := utf8.RuneCountInString(name); {
	case name == "":
		return mailerr.Newf(mailerr.BadInput, "%s must not be empty", arg)
	case !utf8.ValidString(name):
		return mailerr.Newf(mailerr.BadInput, "%s must be valid UTF-8", arg)
	case n > MaxFolderNameLen:
		return mailerr.Newf(mailerr.BadInput, "%s must be at most %d characters long (got %d)", arg, MaxFolderNameLen, n)
	}
	for _, r := range name {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return mailerr.Newf(mailerr.BadInput, "%s %q contains a control character, which a folder name cannot have", arg, name)
		}
	}
	if i := strings.IndexAny(name, "*%"); i >= 0 {
		return mailerr.Newf(mailerr.BadInput, "%s %q contains %q, which IMAP uses as a wildcard in folder names", arg, name, name[i])
	}
	if delim == 0 {
		return nil
	}
	d := string(delim)
	switch {
	case strings.HasPrefix(name, d) || strings.HasSuffix(name, d):
		return mailerr.Newf(mailerr.BadInput, "%s %q starts or ends with %q, the server's hierarchy delimiter (it separates a folder from the folders inside it)", arg, name, d)
	case strings.Contains(name, d+d):
		return mailerr.Newf(mailerr.BadInput, "%s %q has an empty level (%q twice in a row; %q is the server's hierarchy delimiter)", arg, name, d+d, d)
	}
	return nil
}

// within lists the folders inside name (at most 5 of them).
func within(all []*imap.ListData, name string, delim rune) []string {
	if delim == 0 {
		return nil
	}
	var out []string
	for _, d := range all {
		if strings.HasPrefix(d.Mailbox, name+string(delim)) && len(out) < 5 {
			out = append(out, d.Mailbox)
		}
	}
	return out
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = quote(n)
	}
	return out
}

// subscribedWithin lists the subscribed folders among name and the
// folders inside it.
func subscribedWithin(cl *imapclient.Client, name string, delim rune) ([]string, error) {
	data, err := cl.List("", "*", &imap.ListOptions{SelectSubscribed: true}).Collect()
	if err != nil {
		return nil, imapError(err, "")
	}
	var out []string
	for _, d := range data {
		if d.Mailbox == name || delim != 0 && strings.HasPrefix(d.Mailbox, name+string(delim)) {
			out = append(out, d.Mailbox)
		}
	}
	return out, nil
}

// delimiter asks the server for its hierarchy delimiter (0: flat).
func delimiter(cl *imapclient.Client) (rune, error) {
	data, err := cl.List("", "", nil).Collect()
	if err != nil {
		return 0, imapError(err, "")
	}
	for _, d := range data {
		return d.Delim, nil
	}
	return 0, nil
}

// listOne returns the LIST answer for exactly name (which has no
// wildcards), nil when there is none.
func listOne(cl *imapclient.Client, name string) (*imap.ListData, error) {
	data, err := cl.List("", name, nil).Collect()
	if err != nil {
		return nil, imapError(err, "")
	}
	return find(data, name), nil
}

// listAll lists every folder, with special-use attributes when the server
// has them.
func listAll(cl *imapclient.Client) ([]*imap.ListData, error) {
	opts := &imap.ListOptions{}
	if cl.Caps().Has(imap.CapSpecialUse) {
		opts.ReturnSpecialUse = true
	}
	data, err := cl.List("", "*", opts).Collect()
	if err != nil {
		return nil, imapError(err, "")
	}
	return data, nil
}

func find(data []*imap.ListData, name string) *imap.ListData {
	for _, d := range data {
		if d.Mailbox == name || strings.EqualFold(name, "INBOX") && strings.EqualFold(d.Mailbox, "INBOX") {
			return d
		}
	}
	return nil
}

func delimOf(data []*imap.ListData) rune {
	for _, d := range data {
		if d.Delim != 0 {
			return d.Delim
		}
	}
	return 0
}

func delimString(d rune) string {
	if d == 0 {
		return ""
	}
	return string(d)
}

// dovecotTiming is the timing Dovecot appends to its answers: "(0.001 +
// 0.000 secs)."
var dovecotTiming = regexp.MustCompile(`\s*\(\d+\.\d+ \+ \d+\.\d+(?: \+ \d+\.\d+)? secs\)\.?$`)

func exists(name string) error {
	return mailerr.Newf(mailerr.BadInput, "folder %s already exists; nothing was changed", quote(name))
}

// folderOpError classifies a failed CREATE, RENAME or DELETE of name. The
// server's own words are passed on for a plain NO: they say what it
// disliked about a name ("must not have '.' character").
func folderOpError(err error, name, op string) error {
	var ie *imap.Error
	if !asIMAP(err, &ie) {
		return imapError(err, name)
	}
	switch ie.Code {
	case imap.ResponseCodeAlreadyExists:
		return exists(name)
	case imap.ResponseCodeNonExistent:
		return mailerr.Wrap(mailerr.NotFound, err, "folder "+quote(name)+" does not exist; nothing was changed").About(mailerr.SubjectFolder)
	case imap.ResponseCodeHasChildren:
		return mailerr.Wrap(mailerr.BadInput, err, "folder "+quote(name)+" has folders inside it; delete those first; nothing was changed")
	case imap.ResponseCodeUnavailable, imap.ResponseCodeInUse, imap.ResponseCodeLimit, imap.ResponseCodeOverQuota, imap.ResponseCodeNoPerm:
		return imapError(err, "")
	}
	said := serverSaid(ie)
	msg := fmt.Sprintf("the mail server refused to %s folder %s", op, quote(name))
	if said != "" {
		msg += " (it said: " + said + ")"
	}
	return mailerr.Wrap(mailerr.Permanent, err, msg+"; nothing was changed")
}
