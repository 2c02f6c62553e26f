package tests

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/mark3labs/mcp-go/client"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// The organize tools against Dovecot, every effect checked with a direct
// IMAP client of its own (not through the gateway): what a call changes,
// and that a refused call changes nothing at all (every message's flags
// compared before and after). A message marked \Deleted by another client
// and never expunged stays through every move and trash: the gateway never
// sends a bare EXPUNGE.
func TestOrganize(t *testing.T) {
	const user, pass = "organize@example.test", "organize-pw"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: pass}})
	g := startGateway(t, s, "MAILBOX_ACCESS=full")
	mc := mailtest.MCPClient(t, g.URL, userHeaders(s, user), "")
	call := func(tool string, args map[string]any) organizeAnswer { return mcpAnswer(t, mc, tool, args) }
	d := direct(t, s, user)

	// A message another client marked \Deleted and did not expunge.
	tombstone := appendMsg(t, d, "INBOX", "marked deleted elsewhere", imap.FlagDeleted)

	t.Run("flags", func(t *testing.T) {
		m1 := appendMsg(t, d, "INBOX", "flags one")
		m2 := appendMsg(t, d, "INBOX", "flags two", imap.FlagSeen)
		m3 := appendMsg(t, d, "INBOX", "flags three")

		var res mailbox.FlagsResult
		call("imap_set_flags", map[string]any{"uids": uidArgs(m1, m2), "add": []any{"seen", "flagged", "$Work", "project-x"}}).decode(t, &res)
		if len(res.Messages) != 2 || res.Folder != "INBOX" {
			t.Fatalf("result %+v", res)
		}
		for _, m := range res.Messages {
			if !m.Flags.Seen || !m.Flags.Flagged || !slices.Contains(m.Flags.Keywords, "$Work") || !slices.Contains(m.Flags.Keywords, "project-x") {
				t.Errorf("uid %d flags %+v", m.UID, m.Flags)
			}
		}
		now := flagsIn(t, d, "INBOX")
		for _, u := range []imap.UID{m1, m2} {
			if now[u] != `$Work \Flagged \Seen project-x` {
				t.Errorf("Dovecot has uid %d with %q", u, now[u])
			}
		}
		if now[m3] != "" || now[tombstone] != `\Deleted` {
			t.Errorf("other messages changed: %q, %q", now[m3], now[tombstone])
		}

		call("imap_set_flags", map[string]any{"uids": uidArgs(m1), "remove": []any{"seen", "$work"}, "add": []any{"answered"}}).decode(t, &res)
		if now := flagsIn(t, d, "INBOX"); now[m1] != `\Answered \Flagged project-x` || now[m2] != `$Work \Flagged \Seen project-x` {
			t.Errorf("after remove: uid %d %q, uid %d %q", m1, now[m1], m2, now[m2])
		}
		if f := res.Messages[0].Flags; f.Seen || !f.Answered || slices.Contains(f.Keywords, "$Work") {
			t.Errorf("result after remove: %+v", f)
		}

		// A message that arrived after the gateway's connection selected
		// the folder is found (the connection's view is refreshed).
		m4 := appendMsg(t, d, "INBOX", "flags four")
		call("imap_set_flags", map[string]any{"uids": uidArgs(m4), "add": []any{"flagged"}}).decode(t, &res)
		if now := flagsIn(t, d, "INBOX"); now[m4] != `\Flagged` {
			t.Errorf("new message: %q", now[m4])
		}

		// Refused calls change nothing, and say why.
		before := flagsIn(t, d, "INBOX")
		for _, tc := range []struct {
			args map[string]any
			says string
		}{
			{map[string]any{"uids": uidArgs(m3), "add": []any{"flagged", "bad keyword"}}, `keyword "bad keyword" contains a space`},
			{map[string]any{"uids": uidArgs(m3), "add": []any{"ok", "a(b"}}, `keyword "a(b" contains '('`},
			{map[string]any{"uids": uidArgs(m3), "add": []any{"Ünï"}}, "outside ASCII"},
			{map[string]any{"uids": uidArgs(m3), "add": []any{`\Deleted`}}, "deleting messages is a separate operation"},
			{map[string]any{"uids": uidArgs(m3, 99999, 99998), "add": []any{"flagged", "answered"}}, "no message with UIDs 99998 and 99999"},
			{map[string]any{"uids": uidArgs(m3)}, "at least one flag"},
			{map[string]any{"uids": uidArgs(m3), "add": []any{"seen"}, "remove": []any{"seen"}}, "both in add and in remove"},
			{map[string]any{"uids": uidArgs(m3), "folder": "No such folder", "add": []any{"seen"}}, "does not exist"},
			{map[string]any{"uids": manyUIDs(501), "add": []any{"seen"}}, "at most 500"},
		} {
			call("imap_set_flags", tc.args).refused(t, tc.says)
		}
		if after := flagsIn(t, d, "INBOX"); !mapsEqual(before, after) {
			t.Errorf("a refused call changed flags:\nbefore %v\nafter  %v", before, after)
		}

	})

	t.Run("move", func(t *testing.T) {
		if err := d.Create("Moved", nil).Wait(); err != nil {
			t.Fatal(err)
		}
		m1 := appendMsg(t, d, "INBOX", "move one", imap.FlagFlagged)
		m2 := appendMsg(t, d, "INBOX", "move two")
		before := flagsIn(t, d, "INBOX")

		var res mailbox.Moved
		call("imap_move_emails", map[string]any{"uids": uidArgs(m2, m1), "to_folder": "Moved"}).decode(t, &res)
		if res.Folder != "INBOX" || res.ToFolder != "Moved" || len(res.Messages) != 2 {
			t.Fatalf("result %+v", res)
		}
		moved := subjectsIn(t, d, "Moved")
		for i, want := range []struct {
			uid     imap.UID
			subject string
		}{{m1, "move one"}, {m2, "move two"}} {
			m := res.Messages[i]
			if imap.UID(m.UID) != want.uid || m.NewUID == 0 || moved[imap.UID(m.NewUID)] != want.subject {
				t.Errorf("message %d: %+v; Moved holds %v", i, m, moved)
			}
		}
		delete(before, m1)
		delete(before, m2)
		if after := flagsIn(t, d, "INBOX"); !mapsEqual(before, after) {
			t.Errorf("INBOX after the move:\nwant %v\ngot  %v", before, after)
		}

		before = flagsIn(t, d, "INBOX")
		m3 := lowestOther(before, tombstone)
		for _, tc := range []struct {
			args map[string]any
			says string
		}{
			{map[string]any{"uids": uidArgs(m3), "to_folder": "Nowhere"}, `folder "Nowhere" does not exist`},
			{map[string]any{"uids": uidArgs(m3, 99999), "to_folder": "Moved"}, "no message with UID 99999"},
			{map[string]any{"uids": uidArgs(m3), "to_folder": "inbox"}, "already in folder"},
			{map[string]any{"uids": uidArgs(m3), "to_folder": ""}, "to_folder"},
		} {
			call("imap_move_emails", tc.args).refused(t, tc.says)
		}
		if after := flagsIn(t, d, "INBOX"); !mapsEqual(before, after) {
			t.Errorf("a refused move changed INBOX:\nbefore %v\nafter  %v", before, after)
		}
		if n := len(subjectsIn(t, d, "Moved")); n != 2 {
			t.Errorf("Moved holds %d messages after refused moves, want 2", n)
		}
	})

	t.Run("trash", func(t *testing.T) {
		m1 := appendMsg(t, d, "INBOX", "trash one")
		m2 := appendMsg(t, d, "INBOX", "trash two")
		m3 := appendMsg(t, d, "INBOX", "trash three")
		before := flagsIn(t, d, "INBOX")
		trashBefore := subjectsIn(t, d, "Trash")

		var res mailbox.Trashed
		call("imap_trash_emails", map[string]any{"uids": uidArgs(m1)}).decode(t, &res)
		if res.Permanent || res.TrashFolder != "Trash" || len(res.Messages) != 1 || res.Messages[0].UID != uint32(m1) {
			t.Fatalf("result %+v", res)
		}
		inTrash := imap.UID(res.Messages[0].NewUID)
		if got := subjectsIn(t, d, "Trash"); got[inTrash] != "trash one" || len(got) != len(trashBefore)+1 {
			t.Errorf("Trash holds %v", got)
		}
		delete(before, m1)
		if after := flagsIn(t, d, "INBOX"); !mapsEqual(before, after) {
			t.Errorf("INBOX after trash:\nwant %v\ngot  %v", before, after)
		}

		// Already in the trash: only permanent deletion removes it.
		call("imap_trash_emails", map[string]any{"folder": "Trash", "uids": uidArgs(inTrash)}).refused(t, "already in the Trash folder")
		if got := subjectsIn(t, d, "Trash"); got[inTrash] != "trash one" {
			t.Errorf("Trash after the refusal: %v", got)
		}

		// Permanent: exactly these UIDs, nothing else.
		var perm mailbox.Trashed
		call("imap_trash_emails", map[string]any{"uids": uidArgs(m2), "permanent": true}).decode(t, &perm)
		if !perm.Permanent || perm.TrashFolder != "" || len(perm.Messages) != 1 || perm.Messages[0].UID != uint32(m2) || perm.Messages[0].NewUID != 0 {
			t.Fatalf("permanent result %+v", perm)
		}
		delete(before, m2)
		after := flagsIn(t, d, "INBOX")
		if !mapsEqual(before, after) {
			t.Errorf("INBOX after permanent trash:\nwant %v\ngot  %v", before, after)
		}
		if _, ok := after[m3]; !ok || after[tombstone] != `\Deleted` {
			t.Errorf("permanent trash took other messages: %v", after)
		}
		if got := subjectsIn(t, d, "Trash"); len(got) != len(trashBefore)+1 {
			t.Errorf("permanent deletion went to the Trash: %v", got)
		}
		call("imap_trash_emails", map[string]any{"folder": "Trash", "uids": uidArgs(inTrash), "permanent": true}).decode(t, &perm)
		if got := subjectsIn(t, d, "Trash"); len(got) != len(trashBefore) {
			t.Errorf("Trash after deleting from it: %v", got)
		}

		before = flagsIn(t, d, "INBOX")
		call("imap_trash_emails", map[string]any{"uids": uidArgs(m3, 99999), "permanent": true}).refused(t, "no message with UID 99999")
		call("imap_trash_emails", map[string]any{"uids": uidArgs(m3, 99999)}).refused(t, "no message with UID 99999")
		if after := flagsIn(t, d, "INBOX"); !mapsEqual(before, after) {
			t.Errorf("a refused trash changed INBOX:\nbefore %v\nafter  %v", before, after)
		}
	})

	t.Run("organize level", func(t *testing.T) {
		og := startGateway(t, s, "MAILBOX_ACCESS=organize")
		oc := mailtest.MCPClient(t, og.URL, userHeaders(s, user), "")
		m := appendMsg(t, d, "INBOX", "organize level")
		before := flagsIn(t, d, "INBOX")
		mcpAnswer(t, oc, "imap_trash_emails", map[string]any{"uids": uidArgs(m), "permanent": true}).refused(t, "needs the full access level")
		mcpAnswer(t, oc, "imap_delete_folder", map[string]any{"folder": "Moved"}).refused(t, "needs the full access level")
		if after := flagsIn(t, d, "INBOX"); !mapsEqual(before, after) {
			t.Errorf("a refused call changed INBOX:\nbefore %v\nafter  %v", before, after)
		}
		var res mailbox.Trashed
		mcpAnswer(t, oc, "imap_trash_emails", map[string]any{"uids": uidArgs(m)}).decode(t, &res)
		if res.TrashFolder != "Trash" {
			t.Errorf("organize trash: %+v", res)
		}
	})

	t.Run("folders", func(t *testing.T) {
		const name = "Reçus/2026 ✓"
		var res mailbox.FolderChange
		call("imap_create_folder", map[string]any{"name": name}).decode(t, &res)
		if res.Folder != name || res.Delimiter != "/" {
			t.Errorf("create result %+v", res)
		}
		if f := foldersOf(t, d, false); !slices.Contains(f, name) || !slices.Contains(f, "Reçus") {
			t.Fatalf("Dovecot lists %q", f)
		}
		if f := foldersOf(t, d, true); !slices.Contains(f, name) {
			t.Errorf("not subscribed: %q", f)
		}
		// On the wire the name is modified UTF-7 (Dovecot 2.3 has no
		// UTF8=ACCEPT); doveadm shows the name as stored.
		if out, err := s.Doveadm("mailbox", "list", "-u", user); err != nil || !strings.Contains(out, name) {
			t.Errorf("doveadm mailbox list: %v\n%s", err, out)
		}
		call("imap_create_folder", map[string]any{"name": name}).refused(t, `folder "`+name+`" already exists`)
		call("imap_create_folder", map[string]any{"name": "a*b"}).refused(t, "wildcard")
		call("imap_create_folder", map[string]any{"name": "/top"}).refused(t, "hierarchy delimiter")
		call("imap_create_folder", map[string]any{"name": "Reçus//x"}).refused(t, "empty level")
		call("imap_create_folder", map[string]any{"name": "tab\there"}).refused(t, "control character")

		const renamed = "Reçus/Archiv 2026 ✓"
		call("imap_rename_folder", map[string]any{"folder": name, "new_name": renamed}).decode(t, &res)
		if res.Folder != renamed || res.From != name {
			t.Errorf("rename result %+v", res)
		}
		if f := foldersOf(t, d, false); slices.Contains(f, name) || !slices.Contains(f, renamed) {
			t.Errorf("after rename Dovecot lists %q", f)
		}
		if f := foldersOf(t, d, true); slices.Contains(f, name) || !slices.Contains(f, renamed) {
			t.Errorf("after rename the subscriptions are %q", f)
		}
		call("imap_rename_folder", map[string]any{"folder": renamed, "new_name": "Moved"}).refused(t, `folder "Moved" already exists`)
		call("imap_rename_folder", map[string]any{"folder": "Nope", "new_name": "Nope2"}).refused(t, `folder "Nope" does not exist`)

		// Delete a folder with a message in it, while the gateway's pooled
		// connection has it selected.
		appendMsg(t, d, renamed, "in the folder")
		var page mailbox.Page
		call("imap_list_emails", map[string]any{"folder": renamed}).decode(t, &page)
		if page.Total != 1 {
			t.Fatalf("list %q: %+v", renamed, page)
		}
		call("imap_delete_folder", map[string]any{"folder": renamed}).decode(t, &res)
		if res.Folder != renamed || res.Messages == nil || *res.Messages != 1 {
			t.Errorf("delete result %+v", res)
		}
		if f := foldersOf(t, d, false); slices.Contains(f, renamed) {
			t.Errorf("after delete Dovecot lists %q", f)
		}
		if f := foldersOf(t, d, true); slices.Contains(f, renamed) {
			t.Errorf("after delete the subscriptions are %q", f)
		}
		call("imap_delete_folder", map[string]any{"folder": renamed}).refused(t, `folder "`+renamed+`" does not exist`)

		// INBOX and special folders, and a folder holding one, are refused.
		if err := d.Create("Box/Inner", nil).Wait(); err != nil {
			t.Fatal(err)
		}
		before := foldersOf(t, d, false)
		for _, tc := range []struct {
			tool string
			args map[string]any
			says string
		}{
			{"imap_delete_folder", map[string]any{"folder": "INBOX"}, "INBOX cannot be deleted"},
			{"imap_delete_folder", map[string]any{"folder": "inbox"}, "INBOX cannot be deleted"},
			{"imap_delete_folder", map[string]any{"folder": "Sent"}, `folder "Sent" is the Sent folder`},
			{"imap_delete_folder", map[string]any{"folder": "Trash"}, `folder "Trash" is the Trash folder`},
			{"imap_rename_folder", map[string]any{"folder": "INBOX", "new_name": "Old inbox"}, "INBOX cannot be renamed"},
			{"imap_rename_folder", map[string]any{"folder": "Drafts", "new_name": "Entwürfe"}, `folder "Drafts" is the Drafts folder`},
			{"imap_rename_folder", map[string]any{"folder": "Box", "new_name": "Box/Inner/Deeper"}, "inside itself"},
			{"imap_delete_folder", map[string]any{"folder": "Box"}, "folders inside it"},
		} {
			mcpAnswer(t, mc, tc.tool, tc.args).refused(t, tc.says)
		}
		if after := foldersOf(t, d, false); !slices.Equal(before, after) {
			t.Errorf("a refused call changed the folders:\nbefore %q\nafter  %q", before, after)
		}
	})

	t.Run("without MOVE", func(t *testing.T) {
		// Dovecot with MOVE hidden: the gateway copies, marks and expunges
		// exactly the moved UIDs, and still reports the new UIDs.
		proxy := startCapProxy(t, s.IMAPAddr(), "MOVE", "IMAP4REV2")
		pg := startGateway(t, s, "MAILBOX_ACCESS=full", "IMAP_PORT="+strconv.Itoa(proxy.port()), "IMAP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true", "MAIL_CA_FILE=")
		pc := mailtest.MCPClient(t, pg.URL, userHeaders(s, user), "")
		m1 := appendMsg(t, d, "INBOX", "fallback one")
		m2 := appendMsg(t, d, "INBOX", "fallback two")
		before := flagsIn(t, d, "INBOX")
		var res mailbox.Moved
		mcpAnswer(t, pc, "imap_move_emails", map[string]any{"uids": uidArgs(m1), "to_folder": "Moved"}).decode(t, &res)
		if len(res.Messages) != 1 || res.Messages[0].NewUID == 0 || subjectsIn(t, d, "Moved")[imap.UID(res.Messages[0].NewUID)] != "fallback one" {
			t.Errorf("result %+v", res)
		}
		var tr mailbox.Trashed
		mcpAnswer(t, pc, "imap_trash_emails", map[string]any{"uids": uidArgs(m2)}).decode(t, &tr)
		delete(before, m1)
		delete(before, m2)
		if after := flagsIn(t, d, "INBOX"); !mapsEqual(before, after) || after[tombstone] != `\Deleted` {
			t.Errorf("INBOX after the fallback moves:\nwant %v\ngot  %v", before, after)
		}
		if n := proxy.sent(" MOVE "); n != 0 {
			t.Errorf("MOVE sent %d times to a server without it", n)
		}
		if proxy.sent("UID COPY") != 2 || proxy.sent("UID EXPUNGE") != 2 {
			t.Errorf("commands: %q", proxy.commandList())
		}
		if n := proxy.bareExpunges(); n != 0 {
			t.Errorf("%d bare EXPUNGE commands: %q", n, proxy.commandList())
		}
	})

	t.Run("without MOVE and UIDPLUS", func(t *testing.T) {
		proxy := startCapProxy(t, s.IMAPAddr(), "MOVE", "UIDPLUS", "IMAP4REV2")
		pg := startGateway(t, s, "MAILBOX_ACCESS=full", "IMAP_PORT="+strconv.Itoa(proxy.port()), "IMAP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true", "MAIL_CA_FILE=")
		pc := mailtest.MCPClient(t, pg.URL, userHeaders(s, user), "")
		m := appendMsg(t, d, "INBOX", "no uidplus")
		before := flagsIn(t, d, "INBOX")
		mcpAnswer(t, pc, "imap_move_emails", map[string]any{"uids": uidArgs(m), "to_folder": "Moved"}).refused(t, "neither MOVE nor UIDPLUS")
		mcpAnswer(t, pc, "imap_trash_emails", map[string]any{"uids": uidArgs(m)}).refused(t, "neither MOVE nor UIDPLUS")
		mcpAnswer(t, pc, "imap_trash_emails", map[string]any{"uids": uidArgs(m), "permanent": true}).refused(t, "does not offer UIDPLUS")
		if after := flagsIn(t, d, "INBOX"); !mapsEqual(before, after) {
			t.Errorf("a refused call changed INBOX:\nbefore %v\nafter  %v", before, after)
		}
		if n := proxy.sent("COPY") + proxy.sent("STORE") + proxy.sent("EXPUNGE"); n != 0 {
			t.Errorf("changing commands sent: %q", proxy.commandList())
		}
	})
}

