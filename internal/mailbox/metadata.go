package mailbox

// IMAP METADATA (RFC 5464) on folders, and "keyed" messages: small
// messages carrying a key in a header (KeyHeader), which a store can use
// where the server has no METADATA. Both are storage primitives; what the
// entries and keys mean belongs to the caller (internal/agents).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// ErrNoMetadata is returned by the METADATA operations when the server
// does not advertise METADATA: the caller falls back to something else.
var ErrNoMetadata = errors.New("the mail server does not offer IMAP METADATA (RFC 5464)")

// HasMetadata says whether the server offers METADATA on folders.
// (Dovecot advertises METADATA, never METADATA-SERVER, and only when
// mail_attribute_dict and imap_metadata are set.)
func (c *Client) HasMetadata(ctx context.Context, creds credentials.Credentials) (bool, error) {
	var has bool
	err := c.do(ctx, creds, "checking the server's capabilities", true, func(ctx context.Context, conn *Conn) error {
		var err error
		has, err = c.metadataUsable(conn)
		return err
	})
	return has, err
}

// GetMetadata returns the values of entries on folder ("" is the server
// level); an entry that has no value is absent from the map. Without
// METADATA it returns ErrNoMetadata.
//
// Only exact entry names are asked for: go-imap (v2.0.0-beta.8) writes
// GETMETADATA's DEPTH and MAXSIZE options after the mailbox name, where
// RFC 5464 wants them before it, and Dovecot answers BAD.
func (c *Client) GetMetadata(ctx context.Context, creds credentials.Credentials, folder string, entries []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := c.do(ctx, creds, "reading folder metadata", true, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		if ok, err := c.metadataUsable(conn); err != nil {
			return err
		} else if !ok {
			return ErrNoMetadata
		}
		data, err := cl.GetMetadata(folder, entries, nil).Wait()
		if err != nil {
			return metadataError(conn, err, folder)
		}
		for k, v := range data.Entries {
			if v != nil {
				out[k] = *v
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SetMetadata sets entries on folder ("" is the server level); a nil value
// removes the entry. Without METADATA it returns ErrNoMetadata. One entry
// the server refuses fails the whole command, and nothing is changed.
func (c *Client) SetMetadata(ctx context.Context, creds credentials.Credentials, folder string, entries map[string]*[]byte) error {
	return c.do(ctx, creds, "writing folder metadata", false, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		if ok, err := c.metadataUsable(conn); err != nil {
			return err
		} else if !ok {
			return ErrNoMetadata
		}
		if err := cl.SetMetadata(folder, entries).Wait(); err != nil {
			var ie *imap.Error
			if errors.As(err, &ie) && ie.Type == imap.StatusResponseTypeNo && ie.Code == "" && vendorEntries(entries) {
				// Refused by name, as Cyrus does every vendor entry: the
				// server keeps no such entries, from now on.
				if s := conn.host.server(); s != nil && !s.vendorMetadataRefused.Swap(true) {
					c.log.Info("the mail server refused a METADATA entry under /private/vendor/; agent state and status use messages in the state folder instead", "said", ie.Text)
				}
				return ErrNoMetadata
			}
			return metadataError(conn, err, folder)
		}
		return nil
	})
}

// ChildMetadata returns entries of every folder directly inside parent
// (LIST parent/%, then one GETMETADATA per folder, pipelined): folder ->
// entry -> value, only folders with at least one value. Without METADATA
// it returns ErrNoMetadata; a parent that does not exist has no children.
func (c *Client) ChildMetadata(ctx context.Context, creds credentials.Credentials, parent string, entries []string) (map[string]map[string][]byte, error) {
	out := map[string]map[string][]byte{}
	err := c.do(ctx, creds, "reading folder metadata", true, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		if ok, err := c.metadataUsable(conn); err != nil {
			return err
		} else if !ok {
			return ErrNoMetadata
		}
		delim, err := delimiter(cl)
		if err != nil {
			return err
		}
		if delim == 0 {
			return nil
		}
		prefix := parent + string(delim)
		list, err := cl.List("", prefix+"%", nil).Collect()
		if err != nil {
			return imapError(err, parent)
		}
		cmds := map[string]*imapclient.GetMetadataCommand{}
		for _, d := range list {
			name, ok := strings.CutPrefix(d.Mailbox, prefix)
			if !ok || name == "" || strings.ContainsRune(name, delim) || slices.Contains(d.Attrs, imap.MailboxAttrNoSelect) || slices.Contains(d.Attrs, imap.MailboxAttrNonExistent) {
				continue
			}
			cmds[d.Mailbox] = cl.GetMetadata(d.Mailbox, entries, nil)
		}
		var firstErr error
		for folder, cmd := range cmds {
			data, err := cmd.Wait()
			if err != nil {
				// a folder deleted meanwhile has no metadata; the rest stands
				if firstErr == nil && mailerr.KindOf(conn.folderError(err, folder, "read metadata of")) != mailerr.NotFound {
					firstErr = metadataError(conn, err, folder)
				}
				continue
			}
			for k, v := range data.Entries {
				if v == nil {
					continue
				}
				if out[folder] == nil {
					out[folder] = map[string][]byte{}
				}
				out[folder][k] = *v
			}
		}
		return firstErr
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// vendorEntries says whether entries has one under /private/vendor/ or
// /shared/vendor/.
func vendorEntries(entries map[string]*[]byte) bool {
	for k := range entries {
		k = strings.ToLower(k)
		if strings.HasPrefix(k, "/private/vendor/") || strings.HasPrefix(k, "/shared/vendor/") {
			return true
		}
	}
	return false
}

// metadataError classifies a GETMETADATA/SETMETADATA error: the METADATA
// response codes (MAXSIZE, TOOMANY, NOPRIVATE) say the server will not
// hold the value.
func metadataError(conn *Conn, err error, folder string) error {
	var ie *imap.Error
	if errors.As(err, &ie) && strings.EqualFold(string(ie.Code), "METADATA") {
		return mailerr.Wrap(mailerr.TooLarge, err, "the mail server refused to store the metadata (too large, or too many entries)")
	}
	if folder == "" {
		return imapError(err, folder)
	}
	// Dovecot answers METADATA about a missing folder with a bare NO.
	return conn.folderError(err, folder, "keep metadata on")
}

// KeyHeader is the header that names a keyed message's key.
const KeyHeader = "X-Mailbox-State-Key"

// Keyed is one keyed message.
type Keyed struct {
	UID uint32
	Key string
	// Raw is the whole message; FindKeyed fills it only for the newest
	// message (highest UID) of each key, and only when asked.
	Raw []byte
}

// AppendKeyed appends raw (a message with a KeyHeader header) to folder
// and returns its UID. The server must offer UIDPLUS, without which
// RemoveUIDs cannot remove the replaced copies.
func (c *Client) AppendKeyed(ctx context.Context, creds credentials.Credentials, folder string, raw []byte) (uint32, error) {
	var uid imap.UID
	err := c.do(ctx, creds, "storing a keyed message", false, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		if !cl.Caps().Has(imap.CapUIDPlus) {
			return noUIDPlus()
		}
		var err error
		uid, err = conn.append(folder, raw, []imap.Flag{imap.FlagSeen}, time.Now())
		return err
	})
	return uint32(uid), err
}

// FindKeyed returns folder's messages whose KeyHeader is key, or starts
// with key when prefix is set ("" with prefix: every keyed message), not
// counting those marked \Deleted, lowest UID first. With bodies, Raw holds
// the newest message of each key. A folder that does not exist is a
// NotFound error.
//
// On a connection that has folder open already a waited NOOP comes first:
// Dovecot does not show that connection a message another one APPENDed
// until then. IMAP SEARCH HEADER is a case-insensitive substring match, so
// the keys are compared exactly after fetching.
func (c *Client) FindKeyed(ctx context.Context, creds credentials.Credentials, folder, key string, prefix, bodies bool) ([]Keyed, error) {
	var out []Keyed
	err := c.do(ctx, creds, "reading keyed messages", true, func(ctx context.Context, conn *Conn) error {
		if _, err := conn.examineFresh(folder); err != nil {
			return err
		}
		cl := conn.client()
		crit := &imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagDeleted}}
		if key != "" {
			crit.Header = []imap.SearchCriteriaHeaderField{{Key: KeyHeader, Value: key}}
		}
		data, err := cl.UIDSearch(crit, nil).Wait()
		if err != nil {
			return imapError(err, folder)
		}
		uids := data.AllUIDs()
		if len(uids) == 0 {
			return nil
		}
		sec := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{KeyHeader}, Peek: true}
		bufs, err := cl.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, Flags: true, BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
		if err != nil {
			return imapError(err, folder)
		}
		newest := map[string]int{} // key -> index in out of its highest UID
		for _, b := range bufs {
			if slices.Contains(b.Flags, imap.FlagDeleted) {
				continue
			}
			k := keyOf(b.FindBodySection(sec))
			if k == "" || (prefix && !strings.HasPrefix(k, key)) || (!prefix && k != key) {
				continue
			}
			out = append(out, Keyed{UID: uint32(b.UID), Key: k})
		}
		slices.SortFunc(out, func(a, b Keyed) int { return int(int64(a.UID) - int64(b.UID)) })
		for i, k := range out {
			newest[k.Key] = i
		}
		if !bodies || len(newest) == 0 {
			return nil
		}
		var want []imap.UID
		for _, i := range newest {
			want = append(want, imap.UID(out[i].UID))
		}
		whole := &imap.FetchItemBodySection{Peek: true}
		bufs, err = cl.Fetch(imap.UIDSetNum(want...), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{whole}}).Collect()
		if err != nil {
			return imapError(err, folder)
		}
		raw := map[uint32][]byte{}
		for _, b := range bufs {
			raw[uint32(b.UID)] = b.FindBodySection(whole)
		}
		for _, i := range newest {
			out[i].Raw = raw[out[i].UID]
		}
		return nil
	})
	return out, err
}

