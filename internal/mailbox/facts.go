package mailbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Facts are what a person was shown of a folder before approving a
// change that cannot be undone, kept so that the change goes ahead only
// while they still hold: the folder's identity (UIDVALIDITY: a folder
// deleted and made again under the same name has another), and either its
// size and last change (before the folder is deleted) or exactly which
// messages (before some are deleted: their UIDs, Message-IDs and sizes,
// as a digest).
type Facts struct {
	UIDValidity uint32 `json:"v"`
	Messages    uint32 `json:"n,omitempty"` // the folder's messages
	ModSeq      uint64 `json:"m,omitempty"` // HIGHESTMODSEQ, where the server has CONDSTORE
	UIDNext     uint32 `json:"u,omitempty"` // where it has not
	Digest      string `json:"h,omitempty"` // the messages: messageDigest
}

// errChanged is the refusal when the facts a person approved no longer
// hold.
func errChanged(folder, what string) error {
	return mailerr.Newf(mailerr.BadInput, "folder %s changed since the person approved (%s): nothing was done; ask again, so that they see it as it is now", quote(folder), what)
}

var folderFactsStatus = &imap.StatusOptions{NumMessages: true, UIDValidity: true, UIDNext: true}

// FolderFacts reads folder's facts, as the approval of its deletion shows
// and holds them.
func (c *Client) FolderFacts(ctx context.Context, creds credentials.Credentials, folder string) (*Facts, error) {
	var out *Facts
	err := c.do(ctx, creds, "looking at the folder", true, func(ctx context.Context, conn *Conn) error {
		srv, err := c.learn(conn)
		if err != nil {
			return err
		}
		out, err = folderFacts(conn, srv.Namespace.Place(strings.TrimSpace(folder)))
		return err
	})
	return out, err
}

func folderFacts(conn *Conn, folder string) (*Facts, error) {
	cl := conn.client()
	opts := *folderFactsStatus
	opts.HighestModSeq = cl.Caps().Has(imap.CapCondStore)
	sd, err := cl.Status(folder, &opts).Wait()
	if err != nil {
		return nil, conn.folderError(err, folder, "look at")
	}
	f := &Facts{UIDValidity: sd.UIDValidity, ModSeq: sd.HighestModSeq}
	if sd.NumMessages != nil {
		f.Messages = *sd.NumMessages
	}
	if f.ModSeq == 0 {
		f.UIDNext = uint32(sd.UIDNext)
	}
	return f, nil
}

// checkFolder refuses unless folder still has the facts want.
func checkFolder(conn *Conn, folder string, want *Facts) error {
	if want == nil {
		return nil
	}
	now, err := folderFacts(conn, folder)
	if err != nil {
		return err
	}
	switch {
	case now.UIDValidity != want.UIDValidity:
		return errChanged(folder, "it was deleted and made again, or replaced")
	case now.Messages != want.Messages:
		return errChanged(folder, fmt.Sprintf("it held %d messages, and now holds %d", want.Messages, now.Messages))
	case want.ModSeq != 0 && now.ModSeq != want.ModSeq, want.ModSeq == 0 && now.UIDNext != want.UIDNext:
		return errChanged(folder, "messages were added, changed or removed")
	}
	return nil
}

// MessageFacts returns the summaries of the messages uids of folder that
// exist, newest first, and the facts that name exactly them, without
// changing anything: what a person is shown before approving their
// deletion.
func (c *Client) MessageFacts(ctx context.Context, creds credentials.Credentials, folder string, uids []uint32) ([]Summary, *Facts, error) {
	folder, err := c.folderArg(ctx, creds, folder)
	if err != nil {
		return nil, nil, err
	}
	set, err := checkUIDs(uids)
	if err != nil {
		return nil, nil, err
	}
	var out []Summary
	var facts *Facts
	err = c.doIn(ctx, creds, folder, "reading the messages", func(ctx context.Context, conn *Conn) error {
		if _, err := conn.examine(folder); err != nil {
			return err
		}
		cl := conn.client()
		msgs, err := fetchSummaries(cl, imap.UIDSetNum(set...))
		if err != nil {
			return err
		}
		digest, err := messageDigest(cl, set)
		if err != nil {
			return imapError(err, folder)
		}
		out, facts = newestFirst(msgs, len(msgs)), &Facts{UIDValidity: conn.uidValidity, Digest: digest}
		return nil
	})
	return out, facts, err
}

// checkMessages refuses unless the selected folder is still the one want
// was read from and, when want names messages, set is exactly those.
func checkMessages(conn *Conn, folder string, set []imap.UID, want *Facts) error {
	if want == nil {
		return nil
	}
	cl := conn.client()
	if conn.uidValidity != want.UIDValidity {
		return errChanged(folder, "it was deleted and made again, or replaced")
	}
	if want.Digest == "" {
		return nil
	}
	digest, err := messageDigest(cl, set)
	if err != nil {
		return imapError(err, folder)
	}
	if digest != want.Digest {
		return errChanged(folder, "the messages are not the ones shown")
	}
	return nil
}

// messageDigest names the messages of set in the selected folder: each
// one's UID, Message-ID and size, in UID order.
func messageDigest(cl *imapclient.Client, set []imap.UID) (string, error) {
	msgs, err := cl.Fetch(imap.UIDSetNum(set...), &imap.FetchOptions{UID: true, Envelope: true, RFC822Size: true}).Collect()
	if err != nil {
		return "", err
	}
	slices.SortFunc(msgs, func(a, b *imapclient.FetchMessageBuffer) int { return int(a.UID) - int(b.UID) })
	h := sha256.New()
	for _, m := range msgs {
		if m.UID == 0 {
			continue // another session's flag change
		}
		id := ""
		if m.Envelope != nil {
			id = m.Envelope.MessageID
		}
		fmt.Fprintf(h, "%d\x00%s\x00%d\n", m.UID, id, m.RFC822Size)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// UIDDigest names a list of UIDs (in any order), for facts that name
// messages without reading them (the agent folders' prune).
func UIDDigest(uids []uint32) string {
	s := slices.Clone(uids)
	slices.Sort(s)
	h := sha256.New()
	for _, u := range s {
		fmt.Fprintf(h, "%d\n", u)
	}
	return hex.EncodeToString(h.Sum(nil))
}
