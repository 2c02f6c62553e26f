package mailbox

// Drafts: saving a composed message in the Drafts folder (replacing an
// earlier draft only once the new one is safely stored), reading one back
// to send it, and removing exactly that one afterwards.

import (
	"context"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// DraftRef says where a draft is.
type DraftRef struct {
	Folder      string `json:"folder" desc:"the Drafts folder"`
	UID         uint32 `json:"uid" desc:"the draft's UID"`
	UIDValidity uint32 `json:"uid_validity" desc:"the folder's UIDVALIDITY"`
}

// SaveDraftOptions is a draft to save.
type SaveDraftOptions struct {
	Raw       []byte    // the composed message (with its Bcc header: the user's own copy)
	MessageID string    // its Message-ID, to find it when the server gives no APPENDUID
	Date      time.Time // its internal date
	// ReplaceUID, when not 0, is an earlier draft in the Drafts folder that
	// the new one replaces: removed once the new one is stored.
	ReplaceUID uint32
	// Keywords are stored on the draft besides \Draft and \Seen.
	Keywords []string
}

// SavedDraft is where SaveDraft stored the draft.
type SavedDraft struct {
	DraftRef
	// Replaced is the UID of the draft removed, 0 when none was asked or
	// removing it failed (ReplaceError says why).
	Replaced     uint32
	ReplaceError string
}

// draftFlags are the flags of a saved draft: \Seen, as mail clients store
// their own drafts, so it never counts as unread mail.
var draftFlags = []imap.Flag{imap.FlagDraft, imap.FlagSeen}

// SaveDraft appends o.Raw to the Drafts folder with \Draft and \Seen. With
// ReplaceUID the earlier draft is checked first (it must be in the Drafts
// folder and have \Draft, else nothing is stored), the new one appended,
// and only then the old one removed by UID STORE \Deleted and UID EXPUNGE
// of exactly its UID, so a failure never loses both.
func (c *Client) SaveDraft(ctx context.Context, creds credentials.Credentials, o SaveDraftOptions) (*SavedDraft, error) {
	var out *SavedDraft
	err := c.do(ctx, creds, "saving the draft", false, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		folder, err := c.draftsFolder(conn)
		if err != nil {
			return err
		}
		if o.ReplaceUID != 0 {
			if err := checkDraft(conn, folder, o.ReplaceUID, true, "nothing was saved"); err != nil {
				return err
			}
		}
		flags := draftFlags
		for _, k := range o.Keywords {
			flags = append(flags[:len(flags):len(flags)], imap.Flag(k))
		}
		uid, err := conn.append(folder, o.Raw, flags, o.Date)
		if err != nil {
			return err
		}
		out = &SavedDraft{DraftRef: DraftRef{Folder: folder, UID: uint32(uid)}}
		// From here on the draft is stored: later failures are reported in
		// the result, never as an error that would say nothing was saved.
		if err := conn.selectRWFresh(folder); err != nil {
			out.ReplaceError = mailerr.Message(err)
			return nil
		}
		out.UIDValidity = conn.uidValidity
		if out.UID == 0 {
			if uids, err := searchMessageID(cl, o.MessageID); err == nil && len(uids) > 0 {
				out.UID = uint32(slices.Max(uids))
			}
		}
		if o.ReplaceUID != 0 {
			if err := expungeOne(cl, folder, imap.UID(o.ReplaceUID)); err != nil {
				c.log.WarnContext(ctx, "could not remove the replaced draft", "err", err)
				out.ReplaceError = mailerr.Message(err)
			} else {
				out.Replaced = o.ReplaceUID
			}
		}
		return nil
	})
	if out != nil {
		// Stored: whatever went wrong afterwards is in the result.
		return out, nil
	}
	return nil, err
}

// LoadedDraft is a draft read back, with its raw bytes.
type LoadedDraft struct {
	DraftRef
	Raw []byte
}

