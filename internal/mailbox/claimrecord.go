package mailbox

// Claims with an idempotency key (ConsumeOptions.IdempotencyKey): a retry
// with the same key, from any gateway, returns the batch the first call
// took, even when that call's answer was lost after its STORE, and never
// another consumer's message.
//
// Three marks make that possible without keeping anything on the gateway:
//
//   - Before the STORE, a record message in the claims folder (a keyed
//     message, KeyHeader "claim/HASH", like the agents' state store) lists
//     the folder, its UIDVALIDITY and the candidate UIDs. Its body holds
//     the key's whole hash, which a retry checks before it believes the
//     record (the header is only what it searches by).
//   - The STORE that sets \Seen also sets the key's keyword, in the same
//     command on every server: $MbxClaimNN, NN one of 32 slots chosen by
//     the key's hash. Keywords cannot be one per key: Cyrus holds at most
//     about a hundred keywords per mailbox and never frees one ("NO Too
//     many user flags in mailbox"), so the slot keyword says "taken by a
//     key of this slot", never "taken by this key".
//   - Once the claim is decided, a second record (done) lists what it
//     took, and which of those at least once.
//
// A retry that finds a done record returns exactly that batch (those of it
// still \Seen with the keyword: the claimed messages a failed call put
// back are not). One that finds only the first record (the call ended
// between its STORE and its done record) returns the candidates that are
// \Seen with the keyword, less those another key's done record names: a
// key of the same slot may have taken some. Those it cannot prove its own
// (another key's claim of them undecided, or a server whose conditional
// STORE is not atomic, where a losing STORE still set the keyword) are
// named in AtLeastOnce: returned rather than left read, never claimed
// exactly. Records older than a day are removed when a new one is written.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

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
	full    string    // the key's whole hash, in its records' bodies
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
		full:    hex.EncodeToString(sum[:]),
		keyword: slotKeyword(sum),
	}, nil
}

// slotKeyword is the keyword of the slot a key's hash falls in.
func slotKeyword(sum [32]byte) imap.Flag {
	return imap.Flag(fmt.Sprintf("$MbxClaim%02d", int(sum[16])%claimSlots))
}

// claimFolderHeader names, in every record, the folder and UIDVALIDITY it
// is about (claimFolderTag), so that a retry finds the other keys' records
// of that folder.
const claimFolderHeader = "X-Mailbox-Claim-Folder"

// claimFolderTag is folder and uidValidity as claimFolderHeader holds them.
func claimFolderTag(folder string, uidValidity uint32) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", folder, uidValidity)))
	return hex.EncodeToString(sum[:16])
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
	// Key is the key's whole hash: a record whose Key is not the
	// retry's is not its own, whatever its header says.
	Key         string   `json:"key"`
	Folder      string   `json:"folder"`
	UIDValidity uint32   `json:"uid_validity"`
	UIDs        []uint32 `json:"uids"`
	Keyword     string   `json:"keyword"`
	At          string   `json:"at"`
	// Conditional: the STORE was conditional (CONDSTORE), so no other
	// consumer's STORE changed what it won.
	Conditional bool `json:"conditional,omitempty"`
	// Done: written when the claim is decided, UIDs what it took,
	// AtLeastOnce those of them taken at least once, Exact whether the
	// batch was exactly once.
	Done        bool     `json:"done,omitempty"`
	Exact       bool     `json:"exact,omitempty"`
	AtLeastOnce []uint32 `json:"at_least_once,omitempty"`
}

// recordClaim writes the record of a claim with a key, before its STORE
// (nothing without a key); conditional says the STORE will be.
func (c *Client) recordClaim(ctx context.Context, creds credentials.Credentials, sp claimSpec, uidValidity uint32, uids []imap.UID, conditional bool) error {
	return c.writeRecord(ctx, creds, sp, claimRecord{UIDValidity: uidValidity, UIDs: uint32s(uids), Conditional: conditional})
}

// recordDone writes the record of a decided claim with a key (nothing
// without): what it took, and which of those at least once.
func (c *Client) recordDone(ctx context.Context, creds credentials.Credentials, sp claimSpec, uidValidity uint32, took []imap.UID, exact bool, loose []imap.UID) {
	if sp.key == nil {
		return
	}
	rec := claimRecord{UIDValidity: uidValidity, UIDs: uint32s(took), Done: true, Exact: exact, AtLeastOnce: uint32s(loose)}
	if err := c.writeRecord(ctx, creds, sp, rec); err != nil {
		c.log.WarnContext(ctx, "the claim's final record was not written; a retry with its key returns the batch at least once", "err", err)
	}
}

