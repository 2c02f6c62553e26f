package mailbox

// Claims with an idempotency key (ConsumeOptions.IdempotencyKey): a retry with the same key, from any gateway, returns the batch the first
// call took, even when that call's answer was lost after its STORE.
//
// Two records make that possible without keeping anything on the gateway:
//
//   - Before the STORE, a record message in the claims folder (a keyed
//     message, KeyHeader "claim/HASH", like the agents' state store) lists
//     the folder, its UIDVALIDITY and the candidate UIDs.
//   - The STORE (or one right behind it) puts the key's keyword on the
//     messages it took: $MbxClaimNN, NN one of 32 slots chosen by the key's
//     hash. Keywords cannot be one per key: Cyrus holds at most about a
//     hundred keywords per mailbox and never frees one ("NO Too many user
//     flags in mailbox"), so the slot keyword says "taken by a key of this
//     slot" and the record says which messages this key could have taken.
//
// A retry finds the records of its key and returns the candidates that are
// \Seen and carry its slot keyword. If none carries it but some are \Seen
// (the answer was lost between the claim and the keyword, on a server
// where they are two STOREs), those are returned, named in AtLeastOnce:
// another consumer may have taken some of them. Records older than a day
// are removed when a new one is written.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// MaxIdempotencyKey is the longest idempotency key.
const MaxIdempotencyKey = 200

// claimSlots is how many keywords claims with a key use.
const claimSlots = 32

// claimRecordsFor is how long claim records are kept.
const claimRecordsFor = 24 * time.Hour

// claimKey is an idempotency key as the claim records it.
type claimKey struct {
	record  string    // KeyHeader value of its records
	keyword imap.Flag // its slot keyword
	folder  string    // the claims folder (set by Consume)
}

func newClaimKey(key string) (*claimKey, error) {
	if len(key) > MaxIdempotencyKey {
		return nil, mailerr.Newf(mailerr.BadInput, "idempotency_key must be 1 to %d characters long (got %d)", MaxIdempotencyKey, len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return nil, mailerr.Newf(mailerr.BadInput, "idempotency_key may only hold printable ASCII characters (space to ~); character %d is not", i+1)
		}
	}
	sum := sha256.Sum256([]byte("mailbox-mcp claim v1\x00" + key))
	return &claimKey{
		record:  "claim/" + hex.EncodeToString(sum[:16]),
		keyword: imap.Flag(fmt.Sprintf("$MbxClaim%02d", int(sum[16])%claimSlots)),
	}, nil
}

// ClaimsFolderName is the leaf of the claims folder under RecordsRoot ('.'
// is mapped as the agents' folders map it: Maildir++ refuses it).
const ClaimsFolderName = "\u2024claims"

// recordsFolder is the folder of the claim records: under the configured
// root (AGENTS_FOLDER), in the personal namespace.
func (c *Client) recordsFolder(srv *Server) (string, error) {
	root := c.cfg.RecordsRoot
	if strings.TrimSpace(root) == "" {
		root = "Agents"
	}
	sep := "-"
	if srv.Namespace.Delim != 0 {
		sep = string(srv.Namespace.Delim)
	}
	return srv.Namespace.Place(root) + sep + ClaimsFolderName, nil
}

// claimRecord is the body of a record message.
type claimRecord struct {
	Folder      string   `json:"folder"`
	UIDValidity uint32   `json:"uid_validity"`
	UIDs        []uint32 `json:"uids"`
	Keyword     string   `json:"keyword"`
	At          string   `json:"at"`
	// Done: written when the claim is decided, UIDs what it took (only
	// where the keyword follows the claim in a STORE of its own).
	Done bool `json:"done,omitempty"`
}

// recordClaim writes the record of a claim with a key, before its STORE
// (nothing without a key).
func (c *Client) recordClaim(ctx context.Context, creds credentials.Credentials, sp claimSpec, uidValidity uint32, uids []imap.UID) error {
	return c.writeRecord(ctx, creds, sp, uidValidity, uids, false)
}