// LoadDraft reads draft uid of the Drafts folder without changing it. It
// must have \Draft; a draft larger than maxBytes is refused before its
// body is fetched.
func (c *Client) LoadDraft(ctx context.Context, creds credentials.Credentials, uid uint32, maxBytes int64) (*LoadedDraft, error) {
	if uid == 0 {
		return nil, badUID()
	}
	var out *LoadedDraft
	err := c.do(ctx, creds, "reading the draft", true, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		folder, err := c.draftsFolder(conn)
		if err != nil {
			return err
		}
		if _, err := conn.examineFresh(folder); err != nil {
			return err
		}
		set := imap.UIDSetNum(imap.UID(uid))
		bufs, err := cl.Fetch(set, &imap.FetchOptions{UID: true, Flags: true, RFC822Size: true}).Collect()
		if err != nil {
			return imapError(err, folder)
		}
		var size int64 = -1
		for _, b := range bufs {
			if uint32(b.UID) != uid {
				continue
			}
			if !flagsOf(b.Flags).Draft {
				return notADraft(uid, folder, "nothing was sent")
			}
			size = b.RFC822Size
		}
		switch {
		case size < 0:
			return noDraft(uid, folder, "nothing was sent")
		case size > maxBytes:
			return mailerr.Newf(mailerr.TooLarge, "draft UID %d is %d bytes, more than the %d bytes a message sent through this gateway may have; nothing was sent", uid, size, maxBytes)
		}
		sec := &imap.FetchItemBodySection{Peek: true}
		bufs, err = cl.Fetch(set, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
		if err != nil {
			return imapError(err, folder)
		}
		for _, b := range bufs {
			if uint32(b.UID) == uid {
				out = &LoadedDraft{DraftRef: DraftRef{Folder: folder, UID: uid, UIDValidity: conn.uidValidity}, Raw: b.FindBodySection(sec)}
				return nil
			}
		}
		return noDraft(uid, folder, "nothing was sent")
	})
	return out, err
}

// DeleteDraft removes exactly the draft ref names (UID STORE \Deleted and
// UID EXPUNGE of its UID), if the folder still has ref's UIDVALIDITY.
func (c *Client) DeleteDraft(ctx context.Context, creds credentials.Credentials, ref DraftRef) error {
	return c.do(ctx, creds, "removing the draft", false, func(ctx context.Context, conn *Conn) error {
		if err := conn.selectRWFresh(ref.Folder); err != nil {
			return err
		}
		if ref.UIDValidity != 0 && conn.uidValidity != ref.UIDValidity {
			return mailerr.Newf(mailerr.NotFound, "folder %s was rebuilt on the server (UIDVALIDITY changed), so UID %d may name another message now", quote(ref.Folder), ref.UID).About(mailerr.SubjectMessage)
		}
		return expungeOne(conn.client(), ref.Folder, imap.UID(ref.UID))
	})
}

// draftsFolder is the configured Drafts folder, else the one the server
// marks \Drafts, else one with a usual name.
func (c *Client) draftsFolder(conn *Conn) (string, error) {
	cl := conn.client()
	if c.cfg.DraftsFolder != "" {
		return conn.place(c.cfg.DraftsFolder), nil
	}
	name, err := findSpecial(cl, imap.MailboxAttrDrafts, draftsNames)
	if err != nil {
		return "", err
	}
	if name == "" {
		return c.createSpecial(conn, imap.MailboxAttrDrafts, "Drafts")
	}
	return name, nil
}

// checkDraft selects folder (read-write when rw) and checks that uid is in
// it with \Draft; done says what did not happen when it is not.
func checkDraft(conn *Conn, folder string, uid uint32, rw bool, done string) error {
	if rw {
		if err := conn.selectRWFresh(folder); err != nil {
			return err
		}
	} else if _, err := conn.examineFresh(folder); err != nil {
		return err
	}
	bufs, err := conn.client().Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{UID: true, Flags: true}).Collect()
	if err != nil {
		return imapError(err, folder)
	}
	for _, b := range bufs {
		if uint32(b.UID) == uid {
			if !flagsOf(b.Flags).Draft {
				return notADraft(uid, folder, done)
			}
			return nil
		}
	}
	return noDraft(uid, folder, done)
}

