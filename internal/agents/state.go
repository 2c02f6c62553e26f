package agents

// The state store: a small key/value store shared by every agent of one
// mailbox, kept in the mailbox itself.
//
// With IMAP METADATA (RFC 5464) each key is one entry,
// /private/vendor/mailbox-mcp/state/KEY, on the root folder (Agents), and
// SETMETADATA replaces it atomically. The keys are also registered in the
// .state folder (one small marker message per key) because listing the
// entries under a prefix needs GETMETADATA's DEPTH option, which go-imap
// beta.8 sends in the wrong place (NOTES.md); a marker is written only the
// first time a key is set.
//
// Without METADATA each key is one message in the .state folder
// (Agents/\u2024state: '.' is mapped like in agent folders), its value the
// body. Replacing is APPEND of the new message, then UID EXPUNGE of every
// older message of the key: see replaceKeyed for why concurrent writers
// end with exactly one message.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// StateEntry is one key of the shared state.
type StateEntry struct {
	Key       string          `json:"key" desc:"the key"`
	Value     json.RawMessage `json:"value" desc:"the value, any JSON"`
	UpdatedAt time.Time       `json:"updated_at" desc:"when it was last set"`
	By        string          `json:"by,omitempty" desc:"the agent that set it, when it gave its name"`
}

// MaxStateList is the most keys one prefix read returns (in key order).
const MaxStateList = 200

// keyPattern is a state key: 1 to 200 letters, digits, '.', '_', '-', ':'
// and '/', not starting with '.' (the gateway's own keys) or '/', without
// "//" or a trailing '/' (RFC 5464 entry names allow neither).
var keyPattern = regexp.MustCompile(`^[A-Za-z0-9_:-][A-Za-z0-9._:/-]{0,199}$`)

// keyRule is the sentence that says what a key is.
const keyRule = "a state key is 1 to 200 letters, digits, '.', '_', '-', ':' and '/', not starting with '.' or '/', without '//' or a trailing '/' (e.g. build/status, plan:v2)"

// CheckKey refuses what is not a state key (arg names the argument).
func CheckKey(arg, key string) error {
	if !keyPattern.MatchString(key) || strings.Contains(key, "//") || strings.HasSuffix(key, "/") {
		return mailerr.New(mailerr.BadInput, arg+": "+keyRule)
	}
	return nil
}

// checkPrefix refuses a prefix no key could start with.
func checkPrefix(prefix string) error {
	if !keyPattern.MatchString(prefix) || strings.Contains(prefix, "//") {
		return mailerr.New(mailerr.BadInput, "prefix: "+keyRule+"; a prefix is the start of one")
	}
	return nil
}

// CheckValue refuses a value that is not JSON or is larger than
// MaxStateBytes, and returns it compacted (the stored form).
func CheckValue(value json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(value)) == 0 {
		return nil, mailerr.New(mailerr.BadInput, "value: give a JSON value (a string, number, object, array, true, false or null)")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, value); err != nil {
		return nil, mailerr.New(mailerr.BadInput, "value is not valid JSON")
	}
	if buf.Len() > MaxStateBytes {
		return nil, mailerr.Newf(mailerr.TooLarge, "value is %d bytes as compact JSON, more than the %d bytes a state value may hold; nothing was changed", buf.Len(), MaxStateBytes)
	}
	return buf.Bytes(), nil
}

// SetState sets key to value (any JSON, at most MaxStateBytes compacted)
// and returns the stored entry. Last writer wins.
func (s *Service) SetState(ctx context.Context, creds credentials.Credentials, key string, value json.RawMessage) (*StateEntry, error) {
	return s.SetStateBy(ctx, creds, "", key, value)
}

