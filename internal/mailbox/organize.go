package mailbox

// Organizing messages: flags and keywords, moving, the trash and permanent
// deletion. Each operation first checks that every UID is in the folder and
// changes nothing when one is not. Removing messages from a folder is
// always UID EXPUNGE of exactly the caller's UIDs (UIDPLUS), never a bare
// EXPUNGE: that would also remove every other message marked \Deleted, by
// another client for instance, and go-imap's own MOVE fallback sends one
// when the server lacks UIDPLUS (NOTES.md).

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// MaxUIDs is the most messages one organize call changes.
const MaxUIDs = 500

// maxKeywordLen bounds a keyword; servers allow more, people need less.
const maxKeywordLen = 64

// MessageFlags is one message's flags after a change.
type MessageFlags struct {
	UID   uint32 `json:"uid"`
	Flags Flags  `json:"flags"`
}

// FlagsResult is what SetFlags left.
type FlagsResult struct {
	Folder   string         `json:"folder" desc:"the folder of the messages"`
	Messages []MessageFlags `json:"messages" desc:"each message's flags after the change, in UID order"`
}

// MovedUID is one moved message.
type MovedUID struct {
	UID    uint32 `json:"uid" desc:"the message's UID in the folder it was in (no longer there)"`
	NewUID uint32 `json:"new_uid,omitempty" desc:"its UID in the folder it went to, when the server says (COPYUID)"`
}

// Moved says where Move put the messages.
type Moved struct {
	Folder   string     `json:"folder" desc:"the folder the messages were in"`
	ToFolder string     `json:"to_folder" desc:"the folder they are in now"`
	Messages []MovedUID `json:"messages" desc:"the moved messages, in UID order"`
}

// Trashed says what Trash did.
type Trashed struct {
	Folder    string `json:"folder" desc:"the folder the messages were in"`
	Permanent bool   `json:"permanent" desc:"true: deleted for good; false: moved to the Trash folder"`
	// TrashFolder is where they went; "" after a permanent deletion.
	TrashFolder string     `json:"trash_folder,omitempty" desc:"the Trash folder they were moved to"`
	Messages    []MovedUID `json:"messages" desc:"the messages, in UID order (new_uid: their UID in the Trash folder)"`
}

// SetFlags adds and removes flags on messages uids (at most MaxUIDs) of
// folder and returns every message's flags afterwards. A flag is seen,
// flagged or answered (any case, with or without the backslash), or a
// keyword (CheckKeyword). If a UID is not in the folder, nothing changes.
func (c *Client) SetFlags(ctx context.Context, creds credentials.Credentials, folder string, uids []uint32, add, remove []string) (*FlagsResult, error) {
	folder, err := c.folderArg(ctx, creds, folder)
	if err != nil {
		return nil, err
	}
	set, err := checkUIDs(uids)
	if err != nil {
		return nil, err
	}
	addFlags, removeFlags, err := parseFlagChange(add, remove)
	if err != nil {
		return nil, err
	}
	var out *FlagsResult
	// The flags of the messages go with the SELECT (or the NOOP on a
	// connection that has the folder open): they say which messages are
	// there, and what a STORE that changes nothing leaves.
	pres := &presence{set: set}
	open := &opening{folder: folder, rw: true, fresh: true, send: func(conn *Conn, _ imap.CapSet) { pres.send(conn.client()) }}
	err = c.doOpen(ctx, creds, open, "changing flags", false, func(ctx context.Context, conn *Conn) error {
		perm, err := conn.openRW(folder)
		before, perr := pres.read(conn, folder)
		if err != nil {
			return err
		}
		if perr != nil {
			return perr
		}
		if kw := newKeyword(perm, addFlags); kw != "" {
			return mailerr.Newf(mailerr.Permanent, "folder %s does not accept new keywords such as %q (its PERMANENTFLAGS lack \\*); nothing was changed", quote(folder), kw)
		}
		if err := missingError(folder, set, before); err != nil {
			return err
		}
		cl := conn.client()
		uidSet := imap.UIDSetNum(set...)
		after := make(map[imap.UID][]imap.Flag, len(set))
		for _, u := range set {
			after[u] = changedFlags(before[u], addFlags, removeFlags)
		}
		// One STORE at a time, each waited for: go-imap hands a FETCH
		// answer to the first pending command that asked about its UID.
		// Not silent: the server answers with the flags of each message it
		// changed (Dovecot says nothing about one it left as it was: its
		// flags are those before with the change).
		for _, st := range []*imap.StoreFlags{
			{Op: imap.StoreFlagsAdd, Flags: addFlags},
			{Op: imap.StoreFlagsDel, Flags: removeFlags},
		} {
			if len(st.Flags) == 0 {
				continue
			}
			bufs, err := cl.Store(uidSet, st, nil).Collect()
			if err != nil {
				return imapError(err, folder)
			}
			for _, b := range bufs {
				if _, ok := after[b.UID]; ok && b.Flags != nil {
					after[b.UID] = b.Flags
				}
			}
		}
		if conn.stale() {
			// Another session changed the folder meanwhile (a message
			// left, or its flags changed): the flags are read back.
			if after, err = flagsOfUIDs(cl, folder, set); err != nil {
				return err
			}
		}
		out = &FlagsResult{Folder: folder, Messages: make([]MessageFlags, 0, len(after))}
		var gone []imap.UID
		for _, u := range set {
			fl, ok := after[u]
			if !ok {
				gone = append(gone, u)
				continue
			}
			out.Messages = append(out.Messages, MessageFlags{UID: uint32(u), Flags: flagsOf(fl)})
		}
		if len(gone) > 0 {
			return mailerr.Newf(mailerr.NotFound, "another client removed %s from folder %s while the flags were being changed; the other messages were changed", uidList(gone), quote(folder)).About(mailerr.SubjectMessage)
		}
		return nil
	})
	return out, err
}