func noDraft(uid uint32, folder, done string) error {
	return mailerr.Newf(mailerr.NotFound, "no message with UID %d in the Drafts folder %s; %s", uid, quote(folder), done).About(mailerr.SubjectMessage)
}

func notADraft(uid uint32, folder, done string) error {
	return mailerr.Newf(mailerr.BadInput, "message UID %d in %s is not a draft (it has no \\Draft flag); %s", uid, quote(folder), done)
}

// selectRWFresh is selectRW, plus a waited NOOP when the connection had
// the folder open already (see examineFresh): a UID appended by another
// session since is otherwise unknown to this one, and a STORE or FETCH of
// it silently does nothing.
func (conn *Conn) selectRWFresh(folder string) error {
	reused := conn.selected == folder && conn.selectedRW && conn.client().Mailbox() != nil
	if err := conn.selectRW(folder); err != nil || !reused {
		return err
	}
	if err := conn.client().Noop().Wait(); err != nil {
		return imapError(err, folder)
	}
	return nil
}

// append appends raw to folder with flags and date as its internal date,
// and returns its UID (0 when the server does not say: no UIDPLUS). The
// folder is never the one the connection has selected read-only: Courier
// refuses such an APPEND (NO Current box is selected READ-ONLY), so the
// connection leaves it first (every server: it costs one command, and
// only when the folder was EXAMINEd just before).
func (conn *Conn) append(folder string, raw []byte, flags []imap.Flag, date time.Time) (imap.UID, error) {
	cl := conn.client()
	if conn.selected == folder && !conn.selectedRW && cl.State() == imap.ConnStateSelected {
		if err := conn.unselect(); err != nil {
			return 0, err
		}
	}
	cmd := cl.Append(folder, int64(len(raw)), &imap.AppendOptions{Flags: flags, Time: date})
	_, werr := cmd.Write(raw)
	if cerr := cmd.Close(); werr == nil {
		werr = cerr
	}
	data, err := cmd.Wait()
	if err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		return 0, conn.folderError(err, folder, "add a message to")
	}
	return data.UID, nil
}

// unselect leaves the selected folder: UNSELECT where the server has it,
// else CLOSE after re-opening it read-only (CLOSE of a folder opened with
// EXAMINE removes nothing; of one opened with SELECT it would expunge).
func (conn *Conn) unselect() error {
	cl := conn.client()
	folder := conn.selected
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
	if conn.selectedRW {
		if _, err := cl.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
			return imapError(err, folder)
		}
	}
	if err := cl.UnselectAndExpunge().Wait(); err != nil { // CLOSE
		return imapError(err, "")
	}
	return nil
}

// expungeOne removes exactly uid from the selected folder: UID STORE
// \Deleted, then UID EXPUNGE of that UID only. Without UIDPLUS it refuses:
// a plain EXPUNGE would also remove every other message marked \Deleted.
func expungeOne(cl *imapclient.Client, folder string, uid imap.UID) error {
	if !cl.Caps().Has(imap.CapUIDPlus) {
		return mailerr.Newf(mailerr.Permanent, "the mail server cannot remove a single message (it lacks UIDPLUS), so message UID %d in %s was left in place", uid, quote(folder))
	}
	set := imap.UIDSetNum(uid)
	if err := cl.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close(); err != nil {
		return imapError(err, folder)
	}
	if err := cl.UIDExpunge(set).Close(); err != nil {
		return imapError(err, folder)
	}
	return nil
}

// searchMessageID returns the UIDs in the selected folder whose Message-ID
// header contains id (a substring match, as IMAP searches: callers check),
// not counting messages marked \Deleted.
func searchMessageID(cl *imapclient.Client, id string) ([]imap.UID, error) {
	if id == "" {
		return nil, nil
	}
	data, err := cl.UIDSearch(&imap.SearchCriteria{
		Header:  []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: id}},
		NotFlag: []imap.Flag{imap.FlagDeleted},
	}, nil).Wait()
	if err != nil {
		return nil, imapError(err, "")
	}
	return data.AllUIDs(), nil
}