func uint32s(uids []imap.UID) []uint32 {
	out := make([]uint32, 0, len(uids))
	for _, u := range uids {
		out = append(out, uint32(u))
	}
	return out
}

// writeRecord writes rec, completed with the key and the folder, as a
// record of a claim with a key (nothing without).
func (c *Client) writeRecord(ctx context.Context, creds credentials.Credentials, sp claimSpec, rec claimRecord) error {
	if sp.key == nil {
		return nil
	}
	rec.Key, rec.Folder, rec.Keyword, rec.At = sp.key.full, sp.folder, string(sp.key.keyword), time.Now().UTC().Format(time.RFC3339)
	body, _ := json.Marshal(rec)
	var b strings.Builder
	b.WriteString("From: mailbox-mcp <claims@mailbox-mcp.invalid>\r\n")
	b.WriteString("Subject: claim record\r\n")
	b.WriteString("Date: " + time.Now().UTC().Format(time.RFC1123Z) + "\r\n")
	b.WriteString(KeyHeader + ": " + sp.key.record + "\r\n")
	b.WriteString(claimFolderHeader + ": " + claimFolderTag(sp.folder, rec.UIDValidity) + "\r\n")
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
// folder, or nil when there was none (no record of this key, as its
// body proves, about folder).
func (c *Client) replay(ctx context.Context, creds credentials.Credentials, srv *Server, folder string, key *claimKey, maxChars int) (*Consumed, error) {
	mine, err := c.readRecords(ctx, creds, key.folder, KeyHeader, key.record)
	if err != nil {
		return nil, err
	}
	var recs []claimRecord
	for _, r := range mine {
		if r.header == key.record && r.rec.Key == key.full && r.rec.Keyword == string(key.keyword) && r.rec.Folder == folder && r.rec.UIDValidity != 0 {
			recs = append(recs, r.rec)
		}
	}
	if len(recs) == 0 {
		return nil, nil
	}
	// Every attempt of a claim writes a first record; the decided claim
	// one done record. A folder rebuilt between attempts: the newest
	// records count.
	uv := recs[len(recs)-1].UIDValidity
	var cands, done, doneLoose []imap.UID
	decided, exact, conditional := false, true, true
	for _, r := range recs {
		if r.UIDValidity != uv {
			continue
		}
		for _, u := range r.UIDs {
			switch {
			case r.Done:
				done = append(done, imap.UID(u))
			case !slices.Contains(cands, imap.UID(u)):
				cands = append(cands, imap.UID(u))
			}
		}
		if r.Done {
			decided, exact = true, exact && r.Exact
			for _, u := range r.AtLeastOnce {
				doneLoose = append(doneLoose, imap.UID(u))
			}
		} else {
			conditional = conditional && r.Conditional
		}
	}
	// Undecided: what other keys' records say of the same messages.
	var others map[imap.UID]bool // true: another key's done record took it
	if !decided && len(cands) > 0 {
		if others, err = c.otherClaims(ctx, creds, key, folder, uv, cands); err != nil {
			return nil, err
		}
	}
	want := cands
	if decided {
		want = done
	}
	slices.Sort(want)
	want = slices.Compact(want)
	out := &Consumed{Folder: folder, UIDValidity: uv, Messages: []Message{}, Repeated: true, ExactlyOnce: true}
	err = c.doIn(ctx, creds, folder, "reading the messages claimed before", func(ctx context.Context, conn *Conn) error {
		if _, err := conn.examineFresh(folder); err != nil {
			return err
		}
		if conn.uidValidity != uv {
			return uidValidityChanged(folder)
		}
		if len(want) == 0 {
			return nil
		}
		flags, err := fetchFlags(conn.client(), want)
		if err != nil {
			return err
		}
		// \Seen with the key's slot keyword, set together by one STORE:
		// this claim's, or another key's of the same slot.
		kw := strings.ToLower(string(key.keyword))
		var take []imap.UID
		for _, u := range want {
			f := flags[uint32(u)]
			if !slices.Contains(f, `\seen`) || !slices.Contains(f, kw) {
				continue
			}
			switch taken, named := others[u]; {
			case decided:
				if slices.Contains(doneLoose, u) {
					out.AtLeastOnce = append(out.AtLeastOnce, uint32(u))
				}
			case named && taken:
				continue // another key's decided claim took it
			case named || !conditional || srv.storeFlags() != flagsEchoed:
				// Another key's claim of it is undecided, or the
				// server's conditional STORE is not atomic (a
				// losing STORE set the keyword too): not provably
				// this claim's alone.
				out.AtLeastOnce = append(out.AtLeastOnce, uint32(u))
			}
			take = append(take, u)
		}
		out.ExactlyOnce = (!decided || exact) && len(out.AtLeastOnce) == 0
		return readClaimed(ctx, c, conn, folder, take, maxChars, out, nil, nil)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// foundRecord is one record message: its KeyHeader, and its body.
type foundRecord struct {
	header string
	rec    claimRecord
}

// maxOtherRecords bounds the records of other keys a retry reads; past it,
// the undecided claim's messages are returned at least once.
const maxOtherRecords = 5000

// readRecords reads the records in folder (the claims folder) whose header
// holds value, oldest first; a records folder that does not exist holds
// none. Bodies that are not a record are left out.
func (c *Client) readRecords(ctx context.Context, creds credentials.Credentials, folder, header, value string) ([]foundRecord, error) {
	var out []foundRecord
	err := c.doIn(ctx, creds, folder, "reading claim records", func(ctx context.Context, conn *Conn) error {
		if _, err := conn.examineFresh(folder); err != nil {
			return err
		}
		cl := conn.client()
		data, err := cl.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: header, Value: value}}, NotFlag: []imap.Flag{imap.FlagDeleted}}, nil).Wait()
		if err != nil {
			return searchError(err, folder)
		}
		uids := data.AllUIDs()
		if len(uids) == 0 {
			return nil
		}
		if len(uids) > maxOtherRecords {
			return errTooManyRecords
		}
		slices.Sort(uids)
		whole := &imap.FetchItemBodySection{Peek: true}
		bufs, err := cl.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{whole}}).Collect()
		if err != nil {
			return imapError(err, folder)
		}
		slices.SortFunc(bufs, func(a, b *imapclient.FetchMessageBuffer) int { return int(int64(a.UID) - int64(b.UID)) })
		for _, b := range bufs {
			raw := b.FindBodySection(whole)
			i := bytes.Index(raw, []byte("\r\n\r\n"))
			var r foundRecord
			if i < 0 || json.Unmarshal(bytes.TrimSpace(raw[i+4:]), &r.rec) != nil {
				continue
			}
			r.header = keyOf(raw[:i+2])
			out = append(out, r)
		}
		return nil
	})
	if mailerr.KindOf(err) == mailerr.NotFound && mailerr.SubjectOf(err) == mailerr.SubjectFolder {
		return nil, nil
	}
	return out, err
}