// changedFlags is flags with add added and remove removed.
func changedFlags(flags, add, remove []imap.Flag) []imap.Flag {
	out := make([]imap.Flag, 0, len(flags)+len(add))
	for _, f := range flags {
		if !slices.ContainsFunc(remove, func(r imap.Flag) bool { return strings.EqualFold(string(r), string(f)) }) {
			out = append(out, f)
		}
	}
	for _, f := range add {
		if !slices.ContainsFunc(out, func(o imap.Flag) bool { return strings.EqualFold(string(o), string(f)) }) {
			out = append(out, f)
		}
	}
	return out
}

// presence is a change's check that its messages are there: the FETCH of
// their flags, sent with the folder's SELECT (opening.go).
type presence struct {
	set []imap.UID
	cmd *imapclient.FetchCommand
}

func (p *presence) send(cl *imapclient.Client) {
	p.cmd = cl.Fetch(imap.UIDSetNum(p.set...), &imap.FetchOptions{UID: true, Flags: true})
}

// read returns the flags of the messages of the set that are in folder;
// asked again when the server reported a change while the first flight
// was answered (Conn.stale).
func (p *presence) read(conn *Conn, folder string) (map[imap.UID][]imap.Flag, error) {
	have, err := collectFlags(p.cmd, folder, p.set)
	if err == nil && conn.stale() {
		have, err = flagsOfUIDs(conn.client(), folder, p.set)
	}
	return have, err
}

// Move moves messages uids (at most MaxUIDs) of folder to toFolder: UID
// MOVE, else UID COPY, UID STORE \Deleted and UID EXPUNGE of exactly those
// UIDs; a server with neither MOVE nor UIDPLUS is refused. If a UID is not
// in the folder or toFolder does not exist, nothing changes.
func (c *Client) Move(ctx context.Context, creds credentials.Credentials, folder string, uids []uint32, toFolder string) (*Moved, error) {
	folder, err := c.folderArg(ctx, creds, folder)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(toFolder) == "" {
		return nil, mailerr.New(mailerr.BadInput, "to_folder must name the folder to move the messages to")
	}
	if toFolder, err = c.folderArg(ctx, creds, toFolder); err != nil {
		return nil, err
	}
	if toFolder == folder {
		return nil, mailerr.Newf(mailerr.BadInput, "the messages are already in folder %s (folder and to_folder are the same); nothing was moved", quote(folder))
	}
	set, err := checkUIDs(uids)
	if err != nil {
		return nil, err
	}
	var out *Moved
	// The destination's STATUS and the messages' flags (presence) go with
	// the SELECT (or the NOOP on a connection that has the folder open).
	var dest *imapclient.StatusCommand
	pres := &presence{set: set}
	open := &opening{folder: folder, rw: true, fresh: true, send: func(conn *Conn, _ imap.CapSet) {
		cl := conn.client()
		dest = cl.Status(toFolder, &imap.StatusOptions{NumMessages: true})
		pres.send(cl)
	}}
	err = c.doOpen(ctx, creds, open, "moving messages", false, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		_, err := conn.openRW(folder)
		_, derr := dest.Wait()
		have, perr := pres.read(conn, folder)
		if derr != nil {
			return destinationError(cl, derr, toFolder)
		}
		if err != nil {
			return err
		}
		if perr != nil {
			return perr
		}
		if err := missingError(folder, set, have); err != nil {
			return err
		}
		out, err = moveChecked(conn, folder, set, toFolder)
		return err
	})
	return out, err
}

