package outbox

// Sending at most once per idempotency key, on any number of gateway
// replicas. The Message-ID is derived from the key (an HMAC under a key
// derived from the server's secret, over the canonical account and the
// key), so every replica makes the same one and two users never collide.
// The Sent folder is the record and the lock: the copy is filed before the
// message goes out, marked mailbox.SendingKeyword, and of several copies
// with the same Message-ID only the one with the lowest UID sends
// (mailbox.ClaimSent). Its mark is cleared once the server accepted the
// message, or the copy is withdrawn when nothing was sent, so that a retry
// can send. Without a Sent folder there is no record, and a key is refused
// rather than silently not honoured.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// MaxIdempotencyKey is the longest idempotency key, in bytes.
const MaxIdempotencyKey = 200

// DefaultMaxSendTime is Config.MaxSendTime's default (TOOL_TIMEOUT's).
const DefaultMaxSendTime = 60 * time.Second

// staleMargin is added to MaxSendTime before a copy still marked as being
// sent counts as interrupted: clocks of replicas differ a little.
const staleMargin = time.Minute

// cleanupTimeout bounds the bookkeeping after a send attempt (clearing the
// mark, withdrawing the copy): it runs even when the call's own deadline
// has passed.
const cleanupTimeout = 15 * time.Second

// idempotencyLabel separates the Message-ID key from every other use of
// the server's secret.
const idempotencyLabel = "mailbox-mcp idempotency message-id v1"

// CheckIdempotencyKey refuses what is not a key: 1 to 200 printable ASCII
// characters (space to tilde).
func CheckIdempotencyKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKey {
		return mailerr.Newf(mailerr.BadInput, "idempotency_key must be 1 to %d characters long (got %d)", MaxIdempotencyKey, len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return mailerr.Newf(mailerr.BadInput, "idempotency_key may only hold printable ASCII characters (space to ~); character %d is not", i+1)
		}
	}
	return nil
}

// idempotentID is the Message-ID (without brackets) for key sent by creds'
// user: hex of HMAC-SHA256(K, account NUL key), K = HMAC-SHA256(secret,
// label), at the account's domain.
func (o *Outbox) idempotentID(creds credentials.Credentials, key string) (string, error) {
	if err := CheckIdempotencyKey(key); err != nil {
		return "", err
	}
	if len(o.cfg.IdempotencySecret) == 0 {
		return "", mailerr.New(mailerr.Internal, "idempotency_key cannot be used: the gateway has no secret to derive message ids from")
	}
	k := hmac.New(sha256.New, o.cfg.IdempotencySecret)
	k.Write([]byte(idempotencyLabel))
	account := creds.AccountKey()
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(account))
	m.Write([]byte{0})
	m.Write([]byte(key))
	domain := "idempotent.mailbox-mcp.invalid"
	if _, d, ok := strings.Cut(account, "@"); ok && mailmsg.ValidMessageID("x@"+d) && !strings.ContainsAny(d, "@\"\\") {
		domain = d
	}
	return hex.EncodeToString(m.Sum(nil)[:20]) + "@" + domain, nil
}

// prior is the earlier send with key, when there was one: a result with
// Duplicate set, or an error when it is still under way or was
// interrupted. (nil, nil) means none, or no key. It runs before anything
// else a send does, so a retry is answered even when what it names (a
// draft it sent and removed) is gone.
func (o *Outbox) prior(ctx context.Context, creds credentials.Credentials, key string) (*Result, error) {
	if key == "" {
		return nil, nil
	}
	id, err := o.idempotentID(creds, key)
	if err != nil {
		return nil, err
	}
	if err := o.recordable(); err != nil {
		return nil, err
	}
	rec, err := o.mailbox.FindSent(ctx, creds, o.cfg.SentFolder, id)
	if err != nil {
		return nil, noRecord(err)
	}
	if rec == nil {
		return nil, nil
	}
	return o.earlier(rec, key)
}

// recordable refuses a key when the gateway files no Sent copy.
func (o *Outbox) recordable() error {
	if strings.EqualFold(o.cfg.SentFolder, mailbox.NoSentFolder) {
		return mailerr.New(mailerr.BadInput, "idempotency_key cannot be honoured on this gateway: it saves no copy of sent mail (SENT_FOLDER=none), and the Sent folder is the record of what was sent; nothing was sent (send without idempotency_key)")
	}
	return nil
}