// writeRecord writes a record of a claim with a key (nothing without).
func (c *Client) writeRecord(ctx context.Context, creds credentials.Credentials, sp claimSpec, uidValidity uint32, uids []imap.UID, done bool) error {
	if sp.key == nil {
		return nil
	}
	rec := claimRecord{Folder: sp.folder, UIDValidity: uidValidity, Keyword: string(sp.key.keyword), At: time.Now().UTC().Format(time.RFC3339), Done: done}
	for _, u := range uids {
		rec.UIDs = append(rec.UIDs, uint32(u))
	}
	body, _ := json.Marshal(rec)
	var b strings.Builder
	b.WriteString("From: mailbox-mcp <claims@mailbox-mcp.invalid>\r\n")
	b.WriteString("Subject: claim record\r\n")
	b.WriteString("Date: " + time.Now().UTC().Format(time.RFC1123Z) + "\r\n")
	b.WriteString(KeyHeader + ": " + sp.key.record + "\r\n")
	b.WriteString("Content-Type: application/json\r\n\r\n")
	b.Write(body)
	b.WriteString("\r\n")
	raw := []byte(b.String())
	_, err := c.AppendKeyed(ctx, creds, sp.key.folder, raw)
	if mailerr.KindOf(err) == mailerr.NotFound {
		if _, err = c.EnsureFolder(ctx, creds, sp.key.folder); err == nil {
			_, err = c.AppendKeyed(ctx, creds, sp.key.folder, raw)
		}
	}
	if err != nil {
		return err
	}
	c.pruneRecords(ctx, creds, sp.key.folder)
	return nil
}

// pruneRecords removes claim records older than claimRecordsFor, at most
// once an hour per Client; failures are only logged.
func (c *Client) pruneRecords(ctx context.Context, creds credentials.Credentials, folder string) {
	now := time.Now()
	if last := c.recordsPruned.Load(); last != 0 && now.Sub(time.Unix(0, last)) < time.Hour {
		return
	}
	c.recordsPruned.Store(now.UnixNano())
	err := c.do(ctx, creds, "removing old claim records", false, func(ctx context.Context, conn *Conn) error {
		if _, err := conn.openRW(folder); err != nil {
			return err
		}
		cl := conn.client()
		data, err := cl.UIDSearch(&imap.SearchCriteria{Before: now.Add(-claimRecordsFor)}, nil).Wait()
		if err != nil {
			return imapError(err, folder)
		}
		if uids := data.AllUIDs(); len(uids) > 0 && cl.Caps().Has(imap.CapUIDPlus) {
			return deleteExactly(cl, imap.UIDSetNum(uids...))
		}
		return nil
	})
	if err != nil {
		c.log.DebugContext(ctx, "old claim records stay", "err", err)
	}
}