// keyOf reads KeyHeader out of a fetched header section.
func keyOf(header []byte) string {
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(append(bytes.TrimRight(header, "\r\n"), "\r\n\r\n"...))))
	h, err := r.ReadMIMEHeader()
	if err != nil && len(h) == 0 {
		return ""
	}
	return strings.TrimSpace(h.Get(KeyHeader))
}

// RemoveUIDs removes exactly uids from folder: UID STORE \Deleted, then
// UID EXPUNGE of those UIDs (UIDPLUS), never a bare EXPUNGE, which would
// also remove whatever else is marked \Deleted. UIDs already gone are not
// an error: two writers may remove the same stale copy.
func (c *Client) RemoveUIDs(ctx context.Context, creds credentials.Credentials, folder string, uids []uint32) error {
	if len(uids) == 0 {
		return nil
	}
	set := make([]imap.UID, len(uids))
	for i, u := range uids {
		set[i] = imap.UID(u)
	}
	return c.do(ctx, creds, "removing replaced messages", false, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		if !cl.Caps().Has(imap.CapUIDPlus) {
			return noUIDPlus()
		}
		if _, err := conn.openRW(folder); err != nil {
			return err
		}
		if err := deleteExactly(cl, imap.UIDSetNum(set...)); err != nil {
			return imapError(err, folder)
		}
		return nil
	})
}

func noUIDPlus() error {
	return mailerr.New(mailerr.Permanent, "the mail server does not offer UIDPLUS, which the message-based store needs to replace a value without touching other messages")
}