// Trash moves messages uids (at most MaxUIDs) of folder to the Trash
// folder, or with permanent deletes them for good (UID EXPUNGE of exactly
// those UIDs). The Trash folder is Config.TrashFolder, else the folder
// marked \Trash, else one with a usual name. Messages already in the Trash
// folder are only removed with permanent. If a UID is not in the folder,
// nothing changes.
//
// With want (the facts a person approved, MessageFacts), the messages are
// moved or deleted only while the folder is the same one (UIDVALIDITY)
// and, when want names them, they are exactly the messages shown.
func (c *Client) Trash(ctx context.Context, creds credentials.Credentials, folder string, uids []uint32, permanent bool, want *Facts) (*Trashed, error) {
	folder, err := c.folderArg(ctx, creds, folder)
	if err != nil {
		return nil, err
	}
	set, err := checkUIDs(uids)
	if err != nil {
		return nil, err
	}
	var out *Trashed
	step := "moving messages to the trash"
	if permanent {
		step = "deleting messages"
	}
	err = c.do(ctx, creds, step, false, func(ctx context.Context, conn *Conn) error {
		if permanent {
			if err := expungeUIDs(conn, folder, set, want); err != nil {
				return err
			}
			out = &Trashed{Folder: folder, Permanent: true, Messages: make([]MovedUID, len(set))}
			for i, u := range set {
				out.Messages[i] = MovedUID{UID: uint32(u)}
			}
			return nil
		}
		trash, err := c.trashFolder(conn)
		if err != nil {
			return err
		}
		if trash == folder {
			return mailerr.Newf(mailerr.BadInput, "the messages are already in the Trash folder %s; only permanent deletion (which needs full access) removes them; nothing was changed", quote(folder))
		}
		m, err := moveUIDs(conn, folder, set, trash, want)
		if err != nil {
			return err
		}
		out = &Trashed{Folder: folder, TrashFolder: trash, Messages: m.Messages}
		return nil
	})
	return out, err
}

// trashFolder names the Trash folder: the configured one (which must
// exist), else the one found.
func (c *Client) trashFolder(conn *Conn) (string, error) {
	cl := conn.client()
	if name := c.cfg.TrashFolder; name != "" {
		name = conn.place(name)
		if err := destinationExists(cl, name); err != nil {
			return "", mailerr.Newf(mailerr.NotFound, "the Trash folder %s (TRASH_FOLDER) does not exist; nothing was changed", quote(name))
		}
		return name, nil
	}
	name, err := findSpecial(cl, imap.MailboxAttrTrash, trashNames)
	if err != nil {
		return "", err
	}
	if name == "" {
		// A new mailbox (Cyrus and Courier start with INBOX alone): make
		// one, as a mail app would.
		return c.createSpecial(conn, imap.MailboxAttrTrash, "Trash")
	}
	return name, nil
}

// moveUIDs moves set from folder to the existing folder to on conn.
func moveUIDs(conn *Conn, folder string, set []imap.UID, to string, want *Facts) (*Moved, error) {
	if _, err := conn.openRW(folder); err != nil {
		return nil, err
	}
	if err := checkPresent(conn.client(), folder, set); err != nil {
		return nil, err
	}
	if err := checkMessages(conn, folder, set, want); err != nil {
		return nil, err
	}
	return moveChecked(conn, folder, set, to)
}