// organizeAnswer is one tool call's outcome: its structured result, or
// the sentence of its refusal.
type organizeAnswer struct {
	tool    string
	result  json.RawMessage
	refusal string
	failed  bool
}

func mcpAnswer(t *testing.T, c *client.Client, tool string, args map[string]any) organizeAnswer {
	t.Helper()
	res := mailtest.Call(t, c, tool, args)
	a := organizeAnswer{tool: tool, failed: res.IsError}
	if res.IsError {
		a.refusal = mailtest.Text(res)
		return a
	}
	var v any
	mailtest.Decode(t, res, &v)
	a.result, _ = json.Marshal(v)
	return a
}

func (a organizeAnswer) decode(t *testing.T, v any) {
	t.Helper()
	if a.failed {
		t.Fatalf("%s: %s", a.tool, a.refusal)
	}
	// A fresh value: unmarshalling into an old one keeps fields the new
	// result leaves out.
	reflect.ValueOf(v).Elem().SetZero()
	if err := json.Unmarshal(a.result, v); err != nil {
		t.Fatalf("%s: %v", a.tool, err)
	}
}

// refused checks that the call failed with a sentence containing says.
func (a organizeAnswer) refused(t *testing.T, says string) {
	t.Helper()
	if !a.failed {
		t.Errorf("%s succeeded (%s), want a refusal saying %q", a.tool, a.result, says)
		return
	}
	if !strings.Contains(a.refusal, says) {
		t.Errorf("%s refused with %q, want %q", a.tool, a.refusal, says)
	}
}