// SetStateBy is SetState recording by (an agent name, "" when unknown) as
// the writer.
func (s *Service) SetStateBy(ctx context.Context, creds credentials.Credentials, by, key string, value json.RawMessage) (*StateEntry, error) {
	if err := CheckKey("key", key); err != nil {
		return nil, err
	}
	v, err := CheckValue(value)
	if err != nil {
		return nil, err
	}
	e := &StateEntry{Key: key, Value: v, UpdatedAt: time.Now().UTC().Truncate(time.Second), By: by}
	if err := s.putState(ctx, creds, e); err != nil {
		return nil, err
	}
	return e, nil
}

// GetState returns key's entry (none when it is not set), or with prefix
// every key that starts with it (at most MaxStateList, in key order).
// Exactly one of key and prefix is given.
func (s *Service) GetState(ctx context.Context, creds credentials.Credentials, key, prefix string) ([]StateEntry, error) {
	switch {
	case (key == "") == (prefix == ""):
		return nil, mailerr.New(mailerr.BadInput, "give either key (one entry) or prefix (every key starting with it), not both")
	case key != "":
		if err := CheckKey("key", key); err != nil {
			return nil, err
		}
		return s.readState(ctx, creds, key, false)
	default:
		if err := checkPrefix(prefix); err != nil {
			return nil, err
		}
		return s.readState(ctx, creds, prefix, true)
	}
}

// Entry names under the root folder with METADATA.
const stateEntry = "/private/vendor/mailbox-mcp/state/"