// noRecord explains a failure to use the Sent folder as the record, which
// comes before anything is sent: it says so.
func noRecord(err error) error {
	if mailerr.KindOf(err) == mailerr.NotFound && mailerr.SubjectOf(err) != mailerr.SubjectMessage {
		return mailerr.Wrap(mailerr.NotFound, err, mailerr.Message(err)+"; idempotency_key needs that folder as the record of what was sent, so nothing was sent (send without idempotency_key)")
	}
	if !strings.Contains(mailerr.Message(err), "nothing was sent") {
		return withFact(err, "; nothing was sent")
	}
	return err
}

// withFact is err with fact added to its message; its kind, step, subject
// and cause stay as they were.
func withFact(err error, fact string) error {
	var me *mailerr.Error
	if !errors.As(err, &me) {
		return mailerr.Wrap(mailerr.KindOf(err), err, mailerr.Message(err)+fact)
	}
	c := *me
	c.Msg += fact
	return &c
}

// earlier answers a send whose key was used before: the message sent then
// (Duplicate), or an error saying what is known of an attempt that has
// not recorded a confirmed send: its answer was lost (the copy is marked
// unconfirmed), it is running in this process, it has not recorded its
// outcome yet (another replica, or interrupted), or it is older than any
// send can take (interrupted).
func (o *Outbox) earlier(rec *mailbox.SentRecord, key string) (*Result, error) {
	if rec.Sending {
		started := rec.Filed.UTC().Format(time.RFC3339)
		stale := rec.Filed.Add(o.cfg.MaxSendTime + staleMargin)
		switch {
		case rec.Unconfirmed:
			return nil, mailerr.Newf(mailerr.Permanent, "a send with this idempotency_key (Message-ID <%s>, begun %s) transmitted the whole message, but the mail server's answer was lost: it may or may not have been delivered. This call sent nothing; its copy is UID %d in %s, flagged for checking. Check with the recipients before sending it again with a new idempotency_key",
				rec.MessageID, started, rec.UID, rec.Folder)
		case o.flights.running(rec.MessageID):
			return nil, mailerr.Newf(mailerr.Temporary, "a send with this idempotency_key (Message-ID <%s>, begun %s) is under way in another request on this gateway; this call sent nothing. Call again with the same idempotency_key to learn whether it went out",
				rec.MessageID, started)
		case time.Now().Before(stale):
			return nil, mailerr.Newf(mailerr.Temporary, "a send with this idempotency_key (Message-ID <%s>, begun %s) has not recorded its outcome, and no request on this gateway is running it: it is under way on another replica of the gateway, or it was interrupted before the mail server confirmed it. This call sent nothing; its copy is UID %d in %s. Call again with the same idempotency_key after %s to learn which",
				rec.MessageID, started, rec.UID, rec.Folder, stale.UTC().Format(time.RFC3339))
		}
		return nil, mailerr.Newf(mailerr.Permanent, "a send with this idempotency_key (Message-ID <%s>, begun %s) was interrupted before the mail server confirmed it: it may or may not have been delivered. This call sent nothing; its copy is UID %d in %s. Check with the recipients before sending it again with a new idempotency_key",
			rec.MessageID, started, rec.UID, rec.Folder)
	}
	res := &Result{
		MessageID: rec.MessageID, Date: rec.Date, Subject: rec.Subject,
		To: addressStrings(rec.To), Cc: addressStrings(rec.Cc), Bcc: addressStrings(rec.Bcc),
		Accepted: []string{}, InReplyTo: rec.InReplyTo, References: rec.References, Tags: rec.Tags,
		SentCopy:       SentCopy{Saved: true, Folder: rec.Folder, UID: rec.UID},
		IdempotencyKey: key, Duplicate: true,
		Warnings: []string{fmt.Sprintf("a message was already sent with this idempotency_key (at %s): this call sent nothing and describes that message", rec.Date.Format(time.RFC3339))},
	}
	if len(rec.From) > 0 {
		res.From = addressString(rec.From[0])
	}
	if res.To == nil {
		res.To = []string{}
	}
	return res, nil
}