// replay returns the batch an earlier call with the same key took from
// folder, or nil when there was none.
func (c *Client) replay(ctx context.Context, creds credentials.Credentials, srv *Server, folder string, key *claimKey, maxChars int) (*Consumed, error) {
	recs, err := c.FindKeyed(ctx, creds, key.folder, key.record, false, true)
	if mailerr.KindOf(err) == mailerr.NotFound && mailerr.SubjectOf(err) == mailerr.SubjectFolder {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// FindKeyed gives the body of the newest record only: each attempt of
	// a claim writes one, so the others are read here.
	var cands, done []imap.UID
	var uv uint32
	found, decided := false, false
	for _, r := range recs {
		raw := r.Raw
		if raw == nil {
			raw, err = c.keyedBody(ctx, creds, key.folder, r.UID)
			if err != nil {
				return nil, err
			}
		}
		var rec claimRecord
		if i := strings.Index(string(raw), "\r\n\r\n"); i < 0 || json.Unmarshal([]byte(strings.TrimSpace(string(raw[i+4:]))), &rec) != nil {
			continue
		}
		if rec.Folder != folder {
			continue
		}
		found, uv = true, rec.UIDValidity
		for _, u := range rec.UIDs {
			if rec.Done {
				decided = true
				done = append(done, imap.UID(u))
			} else if !slices.Contains(cands, imap.UID(u)) {
				cands = append(cands, imap.UID(u))
			}
		}
	}
	// Decided: exactly what it took. Else the candidates, of which the
	// STORE took those with the keyword (and with the keyword in a STORE
	// of its own, perhaps more: below).
	exact := decided || srv.storeFlags() == flagsEchoed
	if decided {
		cands = done
	}
	if !found {
		return nil, nil
	}
	slices.Sort(cands)
	out := &Consumed{Folder: folder, UIDValidity: uv, Messages: []Message{}, Repeated: true, ExactlyOnce: true}
	err = c.doIn(ctx, creds, folder, "reading the messages claimed before", func(ctx context.Context, conn *Conn) error {
		if _, err := conn.examineFresh(folder); err != nil {
			return err
		}
		if conn.uidValidity != uv {
			return uidValidityChanged(folder)
		}
		if len(cands) == 0 {
			return nil
		}
		flags, err := fetchFlags(conn.client(), cands)
		if err != nil {
			return err
		}
		kw := strings.ToLower(string(key.keyword))
		var marked, seen []imap.UID
		for _, u := range cands {
			f := flags[uint32(u)]
			if slices.Contains(f, `\seen`) {
				seen = append(seen, u)
				if slices.Contains(f, kw) {
					marked = append(marked, u)
				}
			}
		}
		take := marked
		if !exact && len(marked) == 0 && len(seen) > 0 {
			// Lost between the claim and its keyword: what is \Seen may
			// be this claim's, or another consumer's.
			take = seen
			for _, u := range seen {
				out.AtLeastOnce = append(out.AtLeastOnce, uint32(u))
			}
			out.ExactlyOnce = false
		}
		return readClaimed(ctx, c, conn, folder, take, maxChars, out, nil, nil)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// keyedBody fetches the whole of message uid of folder.
func (c *Client) keyedBody(ctx context.Context, creds credentials.Credentials, folder string, uid uint32) ([]byte, error) {
	var raw []byte
	err := c.doIn(ctx, creds, folder, "reading a claim record", func(ctx context.Context, conn *Conn) error {
		if _, err := conn.examine(folder); err != nil {
			return err
		}
		whole := &imap.FetchItemBodySection{Peek: true}
		bufs, err := conn.client().Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{whole}}).Collect()
		if err != nil {
			return imapError(err, folder)
		}
		for _, b := range bufs {
			raw = b.FindBodySection(whole)
		}
		return nil
	})
	return raw, err
}

// storeFlags is what FLAGS in a STORE's answer mean on this server.
func (s *Server) storeFlags() flagsInStore { return flagsInStore(s.flagsMode.Load()) }

// learnStoreFlags learns from a claim's answer that the server reports its
// own change without FLAGS (a FETCH without FLAGS can only be its own), if
// its name did not say so already.
func (c *Client) learnStoreFlags(conn *Conn, a storeAnswer) {
	s := conn.host.server()
	if s == nil || s.storeFlags() != flagsUnknown {
		return
	}
	for _, f := range a.fetched {
		if !f.flags {
			s.flagsMode.CompareAndSwap(int32(flagsUnknown), int32(flagsFromOthers))
			return
		}
	}
}

// storeFlagsOf is what FLAGS in a STORE's answer mean for a server that
// calls itself name (ID, RFC 2971): known for Dovecot and Cyrus.
func storeFlagsOf(name string) flagsInStore {
	switch n := strings.ToLower(name); {
	case strings.Contains(n, "cyrus"):
		return flagsEchoed
	case strings.Contains(n, "dovecot"):
		return flagsFromOthers
	}
	return flagsUnknown
}
