package mailbox

// The Sent folder as the record of what was sent, for sending at most once
// per idempotency key across any number of gateway processes: the copy is
// filed before the message goes out, marked with SendingKeyword, and the
// copy with the lowest UID among those with the same Message-ID is the one
// attempt that may send. IMAP gives every process the same view: UIDs
// grow in the order appends complete, and each process searches only after
// its own append completed, so the lowest UID is settled by then.

import (
	"bytes"
	"context"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// SendingKeyword marks a Sent copy filed before its message went out and
// not yet confirmed as sent.
const SendingKeyword = "$MailboxMcpSending"

// UnconfirmedKeyword marks a Sent copy whose message may or may not have
// gone out: the whole message was transmitted and the server's answer was
// lost. Such a copy is also \Flagged, so that a person sees it in any mail
// app and checks with the recipients.
const UnconfirmedKeyword = "$MailboxMcpUnconfirmed"

// unconfirmedFlags are the flags of a copy whose send is unconfirmed.
var unconfirmedFlags = []imap.Flag{imap.FlagFlagged, UnconfirmedKeyword}

// maxSentCandidates bounds the copies read for one Message-ID: more means
// something other than the gateway files copies with it.
const maxSentCandidates = 20

// SentRecord is a copy in the Sent folder of a message with a given
// Message-ID.
type SentRecord struct {
	Folder      string
	UID         uint32
	UIDValidity uint32
	// Filed is the copy's internal date: when the attempt that filed it
	// began.
	Filed time.Time
	// Sending says the copy is still marked SendingKeyword: its message is
	// being sent, or the attempt was interrupted.
	Sending bool
	// Unconfirmed says the copy is marked UnconfirmedKeyword: the attempt
	// transmitted the whole message and lost the server's answer.
	Unconfirmed       bool
	MessageID         string
	Date              time.Time // the Date header
	From, To, Cc, Bcc []Address
	Subject           string
	InReplyTo         string
	References, Tags  []string
}

// Claim is the outcome of ClaimSent.
type Claim struct {
	// Won says this attempt's copy is the earliest: it may send, and must
	// then call FinishSent (sent) or WithdrawSent (not sent).
	Won bool
	// Mine is this attempt's copy when Won.
	Mine *SentRecord
	// Earlier is the earliest copy when not Won: the message an earlier
	// attempt sent or is sending. This attempt's copy was removed.
	Earlier *SentRecord
	// Warning says what went wrong tidying up (a losing copy that could
	// not be removed).
	Warning string
}

// FindSent returns the earliest copy in the Sent folder with Message-ID
// id, or nil when there is none. folder is the configured Sent folder (""
// finds it).
func (c *Client) FindSent(ctx context.Context, creds credentials.Credentials, folder, id string) (*SentRecord, error) {
	var out *SentRecord
	err := c.do(ctx, creds, "looking for the message in the Sent folder", true, func(ctx context.Context, conn *Conn) error {
		name, err := c.sentFolderName(conn, folder, false)
		if err != nil {
			return err
		}
		if _, err := conn.examine(name); err != nil {
			return err
		}
		recs, err := sentCopies(conn, name, id)
		if err != nil {
			return err
		}
		if len(recs) > 0 {
			out = recs[0]
		}
		return nil
	})
	return out, err
}

// ClaimSent files raw (the Sent copy of a message with Message-ID id) in
// the Sent folder with \Seen and SendingKeyword, then finds every copy
// with that Message-ID: when this one has the lowest UID it has won and
// may send; otherwise it is removed again (UID EXPUNGE of exactly its UID)
// and the earliest copy returned. It needs UIDPLUS to know its own copy.
func (c *Client) ClaimSent(ctx context.Context, creds credentials.Credentials, folder string, raw []byte, id string, date time.Time) (*Claim, error) {
	var out *Claim
	err := c.do(ctx, creds, "filing the message in the Sent folder", false, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		if !cl.Caps().Has(imap.CapUIDPlus) {
			return mailerr.New(mailerr.Permanent, "the mail server lacks UIDPLUS, which sending at most once per key needs (to tell this attempt's Sent copy apart); nothing was sent")
		}
		name, err := c.sentFolderName(conn, folder, true)
		if err != nil {
			return err
		}
		uid, err := conn.append(name, raw, []imap.Flag{imap.FlagSeen, SendingKeyword}, date)
		if err != nil {
			return err
		}
		if uid == 0 {
			return mailerr.New(mailerr.Internal, "the mail server gave no UID for the Sent copy")
		}
		mine := &SentRecord{Folder: name, UID: uint32(uid), Filed: date, Sending: true, MessageID: id}
		recs, err := func() ([]*SentRecord, error) {
			if err := conn.selectRW(name); err != nil {
				return nil, err
			}
			mine.UIDValidity = conn.uidValidity
			return sentCopies(conn, name, id)
		}()
		if err != nil {
			// Undecided, so nothing will be sent: take the copy back if the
			// connection still works, or a retry would find it marked.
			if conn.selected == name && conn.selectedRW {
				_ = expungeOne(cl, name, uid)
			}
			return err
		}
		out = &Claim{}
		switch {
		case len(recs) == 0:
			// The server's search does not find what was just filed: the
			// copy cannot serve as the record, so it goes again.
			if err := expungeOne(cl, name, uid); err != nil {
				c.log.WarnContext(ctx, "could not remove an unfindable Sent copy", "err", err)
			}
			out = nil
			return mailerr.New(mailerr.Permanent, "the mail server's search does not find the copy just filed in the Sent folder, so it cannot record what was sent; nothing was sent")
		case recs[0].UID == mine.UID && !recs[0].Sending:
			// The server dropped the keyword (it keeps no keywords in this
			// folder): a send under way would look finished to a retry.
			if err := expungeOne(cl, name, uid); err != nil {
				c.log.WarnContext(ctx, "could not remove an unmarked Sent copy", "err", err)
			}
			out = nil
			return mailerr.New(mailerr.Permanent, "the mail server does not keep keywords on messages in the Sent folder, which sending at most once per key needs (to mark a send under way); nothing was sent")
		case recs[0].UID == mine.UID:
			out.Won, out.Mine = true, recs[0]
		default:
			out.Earlier = recs[0]
			if err := expungeOne(cl, name, uid); err != nil {
				c.log.WarnContext(ctx, "could not remove a duplicate Sent copy", "err", err)
				out.Warning = "a second copy filed in the Sent folder (UID " + strconv.FormatUint(uint64(mine.UID), 10) + ") could not be removed: " + mailerr.Message(err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FinishSent clears SendingKeyword on rec: its message went out.
func (c *Client) FinishSent(ctx context.Context, creds credentials.Credentials, rec *SentRecord) error {
	return c.onSentCopy(ctx, creds, rec, "confirming the Sent copy", func(cl *imapclient.Client) error {
		err := cl.Store(imap.UIDSetNum(imap.UID(rec.UID)), &imap.StoreFlags{Op: imap.StoreFlagsDel, Silent: true, Flags: []imap.Flag{SendingKeyword}}, nil).Close()
		if err != nil {
			return imapError(err, rec.Folder)
		}
		return nil
	})
}

// MarkUnconfirmed marks rec \Flagged and UnconfirmedKeyword: its message
// was transmitted whole and the server's answer was lost. SendingKeyword
// stays, so that no retry with its Message-ID sends it again.
func (c *Client) MarkUnconfirmed(ctx context.Context, creds credentials.Credentials, rec *SentRecord) error {
	return c.onSentCopy(ctx, creds, rec, "flagging the Sent copy for checking", func(cl *imapclient.Client) error {
		err := cl.Store(imap.UIDSetNum(imap.UID(rec.UID)), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: unconfirmedFlags}, nil).Close()
		if err != nil {
			return imapError(err, rec.Folder)
		}
		return nil
	})
}

// WithdrawSent removes rec (UID EXPUNGE of exactly its UID): its message
// was not sent, so a later attempt with the same Message-ID may send.
func (c *Client) WithdrawSent(ctx context.Context, creds credentials.Credentials, rec *SentRecord) error {
	return c.onSentCopy(ctx, creds, rec, "withdrawing the Sent copy", func(cl *imapclient.Client) error {
		return expungeOne(cl, rec.Folder, imap.UID(rec.UID))
	})
}

func (c *Client) onSentCopy(ctx context.Context, creds credentials.Credentials, rec *SentRecord, step string, op func(*imapclient.Client) error) error {
	return c.do(ctx, creds, step, false, func(ctx context.Context, conn *Conn) error {
		if err := conn.selectRWFresh(rec.Folder); err != nil {
			return err
		}
		if rec.UIDValidity != 0 && conn.uidValidity != rec.UIDValidity {
			return mailerr.Newf(mailerr.NotFound, "folder %s was rebuilt on the server (UIDVALIDITY changed)", quote(rec.Folder))
		}
		return op(conn.client())
	})
}

// sentFolderName is the configured Sent folder, else the one found.
func (c *Client) sentFolderName(conn *Conn, folder string, create bool) (string, error) {
	if strings.EqualFold(folder, NoSentFolder) {
		return "", mailerr.New(mailerr.BadInput, "saving a copy of sent mail is turned off (SENT_FOLDER=none)")
	}
	if folder != "" {
		return conn.place(folder), nil
	}
	name, err := conn.sentFolder()
	if err != nil {
		return "", err
	}
	if name == "" && create {
		// A new mailbox (Cyrus and Courier start with INBOX alone): make
		// one, as a mail app does on its first send.
		return c.createSpecial(conn, imap.MailboxAttrSent, "Sent")
	}
	if name == "" {
		return "", mailerr.New(mailerr.NotFound, "the mailbox has no Sent folder (none marked \\Sent and none with a usual name); the operator can name one with SENT_FOLDER")
	}
	return name, nil
}

// sentHeaders are read raw: the envelope has neither References nor tags.
var sentHeaders = []string{"Message-ID", "References", mailmsg.TagsHeader}

// sentCopies returns the copies with Message-ID id in folder, the selected
// mailbox, lowest UID first; those marked \Deleted (being removed) do not
// count. A waited NOOP first makes the server show what other sessions
// filed: a pipelined one does not refresh Dovecot's view.
func sentCopies(conn *Conn, folder, id string) ([]*SentRecord, error) {
	cl := conn.client()
	if err := cl.Noop().Wait(); err != nil {
		return nil, imapError(err, folder)
	}
	uids, err := searchMessageID(cl, id)
	if err != nil || len(uids) == 0 {
		return nil, err
	}
	slices.Sort(uids)
	uids = uids[:min(len(uids), maxSentCandidates)]
	sec := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: sentHeaders, Peek: true}
	bufs, err := cl.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{
		UID: true, Flags: true, InternalDate: true, Envelope: true, BodySection: []*imap.FetchItemBodySection{sec},
	}).Collect()
	if err != nil {
		return nil, imapError(err, folder)
	}
	var out []*SentRecord
	for _, b := range bufs {
		if b.Envelope == nil || slices.Contains(b.Flags, imap.FlagDeleted) {
			continue
		}
		var h mail.Header
		if m, err := mail.ReadMessage(bytes.NewReader(append(bytes.TrimRight(b.FindBodySection(sec), "\r\n"), "\r\n\r\n"...))); err == nil {
			h = m.Header
		}
		if ids := msgIDs(h.Get("Message-ID")); len(ids) == 0 || ids[0] != id {
			continue // a substring match only
		}
		env := b.Envelope
		r := &SentRecord{
			Folder: folder, UID: uint32(b.UID), UIDValidity: conn.uidValidity, Filed: b.InternalDate,
			Sending:     hasFlag(b.Flags, SendingKeyword),
			Unconfirmed: hasFlag(b.Flags, UnconfirmedKeyword),
			MessageID:   id, Date: env.Date, Subject: mailmsg.SanitizeLine(env.Subject),
			From: addressesOf(env.From), To: addressesOf(env.To), Cc: addressesOf(env.Cc), Bcc: addressesOf(env.Bcc),
			References: msgIDs(h.Get("References")), Tags: mailmsg.ParseTags(h.Get(mailmsg.TagsHeader)),
		}
		if len(env.InReplyTo) > 0 {
			r.InReplyTo = env.InReplyTo[0]
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *SentRecord) int { return int(int64(a.UID) - int64(b.UID)) })
	return out, nil
}

// hasFlag says whether flags hold f (keywords compare case-blind).
func hasFlag(flags []imap.Flag, f imap.Flag) bool {
	return slices.ContainsFunc(flags, func(x imap.Flag) bool { return strings.EqualFold(string(x), string(f)) })
}

// Located is where a message is.
type Located struct {
	Folder      string
	UID         uint32
	UIDValidity uint32
}

// FindMessageID finds the one message in folder whose Message-ID is id;
// nil when there is none, or more than one (it would be a guess).
func (c *Client) FindMessageID(ctx context.Context, creds credentials.Credentials, folder, id string) (*Located, error) {
	folder, err := c.folderArg(ctx, creds, folder)
	if err != nil {
		return nil, err
	}
	var out *Located
	err = c.do(ctx, creds, "looking for a message by its Message-ID", true, func(ctx context.Context, conn *Conn) error {
		if _, err := conn.examineFresh(folder); err != nil {
			return err
		}
		uids, err := searchMessageID(conn.client(), id)
		if err != nil || len(uids) == 0 {
			return err
		}
		sec := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"Message-ID"}, Peek: true}
		bufs, err := conn.client().Fetch(imap.UIDSetNum(uids[:min(len(uids), maxSentCandidates)]...), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
		if err != nil {
			return imapError(err, folder)
		}
		for _, b := range bufs {
			if ids := msgIDs(headerValue(b.FindBodySection(sec), "Message-ID")); len(ids) == 0 || ids[0] != id {
				continue
			}
			if out != nil {
				out = nil // more than one
				return nil
			}
			out = &Located{Folder: folder, UID: uint32(b.UID), UIDValidity: conn.uidValidity}
		}
		return nil
	})
	return out, err
}

// headerValue is the value of field in a raw header block, "" when absent.
func headerValue(block []byte, field string) string {
	m, err := mail.ReadMessage(bytes.NewReader(append(bytes.TrimRight(block, "\r\n"), "\r\n\r\n"...)))
	if err != nil {
		return ""
	}
	return m.Header.Get(field)
}