// moveChecked is moveUIDs once folder is selected and set is there.
func moveChecked(conn *Conn, folder string, set []imap.UID, to string) (*Moved, error) {
	cl := conn.client()
	caps := cl.Caps()
	if !caps.Has(imap.CapMove) && !caps.Has(imap.CapUIDPlus) {
		return nil, mailerr.New(mailerr.Permanent, "the mail server offers neither MOVE nor UIDPLUS, so messages cannot be moved without also deleting others marked \\Deleted; nothing was moved")
	}
	uidSet := imap.UIDSetNum(set...)
	var src, dst imap.NumSet
	if caps.Has(imap.CapMove) {
		data, err := cl.Move(uidSet, to).Wait()
		if err != nil {
			return nil, moveError(err, folder, to)
		}
		src, dst = data.SourceUIDs, data.DestUIDs
	} else {
		data, err := cl.Copy(uidSet, to).Wait()
		if err != nil {
			return nil, moveError(err, folder, to)
		}
		src, dst = data.SourceUIDs, data.DestUIDs
		if err := deleteExactly(cl, uidSet); err != nil {
			return nil, mailerr.Wrap(mailerr.KindOf(imapError(err, folder)), err,
				fmt.Sprintf("the messages were copied to %s but could not be removed from %s; they are in both folders now", quote(to), quote(folder)))
		}
	}
	newUIDs := pairUIDs(src, dst)
	out := &Moved{Folder: folder, ToFolder: to, Messages: make([]MovedUID, len(set))}
	for i, u := range set {
		out.Messages[i] = MovedUID{UID: uint32(u), NewUID: uint32(newUIDs[u])}
	}
	return out, nil
}

// moveError classifies a failed MOVE or COPY: a NO about the destination
// (TRYCREATE) names it; anything else is about the source.
func moveError(err error, folder, to string) error {
	var ie *imap.Error
	if asIMAP(err, &ie) && (ie.Code == imap.ResponseCodeTryCreate || ie.Code == imap.ResponseCodeNonExistent) {
		return imapError(err, to)
	}
	return imapError(err, folder)
}

// expungeUIDs deletes set from folder for good: UID STORE \Deleted, then
// UID EXPUNGE of exactly set.
func expungeUIDs(conn *Conn, folder string, set []imap.UID, want *Facts) error {
	cl := conn.client()
	if !cl.Caps().Has(imap.CapUIDPlus) {
		return mailerr.New(mailerr.Permanent, "the mail server does not offer UIDPLUS, so messages cannot be deleted without also deleting others marked \\Deleted; nothing was deleted")
	}
	if _, err := conn.openRW(folder); err != nil {
		return err
	}
	if err := checkPresent(cl, folder, set); err != nil {
		return err
	}
	if err := checkMessages(conn, folder, set, want); err != nil {
		return err
	}
	if err := deleteExactly(cl, imap.UIDSetNum(set...)); err != nil {
		return imapError(err, folder)
	}
	return nil
}

// deleteExactly marks set \Deleted and expunges exactly set (UIDPLUS).
func deleteExactly(cl *imapclient.Client, set imap.UIDSet) error {
	if err := cl.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close(); err != nil {
		return err
	}
	return cl.UIDExpunge(set).Close()
}

// destinationExists checks that folder exists and can hold messages
// (STATUS answers for it).
func destinationExists(cl *imapclient.Client, folder string) error {
	if _, err := cl.Status(folder, &imap.StatusOptions{NumMessages: true}).Wait(); err != nil {
		return destinationError(cl, err, folder)
	}
	return nil
}

// destinationError is destinationExists's error for the STATUS's err.
func destinationError(cl *imapclient.Client, err error, folder string) error {
	if e := folderErrorOn(cl, err, folder, "look at"); mailerr.KindOf(e) != mailerr.NotFound {
		return e
	}
	return mailerr.Wrap(mailerr.NotFound, err, "folder "+quote(folder)+" does not exist or cannot hold messages; nothing was changed").About(mailerr.SubjectFolder)
}

// openRW selects folder read-write for a change and returns its permanent
// flags (nil: the server did not say, so all flags are permanent). On a
// connection that has it selected already, a NOOP first brings Dovecot's
// view up to date (examineFresh says why): a message that has just arrived
// must not count as missing. The call's opening may have sent the SELECT,
// or that NOOP (then the operation asks Conn.stale about what it read).
func (conn *Conn) openRW(folder string) ([]imap.Flag, error) {
	cl := conn.client()
	if data, err, sent := conn.takeOpened(folder, false); sent {
		if err != nil {
			return nil, err
		}
		return data.PermanentFlags, nil
	}
	if cl.Mailbox() != nil && conn.selected == folder && conn.selectedRW {
		if !conn.refreshed {
			if err := cl.Noop().Wait(); err != nil {
				return nil, imapError(err, folder)
			}
		}
		if mb := cl.Mailbox(); mb != nil && mb.Name == folder {
			return mb.PermanentFlags, nil
		}
	}
	data, err := conn.sel(folder, false)
	if err != nil {
		return nil, err
	}
	return data.PermanentFlags, nil
}