// entryOf is key's METADATA entry name. RFC 5464 entry names are
// case-insensitive (Dovecot lower-cases them) while keys are not, so an
// upper-case letter is written '=' and its lower case ('=' is no key
// character).
func entryOf(key string) string {
	var b strings.Builder
	b.WriteString(stateEntry)
	for _, r := range key {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('=')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// stateFolder is the folder of the message store (and of the key
// markers with METADATA).
func (s *Service) stateFolder(ctx context.Context, creds credentials.Credentials) (string, error) {
	ns, err := s.mb.Namespace(ctx, creds)
	if err != nil {
		return "", err
	}
	return s.FolderOf(ns, ".state"), nil
}

// storedValue is the METADATA value of a key: the value with its writer
// and time.
type storedValue struct {
	Value json.RawMessage `json:"v"`
	At    time.Time       `json:"at"`
	By    string          `json:"by,omitempty"`
}

func (s *Service) putState(ctx context.Context, creds credentials.Credentials, e *StateEntry) error {
	stored, err := json.Marshal(storedValue{Value: e.Value, At: e.UpdatedAt, By: e.By})
	if err != nil {
		return err
	}
	entry := entryOf(e.Key)
	root, err := s.root(ctx, creds)
	if err != nil {
		return err
	}
	old, err := s.onRoot(ctx, creds, func() (map[string][]byte, error) {
		return s.mb.GetMetadata(ctx, creds, root, []string{entry})
	})
	switch {
	case errors.Is(err, mailbox.ErrNoMetadata):
		return s.replaceKeyed(ctx, creds, e.Key, stateMessage(e))
	case err != nil:
		return err
	}
	if _, ok := lookup(old, entry); !ok {
		// first write of this key: register it for prefix reads
		if err := s.replaceKeyed(ctx, creds, e.Key, markerMessage(e.Key)); err != nil {
			return err
		}
	}
	_, err = s.onRoot(ctx, creds, func() (map[string][]byte, error) {
		return nil, s.mb.SetMetadata(ctx, creds, root, map[string]*[]byte{entry: &stored})
	})
	return err
}

// onRoot runs op, and again after creating the root folder if it said the
// folder does not exist.
func (s *Service) onRoot(ctx context.Context, creds credentials.Credentials, op func() (map[string][]byte, error)) (map[string][]byte, error) {
	out, err := op()
	if mailerr.KindOf(err) != mailerr.NotFound {
		return out, err
	}
	root, err := s.root(ctx, creds)
	if err != nil {
		return nil, err
	}
	if _, err := s.mb.EnsureFolder(ctx, creds, root); err != nil {
		return nil, err
	}
	return op()
}

// lookup finds entry in a GETMETADATA answer, whose names the server may
// have changed in case.
func lookup(m map[string][]byte, entry string) ([]byte, bool) {
	if v, ok := m[entry]; ok {
		return v, true
	}
	for k, v := range m {
		if strings.EqualFold(k, entry) {
			return v, true
		}
	}
	return nil, false
}

// replaceKeyed stores raw as key's one message in the .state folder.
//
// It APPENDs raw, then lists every message of key (FindKeyed does a
// waited NOOP first, so the list holds everything appended before) and
// removes all but the one with the highest UID. Concurrent writers
// converge to exactly one message: UIDs grow in the order the APPENDs
// complete, so the writer whose message got the highest UID appended
// last, and its list holds every older message of the key still there;
// it removes them all and keeps its own. No writer ever removes the
// highest UID it sees, so it never removes that last message, and a
// writer that sees a higher UID than its own removes its own message too.
// Until the last writer's cleanup is done, two messages can be there:
// reads take the highest UID (last writer wins). A writer that dies
// between its APPEND and its cleanup leaves a stale copy that the next
// write of the key removes.
func (s *Service) replaceKeyed(ctx context.Context, creds credentials.Credentials, key string, raw []byte) error {
	folder, err := s.stateFolder(ctx, creds)
	if err != nil {
		return err
	}
	if _, err := s.mb.AppendKeyed(ctx, creds, folder, raw); err != nil {
		if mailerr.KindOf(err) != mailerr.NotFound {
			return err
		}
		if _, err := s.mb.EnsureFolder(ctx, creds, folder); err != nil {
			return err
		}
		if _, err := s.mb.AppendKeyed(ctx, creds, folder, raw); err != nil {
			return err
		}
	}
	all, err := s.mb.FindKeyed(ctx, creds, folder, key, false, false)
	if err != nil || len(all) < 2 {
		return err
	}
	stale := make([]uint32, 0, len(all)-1)
	for _, k := range all[:len(all)-1] { // lowest UID first
		stale = append(stale, k.UID)
	}
	return s.mb.RemoveUIDs(ctx, creds, folder, stale)
}

// readState reads key, or every key starting with it (prefix).
func (s *Service) readState(ctx context.Context, creds credentials.Credentials, key string, prefix bool) ([]StateEntry, error) {
	root, err := s.root(ctx, creds)
	if err != nil {
		return nil, err
	}
	if !prefix {
		entry := entryOf(key)
		got, err := s.mb.GetMetadata(ctx, creds, root, []string{entry})
		switch {
		case errors.Is(err, mailbox.ErrNoMetadata):
			return s.readKeyed(ctx, creds, key, false)
		case mailerr.KindOf(err) == mailerr.NotFound:
			return []StateEntry{}, nil
		case err != nil:
			return nil, err
		}
		out := []StateEntry{}
		if v, ok := lookup(got, entry); ok {
			if e, ok := fromStored(key, v); ok {
				out = append(out, e)
			}
		}
		return out, nil
	}
	has, err := s.mb.HasMetadata(ctx, creds)
	if err != nil {
		return nil, err
	}
	if !has {
		return s.readKeyed(ctx, creds, key, true)
	}
	folder, err := s.stateFolder(ctx, creds)
	if err != nil {
		return nil, err
	}
	markers, err := s.mb.FindKeyed(ctx, creds, folder, key, true, false)
	if mailerr.KindOf(err) == mailerr.NotFound {
		return []StateEntry{}, nil
	} else if err != nil {
		return nil, err
	}
	var keys []string
	for _, m := range markers {
		if !slices.Contains(keys, m.Key) {
			keys = append(keys, m.Key)
		}
	}
	slices.Sort(keys)
	keys = keys[:min(len(keys), MaxStateList)]
	out := []StateEntry{}
	if len(keys) == 0 {
		return out, nil
	}
	entries := make([]string, len(keys))
	for i, k := range keys {
		entries[i] = entryOf(k)
	}
	got, err := s.mb.GetMetadata(ctx, creds, root, entries)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		if v, ok := lookup(got, entries[i]); ok {
			if e, ok := fromStored(k, v); ok {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func fromStored(key string, v []byte) (StateEntry, bool) {
	var sv storedValue
	if json.Unmarshal(v, &sv) != nil || len(sv.Value) == 0 {
		return StateEntry{}, false
	}
	return StateEntry{Key: key, Value: sv.Value, UpdatedAt: sv.At, By: sv.By}, true
}

// readKeyed reads the message store: for each key the message with the
// highest UID (a stale copy may be there for a moment: last writer wins).
func (s *Service) readKeyed(ctx context.Context, creds credentials.Credentials, key string, prefix bool) ([]StateEntry, error) {
	folder, err := s.stateFolder(ctx, creds)
	if err != nil {
		return nil, err
	}
	found, err := s.mb.FindKeyed(ctx, creds, folder, key, prefix, true)
	if mailerr.KindOf(err) == mailerr.NotFound {
		return []StateEntry{}, nil
	} else if err != nil {
		return nil, err
	}
	out := []StateEntry{}
	for _, k := range found {
		if k.Raw == nil || (prefix && strings.HasPrefix(k.Key, ".") && !strings.HasPrefix(key, ".")) {
			continue
		}
		if e, ok := parseStateMessage(k.Key, k.Raw); ok {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b StateEntry) int { return strings.Compare(a.Key, b.Key) })
	if strings.HasPrefix(key, ".") {
		return out, nil // the gateway's own keys (statuses): all of them
	}
	return out[:min(len(out), MaxStateList)], nil
}

// Headers of a state message besides mailbox.KeyHeader.
const (
	stateByHeader = "X-Mailbox-Agent-From"
	stateAddress  = "state@mailbox-mcp.invalid"
)

// stateMessage is key's message in the store: the value (JSON) is the
// body, base64 so that no line is too long for mail.
func stateMessage(e *StateEntry) []byte {
	var b bytes.Buffer
	writeStateHeader(&b, e.Key, e.UpdatedAt)
	if e.By != "" {
		fmt.Fprintf(&b, "%s: %s\r\n", stateByHeader, e.By)
	}
	b.WriteString("Content-Type: application/json; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString(e.Value)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n")
	return b.Bytes()
}

// markerMessage registers key with METADATA (the value is not in it).
func markerMessage(key string) []byte {
	var b bytes.Buffer
	writeStateHeader(&b, key, time.Now().UTC())
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\nThe value of this key is kept in IMAP METADATA on the agents' folder.\r\n")
	return b.Bytes()
}

func writeStateHeader(b *bytes.Buffer, key string, at time.Time) {
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	fmt.Fprintf(b, "From: \"agent state\" <%s>\r\nTo: \"agent state\" <%s>\r\n", stateAddress, stateAddress)
	fmt.Fprintf(b, "Subject: state %s\r\nDate: %s\r\nMessage-ID: <%s@mailbox-mcp.invalid>\r\n", key, at.Format(time.RFC1123Z), hex.EncodeToString(id))
	fmt.Fprintf(b, "%s: %s\r\nMIME-Version: 1.0\r\n", mailbox.KeyHeader, key)
}

func parseStateMessage(key string, raw []byte) (StateEntry, bool) {
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return StateEntry{}, false
	}
	var body bytes.Buffer
	if _, err := body.ReadFrom(base64.NewDecoder(base64.StdEncoding, m.Body)); err != nil || !json.Valid(body.Bytes()) {
		return StateEntry{}, false
	}
	at, _ := mail.ParseDate(m.Header.Get("Date"))
	by := strings.TrimSpace(m.Header.Get(stateByHeader))
	if CheckName(by) != nil {
		by = ""
	}
	return StateEntry{Key: key, Value: body.Bytes(), UpdatedAt: at.UTC(), By: by}, true
}
