package mailbox

// What sending mail needs from IMAP: the headers of the message a reply
// answers (read without setting \Seen), \Answered on it once the reply went
// out, and a copy of the sent message in the Sent folder.

import (
	"bytes"
	"context"
	"net/mail"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Original is what a reply needs to know about the message it answers.
type Original struct {
	Folder      string
	UID         uint32
	UIDValidity uint32 // of Folder when the message was read: MarkAnswered checks it
	From        []Address
	To          []Address
	Cc          []Address
	// ReplyTo is the Reply-To header's addresses, empty when there is none
	// (the IMAP envelope would repeat From).
	ReplyTo    []Address
	Subject    string
	MessageID  string   // without angle brackets; "" when the message has none
	InReplyTo  []string // without angle brackets
	References []string // without angle brackets, oldest first
	Flags      Flags
}

// threadHeaders are fetched raw: the envelope's Message-ID is empty when
// go-imap cannot parse it, and the envelope has no References.
var threadHeaders = []string{"Message-ID", "In-Reply-To", "References", "Reply-To"}

// ReplyInfo reads the headers a reply needs from message uid of folder:
// EXAMINE and BODY.PEEK, so the message stays exactly as it was (\Seen
// unchanged).
func (c *Client) ReplyInfo(ctx context.Context, creds credentials.Credentials, folder string, uid uint32) (*Original, error) {
	return c.readOriginal(ctx, creds, folder, uid, "reading the original message", nil)
}

// readOriginal reads Original of message uid of folder without changing
// it; with then, also its structure, and then runs on the same
// connection with the answer.
func (c *Client) readOriginal(ctx context.Context, creds credentials.Credentials, folder string, uid uint32, step string, then func(conn *Conn, b *imapclient.FetchMessageBuffer)) (*Original, error) {
	folder, err := c.folderArg(ctx, creds, folder)
	if err != nil {
		return nil, err
	}
	if uid == 0 {
		return nil, badUID()
	}
	var out *Original
	err = c.doIn(ctx, creds, folder, step, func(ctx context.Context, conn *Conn) error {
		if _, err := conn.examine(folder); err != nil {
			return err
		}
		sec := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: threadHeaders, Peek: true}
		opts := &imap.FetchOptions{UID: true, Flags: true, Envelope: true, BodySection: []*imap.FetchItemBodySection{sec}}
		if then != nil {
			opts.BodyStructure = &imap.FetchItemBodyStructure{Extended: true}
		}
		bufs, err := conn.client().Fetch(imap.UIDSetNum(imap.UID(uid)), opts).Collect()
		if err != nil {
			return imapError(err, folder)
		}
		for _, b := range bufs {
			if uint32(b.UID) != uid || b.Envelope == nil {
				continue
			}
			out = originalOf(folder, uid, conn.uidValidity, b, b.FindBodySection(sec))
			if then != nil {
				then(conn, b)
			}
			return nil
		}
		return noMessage(uid, folder)
	})
	return out, err
}

func originalOf(folder string, uid, uidValidity uint32, b *imapclient.FetchMessageBuffer, rawHeader []byte) *Original {
	env := b.Envelope
	o := &Original{
		Folder: folder, UID: uid, UIDValidity: uidValidity, Flags: flagsOf(b.Flags),
		From: addressesOf(env.From), To: addressesOf(env.To), Cc: addressesOf(env.Cc),
		Subject: mailmsg.SanitizeLine(env.Subject),
	}
	// The raw fields; a header go-message cannot parse leaves them empty.
	var h mail.Header
	if m, err := mail.ReadMessage(bytes.NewReader(append(bytes.TrimRight(rawHeader, "\r\n"), "\r\n\r\n"...))); err == nil {
		h = m.Header
	}
	if ids := msgIDs(h.Get("Message-ID")); len(ids) > 0 {
		o.MessageID = ids[0]
	} else if mailmsg.ValidMessageID(env.MessageID) {
		o.MessageID = env.MessageID
	}
	o.InReplyTo = msgIDs(h.Get("In-Reply-To"))
	o.References = msgIDs(h.Get("References"))
	if h.Get("Reply-To") != "" {
		o.ReplyTo = addressesOf(env.ReplyTo)
	}
	return o
}