// errTooManyRecords: more records than maxOtherRecords match.
var errTooManyRecords = mailerr.New(mailerr.Temporary, "too many claim records to read")

// otherClaims says, for the messages of uids in folder (UIDVALIDITY uv),
// which other keys' records name them: true when a decided claim took it,
// false when a claim of it is undecided (a first record only). Past
// maxOtherRecords every one of them counts as undecided.
func (c *Client) otherClaims(ctx context.Context, creds credentials.Credentials, key *claimKey, folder string, uv uint32, uids []imap.UID) (map[imap.UID]bool, error) {
	recs, err := c.readRecords(ctx, creds, key.folder, claimFolderHeader, claimFolderTag(folder, uv))
	out := map[imap.UID]bool{}
	if err == errTooManyRecords {
		for _, u := range uids {
			out[u] = false
		}
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	decided := map[string]bool{} // other keys with a done record
	for _, r := range recs {
		if r.rec.Done && r.rec.Key != key.full {
			decided[r.rec.Key] = true
		}
	}
	for _, r := range recs {
		if r.rec.Key == key.full || r.rec.Key == "" || r.rec.Folder != folder || r.rec.UIDValidity != uv {
			continue
		}
		for _, u := range r.rec.UIDs {
			if !slices.Contains(uids, imap.UID(u)) {
				continue
			}
			switch {
			case r.rec.Done:
				out[imap.UID(u)] = true
			case !decided[r.rec.Key]:
				if _, ok := out[imap.UID(u)]; !ok {
					out[imap.UID(u)] = false
				}
			}
		}
	}
	return out, nil
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