// checkPresent refuses set unless every UID is in the selected folder.
func checkPresent(cl *imapclient.Client, folder string, set []imap.UID) error {
	have, err := flagsOfUIDs(cl, folder, set)
	if err != nil {
		return err
	}
	return missingError(folder, set, have)
}

// missingError is checkPresent's error for the messages of set have lacks.
func missingError(folder string, set []imap.UID, have map[imap.UID][]imap.Flag) error {
	var missing []imap.UID
	for _, u := range set {
		if _, ok := have[u]; !ok {
			missing = append(missing, u)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return mailerr.Newf(mailerr.NotFound, "folder %s has no message with %s (moved or deleted, or never there); nothing was changed", quote(folder), uidList(missing)).About(mailerr.SubjectMessage)
}

// flagsOfUIDs returns the flags of the messages of set that are in the
// selected folder.
func flagsOfUIDs(cl *imapclient.Client, folder string, set []imap.UID) (map[imap.UID][]imap.Flag, error) {
	return collectFlags(cl.Fetch(imap.UIDSetNum(set...), &imap.FetchOptions{UID: true, Flags: true}), folder, set)
}

// collectFlags is flagsOfUIDs once its FETCH is sent.
func collectFlags(cmd *imapclient.FetchCommand, folder string, set []imap.UID) (map[imap.UID][]imap.Flag, error) {
	bufs, err := cmd.Collect()
	if err != nil {
		return nil, imapError(err, folder)
	}
	out := make(map[imap.UID][]imap.Flag, len(bufs))
	for _, b := range bufs {
		// Unsolicited FETCH answers about other messages may come along.
		if _, wanted := slices.BinarySearch(set, b.UID); wanted {
			out[b.UID] = b.Flags
		}
	}
	return out, nil
}

// uidList names UIDs for a sentence: "UID 7", "UIDs 7, 9 and 12", and at
// most 20 of them.
func uidList(uids []imap.UID) string {
	const most = 20
	s := make([]string, 0, min(len(uids), most))
	for _, u := range uids[:min(len(uids), most)] {
		s = append(s, fmt.Sprint(u))
	}
	switch {
	case len(uids) == 1:
		return "UID " + s[0]
	case len(uids) > most:
		return fmt.Sprintf("UIDs %s and %d more", strings.Join(s, ", "), len(uids)-most)
	}
	return "UIDs " + strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// checkUIDs returns uids sorted, without duplicates, or says what is wrong.
func checkUIDs(uids []uint32) ([]imap.UID, error) {
	if len(uids) == 0 {
		return nil, mailerr.New(mailerr.BadInput, "uids must list at least one message UID")
	}
	if len(uids) > MaxUIDs {
		return nil, mailerr.Newf(mailerr.BadInput, "uids may list at most %d messages at a time (got %d)", MaxUIDs, len(uids))
	}
	out := make([]imap.UID, 0, len(uids))
	for _, u := range uids {
		if u == 0 {
			return nil, mailerr.New(mailerr.BadInput, "uids must be positive message UIDs (got 0)")
		}
		out = append(out, imap.UID(u))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// pairUIDs maps source to destination UIDs from a COPYUID answer, whose two
// sets list the messages in the same order (RFC 4315); nil when the server
// gave none or they do not match.
func pairUIDs(src, dst imap.NumSet) map[imap.UID]imap.UID {
	s, ok1 := src.(imap.UIDSet)
	d, ok2 := dst.(imap.UIDSet)
	if !ok1 || !ok2 {
		return nil
	}
	a, ok1 := s.Nums()
	b, ok2 := d.Nums()
	if !ok1 || !ok2 || len(a) != len(b) || len(a) == 0 {
		return nil
	}
	out := make(map[imap.UID]imap.UID, len(a))
	for i := range a {
		out[a[i]] = b[i]
	}
	return out
}

// parseFlagChange turns the flags to add and remove into IMAP flags,
// refusing a flag that is in both.
func parseFlagChange(add, remove []string) (addFlags, removeFlags []imap.Flag, err error) {
	if len(add) == 0 && len(remove) == 0 {
		return nil, nil, mailerr.New(mailerr.BadInput, "give at least one flag in add or remove; nothing was changed")
	}
	if addFlags, err = parseFlags(add); err != nil {
		return nil, nil, err
	}
	if removeFlags, err = parseFlags(remove); err != nil {
		return nil, nil, err
	}
	for _, a := range addFlags {
		for _, r := range removeFlags {
			if strings.EqualFold(string(a), string(r)) {
				return nil, nil, mailerr.Newf(mailerr.BadInput, "%s is both in add and in remove; nothing was changed", flagName(a))
			}
		}
	}
	return addFlags, removeFlags, nil
}

// parseFlags parses a list of flags, dropping repeats (IMAP compares
// keywords without regard to case).
func parseFlags(names []string) ([]imap.Flag, error) {
	var out []imap.Flag
	for _, n := range names {
		f, err := parseFlag(n)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(out, func(g imap.Flag) bool { return strings.EqualFold(string(f), string(g)) }) {
			out = append(out, f)
		}
	}
	return out, nil
}

// settable are the system flags SetFlags changes, by lower-case name
// without the backslash.
var settable = map[string]imap.Flag{"seen": imap.FlagSeen, "flagged": imap.FlagFlagged, "answered": imap.FlagAnswered}

// parseFlag reads one flag: seen, flagged, answered (any case, with or
// without the backslash), or a keyword.
func parseFlag(s string) (imap.Flag, error) {
	name := strings.ToLower(strings.TrimPrefix(s, `\`))
	if f, ok := settable[name]; ok {
		return f, nil
	}
	switch name {
	case "deleted":
		return "", mailerr.Newf(mailerr.BadInput, "%q cannot be set or cleared here: deleting messages is a separate operation; nothing was changed", s)
	case "draft", "recent":
		return "", mailerr.Newf(mailerr.BadInput, "%q cannot be set or cleared here (only seen, flagged, answered and keywords); nothing was changed", s)
	}
	if strings.HasPrefix(s, `\`) {
		return "", mailerr.Newf(mailerr.BadInput, "%q is not a flag that can be changed: the system flags are seen, flagged and answered, and a keyword cannot start with a backslash; nothing was changed", s)
	}
	if err := CheckKeyword(s); err != nil {
		return "", err
	}
	return imap.Flag(s), nil
}

// CheckKeyword refuses what IMAP does not accept as a keyword (an atom, RFC
// 3501): it must be 1 to 64 printable ASCII characters without spaces and
// without ( ) { % * " \ ].
func CheckKeyword(k string) error {
	switch {
	case k == "":
		return mailerr.New(mailerr.BadInput, "a keyword must not be empty; nothing was changed")
	case len(k) > maxKeywordLen:
		return mailerr.Newf(mailerr.BadInput, "keyword %q is longer than %d characters; nothing was changed", k, maxKeywordLen)
	}
	for _, r := range k {
		switch {
		case r > 0x7e:
			return mailerr.Newf(mailerr.BadInput, "keyword %q has a character outside ASCII (%q), which IMAP does not allow in a keyword; nothing was changed", k, r)
		case r <= ' ':
			return mailerr.Newf(mailerr.BadInput, "keyword %q contains a space or control character, which IMAP does not allow in a keyword; nothing was changed", k)
		case strings.ContainsRune(`(){%*"\]`, r):
			return mailerr.Newf(mailerr.BadInput, "keyword %q contains %q, which IMAP does not allow in a keyword (nor any of ( ) { %% * \" \\ ]); nothing was changed", k, r)
		}
	}
	return nil
}

// newKeyword returns the first keyword of add that the folder cannot take,
// by its PERMANENTFLAGS: a keyword it lists, or any with \*, is fine.
func newKeyword(perm []imap.Flag, add []imap.Flag) string {
	if perm == nil || slices.Contains(perm, imap.FlagWildcard) {
		return ""
	}
	for _, f := range add {
		if strings.HasPrefix(string(f), `\`) {
			continue
		}
		if !slices.ContainsFunc(perm, func(p imap.Flag) bool { return strings.EqualFold(string(p), string(f)) }) {
			return string(f)
		}
	}
	return ""
}

// flagName is how a sentence names a flag: "seen", or the keyword.
func flagName(f imap.Flag) string {
	if strings.HasPrefix(string(f), `\`) {
		return strings.ToLower(strings.TrimPrefix(string(f), `\`))
	}
	return fmt.Sprintf("%q", string(f))
}