func uidArgs(uids ...imap.UID) []any {
	out := make([]any, len(uids))
	for i, u := range uids {
		out[i] = uint32(u)
	}
	return out
}

func manyUIDs(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// appendMsg appends a small message to folder with the direct client and
// returns its UID (APPENDUID).
func appendMsg(t *testing.T, d *imapclient.Client, folder, subject string, flags ...imap.Flag) imap.UID {
	t.Helper()
	raw := fmt.Sprintf("From: Peer <peer@example.org>\r\nTo: organize@example.test\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: <%d.organize@example.org>\r\n\r\nbody of %s\r\n",
		subject, time.Now().Format(time.RFC1123Z), time.Now().UnixNano(), subject)
	cmd := d.Append(folder, int64(len(raw)), &imap.AppendOptions{Flags: flags})
	if _, err := cmd.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := cmd.Wait()
	if err != nil || data.UID == 0 {
		t.Fatalf("append to %s: %v %+v", folder, err, data)
	}
	return data.UID
}

// flagsIn is every message of folder with its flags (sorted, \Recent left
// out), as Dovecot tells a client of its own.
func flagsIn(t *testing.T, d *imapclient.Client, folder string) map[imap.UID]string {
	t.Helper()
	out := map[imap.UID]string{}
	for _, b := range fetchAll(t, d, folder, &imap.FetchOptions{UID: true, Flags: true}) {
		var fs []string
		for _, f := range b.Flags {
			if f != "\\Recent" {
				fs = append(fs, string(f))
			}
		}
		slices.Sort(fs)
		out[b.UID] = strings.Join(fs, " ")
	}
	return out
}

// subjectsIn is every message of folder with its subject.
func subjectsIn(t *testing.T, d *imapclient.Client, folder string) map[imap.UID]string {
	t.Helper()
	out := map[imap.UID]string{}
	for _, b := range fetchAll(t, d, folder, &imap.FetchOptions{UID: true, Envelope: true}) {
		out[b.UID] = b.Envelope.Subject
	}
	return out
}

func fetchAll(t *testing.T, d *imapclient.Client, folder string, opts *imap.FetchOptions) []*imapclient.FetchMessageBuffer {
	t.Helper()
	sd, err := d.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		t.Fatalf("EXAMINE %s: %v", folder, err)
	}
	// Leave the folder: a client with it selected would be disconnected
	// by Dovecot when the gateway deletes it.
	defer func() { d.Unselect().Wait() }()
	if sd.NumMessages == 0 {
		return nil
	}
	bufs, err := d.Fetch(imap.SeqSet{{Start: 1, Stop: 0}}, opts).Collect()
	if err != nil {
		t.Fatalf("FETCH %s: %v", folder, err)
	}
	return bufs
}

// foldersOf lists the folders (or the subscribed ones), sorted.
func foldersOf(t *testing.T, d *imapclient.Client, subscribed bool) []string {
	t.Helper()
	data, err := d.List("", "*", &imap.ListOptions{SelectSubscribed: subscribed}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range data {
		out = append(out, l.Mailbox)
	}
	slices.Sort(out)
	return out
}

func mapsEqual(a, b map[imap.UID]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// lowestOther is the lowest UID of m other than not.
func lowestOther(m map[imap.UID]string, not imap.UID) imap.UID {
	var out imap.UID
	for u := range m {
		if u != not && (out == 0 || u < out) {
			out = u
		}
	}
	return out
}

var bareExpunge = regexp.MustCompile(`^\S+ (?i:EXPUNGE)\s*$`)

// bareExpunges counts EXPUNGE commands without UIDs.
func (p *capProxy) bareExpunges() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.commands {
		if bareExpunge.MatchString(c) {
			n++
		}
	}
	return n
}

func (p *capProxy) commandList() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.commands)
}