// sendOnce sends d (dated, checked) at most once for key: it files the
// Sent copy marked as being sent, sends only if that copy is the earliest
// with the key's Message-ID, and then clears the mark (sent) or withdraws
// the copy (nothing sent). A send that may or may not have gone out keeps
// its mark, so a retry says so instead of sending again.
func (o *Outbox) sendOnce(ctx context.Context, creds credentials.Credentials, d mailmsg.Draft, rcpts []string, key string) (*Result, error) {
	id, err := o.idempotentID(creds, key)
	if err != nil {
		return nil, err
	}
	if err := o.recordable(); err != nil {
		return nil, err
	}
	d.MessageID = id
	raw, _, err := mailmsg.Compose(d)
	if err != nil {
		return nil, err
	}
	c := d
	c.SentCopy = true
	copyRaw, _, err := mailmsg.Compose(c)
	if err != nil {
		return nil, err
	}
	// From before its copy can be seen until the outcome is recorded, a
	// retry in this process knows that this attempt is running.
	defer o.flights.begin(id)()
	claim, err := o.mailbox.ClaimSent(ctx, creds, o.cfg.SentFolder, copyRaw, id, d.Date)
	if err != nil {
		return nil, noRecord(err)
	}
	if !claim.Won {
		res, err := o.earlier(claim.Earlier, key)
		if res != nil && claim.Warning != "" {
			res.Warnings = append(res.Warnings, claim.Warning)
		}
		return res, err
	}
	sent, err := o.submission.Send(ctx, creds, d.From.Email, rcpts, bytes.NewReader(raw))
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err != nil {
		if mayHaveBeenSent(err) {
			// Unknown outcome: the mark stays, so that no retry sends it
			// again, and the copy is flagged so that a retry (and a
			// person) knows the answer was lost.
			where := fmt.Sprintf("its copy is UID %d in %s", claim.Mine.UID, claim.Mine.Folder)
			if merr := o.mailbox.MarkUnconfirmed(cctx, creds, claim.Mine); merr != nil {
				o.log.WarnContext(ctx, "could not flag the Sent copy of an unconfirmed send", "err", merr)
				where += " (still marked as being sent: it could not be flagged for checking)"
			} else {
				where += ", flagged for checking"
			}
			return nil, withFact(err, "; "+where+"; a retry with the same idempotency_key will not send it again: it sends nothing and says what is known")
		}
		if werr := o.mailbox.WithdrawSent(cctx, creds, claim.Mine); werr != nil {
			o.log.WarnContext(ctx, "could not withdraw the Sent copy of a failed send", "err", werr)
		}
		return nil, err
	}
	res := sentResult(d, id, sent)
	res.IdempotencyKey = key
	res.SentCopy = SentCopy{Saved: true, Folder: claim.Mine.Folder, UID: claim.Mine.UID}
	if err := o.mailbox.FinishSent(cctx, creds, claim.Mine); err != nil {
		o.log.WarnContext(ctx, "could not clear the sending mark of the Sent copy", "err", err)
		res.Warnings = append(res.Warnings, "the Sent copy is still marked as being sent ("+mailbox.SendingKeyword+"): "+mailerr.Message(err)+"; a retry with the same idempotency_key will call this send interrupted rather than done")
	}
	return res, nil
}

// flights are the sends with an idempotency key running in this process,
// by Message-ID: what lets a retry tell "under way here" from "not
// recorded" (another replica, or an attempt that was interrupted).
type flights struct {
	mu  sync.Mutex
	ids map[string]int
}

// begin notes that a send of id runs, until the function it returns is
// called.
func (f *flights) begin(id string) (end func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ids == nil {
		f.ids = map[string]int{}
	}
	f.ids[id]++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.ids[id]--; f.ids[id] <= 0 {
			delete(f.ids, id)
		}
	}
}

func (f *flights) running(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ids[id] > 0
}

// mayHaveBeenSent says whether a failed submission may still have
// delivered the message: the whole message went out and no answer came
// (the submission layer says so in its message).
func mayHaveBeenSent(err error) bool {
	return strings.Contains(mailerr.Message(err), "may have been sent")
}

func addressStrings(as []mailbox.Address) []string {
	var out []string
	for _, a := range as {
		out = append(out, addressString(a))
	}
	return out
}

func addressString(a mailbox.Address) string {
	return display(mailmsg.Address{Name: a.Name, Email: a.Email})
}