// msgIDs returns the well-formed message ids of a header value, without
// brackets; malformed ones are skipped (they cannot be written back).
func msgIDs(v string) []string {
	var ids []string
	for _, id := range parseMsgIDs("x:" + v) {
		if mailmsg.ValidMessageID(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// MarkAnswered sets \Answered on message uid of folder, which must still
// have the UIDVALIDITY uidValidity (0: not checked). It needs a read-write
// SELECT; the connection remembers that, so the next read re-EXAMINEs.
func (c *Client) MarkAnswered(ctx context.Context, creds credentials.Credentials, folder string, uid, uidValidity uint32) error {
	folder, err := c.folderArg(ctx, creds, folder)
	if err != nil {
		return err
	}
	return c.do(ctx, creds, "flagging the original as answered", false, func(ctx context.Context, conn *Conn) error {
		if err := conn.selectRW(folder); err != nil {
			return err
		}
		if uidValidity != 0 && conn.uidValidity != uidValidity {
			return mailerr.Newf(mailerr.NotFound, "folder %s was rebuilt on the server (UIDVALIDITY changed), so UID %d may name another message now", quote(folder), uid).About(mailerr.SubjectMessage)
		}
		// A server sends no FETCH for a STORE that changed nothing (Dovecot
		// when \Answered is already set), so the result is checked with a
		// FETCH FLAGS of its own. Not pipelined: go-imap would hand the
		// FETCH's answer to the STORE, which is waiting for the same UID.
		set := imap.UIDSetNum(imap.UID(uid))
		if err := conn.client().Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagAnswered}}, nil).Close(); err != nil {
			return imapError(err, folder)
		}
		bufs, err := conn.client().Fetch(set, &imap.FetchOptions{UID: true, Flags: true}).Collect()
		if err != nil {
			return imapError(err, folder)
		}
		for _, b := range bufs {
			if uint32(b.UID) == uid && flagsOf(b.Flags).Answered {
				return nil
			}
		}
		return noMessage(uid, folder)
	})
}

// selectRW makes folder the selected mailbox read-write, unless it already
// is.
func (conn *Conn) selectRW(folder string) error {
	if _, err, sent := conn.takeOpened(folder, false); sent {
		return err
	}
	if mb := conn.client().Mailbox(); mb != nil && conn.selected == folder && conn.selectedRW {
		return nil
	}
	_, err := conn.sel(folder, false)
	return err
}

// NoSentFolder is the SaveSent folder argument that turns the copy off.
const NoSentFolder = "none"

// SentCopy says where SaveSent put the copy.
type SentCopy struct {
	Folder string `json:"folder"`
	UID    uint32 `json:"uid,omitempty"` // 0 when the server does not say (no UIDPLUS)
}

// SaveSent appends raw to the Sent folder with \Seen and date as its
// internal date; unconfirmed also marks it \Flagged and
// UnconfirmedKeyword (its message may or may not have gone out). folder
// is the configured folder; "" finds it: the folder with the \Sent
// special-use attribute (RFC 6154), else one with a common Sent name.
func (c *Client) SaveSent(ctx context.Context, creds credentials.Credentials, folder string, raw []byte, date time.Time, unconfirmed bool) (*SentCopy, error) {
	if strings.EqualFold(folder, NoSentFolder) {
		return nil, mailerr.New(mailerr.BadInput, "saving a copy of sent mail is turned off (SENT_FOLDER=none)")
	}
	var out *SentCopy
	err := c.do(ctx, creds, "saving the copy in the Sent folder", false, func(ctx context.Context, conn *Conn) error {
		name, err := c.sentFolderName(conn, folder, true)
		if err != nil {
			return err
		}
		flags := []imap.Flag{imap.FlagSeen}
		if unconfirmed {
			flags = append(flags, unconfirmedFlags...)
		}
		uid, err := conn.append(name, raw, flags, date)
		if err != nil {
			if mailerr.KindOf(err) == mailerr.NotFound {
				return mailerr.Wrap(mailerr.NotFound, err, "the Sent folder "+quote(name)+" does not exist").About(mailerr.SubjectFolder)
			}
			return err
		}
		out = &SentCopy{Folder: name, UID: uint32(uid)}
		return nil
	})
	return out, err
}
