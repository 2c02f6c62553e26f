package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// sdkCalls runs tests/clients/calls.mjs: the official TypeScript SDK's
// client, one connection, the calls in order; with list it also lists the
// tools first.
type sdkResult struct {
	IsError       bool            `json:"isError"`
	Text          string          `json:"text"`
	Structured    json.RawMessage `json:"structured"`
	ProtocolError string          `json:"protocolError"`
	Resources     []struct {
		URI      string `json:"uri"`
		MimeType string `json:"mimeType"`
		Size     int    `json:"size"`
		SHA256   string `json:"sha256"`
	} `json:"resources"`
}

func sdkCalls(t *testing.T, url string, headers map[string]string, list bool, calls ...sdkCall) (tools []string, results []sdkResult) {
	t.Helper()
	var out struct {
		Tools   []string    `json:"tools"`
		Results []sdkResult `json:"results"`
	}
	runNode(t, clientsDir(t), "calls.mjs", map[string]any{"url": url, "headers": headers, "list": list, "calls": calls}, &out)
	if len(out.Results) != len(calls) {
		t.Fatalf("%d results for %d calls", len(out.Results), len(calls))
	}
	return out.Tools, out.Results
}

type sdkCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// ok asserts a successful call and decodes its structured result into v.
func (r sdkResult) ok(t *testing.T, what string, v any) {
	t.Helper()
	if r.ProtocolError != "" || r.IsError {
		t.Fatalf("%s: protocol error %q, tool error %v %q", what, r.ProtocolError, r.IsError, r.Text)
	}
	if v != nil {
		if err := json.Unmarshal(r.Structured, v); err != nil {
			t.Fatalf("%s: structured result %s: %v", what, r.Structured, err)
		}
	}
}

// refused asserts a tool error whose text contains says.
func (r sdkResult) refused(t *testing.T, what, says string) {
	t.Helper()
	if r.ProtocolError != "" || !r.IsError || !strings.Contains(r.Text, says) {
		t.Errorf("%s: protocol error %q, isError %v %q; want a tool error saying %q", what, r.ProtocolError, r.IsError, r.Text, says)
	}
}

// Working a mailbox the way an agent does, through the official TypeScript
// SDK against Dovecot and Postfix: a token narrowed to organize without
// sending lists and allows exactly that (flags, a new folder, move, trash;
// no permanent deletion, no sending, no folder deletion), a draft saved and
// then sent, a forward with its attachment, an attachment read inline, and
// the REST mirror doing the same. Every effect is checked with a direct
// IMAP client of the test's own, and every refusal left the mailbox as it
// was.
func TestWorkingAMailboxThroughTypeScriptSDK(t *testing.T) {
	clientsDir(t)
	s := sendStack(t)
	g := startGateway(t, s, smtpEnv(s, "MAILBOX_ACCESS=full")...)
	d := direct(t, s, alice)
	full := userHeaders(s, alice)

	blob := randomBlob(150_000, 11)
	sum := sha256.Sum256(blob)
	withFile := appendTo(t, d, "INBOX", forwardOriginal("working-sdk-1@example.test", "Zahlen mit Anhang", blob))
	flagMe := appendMsg(t, d, "INBOX", "sdk: flag me")
	moveMe := appendMsg(t, d, "INBOX", "sdk: move me")
	trashMe := appendMsg(t, d, "INBOX", "sdk: trash me")
	const projects, empty = "SDK Projekte ✓", "SDK Leer"

	// 1. With header credentials: a narrowed token, a draft, the
	// attachment.
	_, res := sdkCalls(t, g.URL, full, false,
		sdkCall{"imap_encrypt_credentials", map[string]any{"access": "organize", "send": false}},
		sdkCall{"imap_save_draft", map[string]any{"to": []any{"Bob <" + bob + ">"}, "subject": "sdk: draft to send", "text": "Entwurf, später gesendet."}},
		sdkCall{"imap_get_attachment", map[string]any{"uid": withFile, "part_id": "2"}},
	)
	var token struct {
		Token  string `json:"token"`
		Access string `json:"access"`
		Send   bool   `json:"send"`
	}
	res[0].ok(t, "imap_encrypt_credentials", &token)
	if token.Access != "organize" || token.Send || !strings.HasPrefix(token.Token, "mbx") {
		t.Fatalf("token: access %q send %v", token.Access, token.Send)
	}
	var draft struct {
		UID    uint32 `json:"uid"`
		Folder string `json:"folder"`
	}
	res[1].ok(t, "imap_save_draft", &draft)
	if fl, ok := draftFlags(t, d, "Drafts", draft.UID); !ok || !slices.Contains(fl, imap.FlagDraft) {
		t.Fatalf("draft uid %d in %s: Dovecot has it %v with flags %v", draft.UID, draft.Folder, ok, fl)
	}
	var att struct {
		Delivery string `json:"delivery"`
		Filename string `json:"filename"`
		SHA256   string `json:"sha256"`
	}
	res[2].ok(t, "imap_get_attachment", &att)
	if att.Delivery != "inline" || att.Filename != "zahlen.bin" || att.SHA256 != hex.EncodeToString(sum[:]) ||
		len(res[2].Resources) != 1 || res[2].Resources[0].SHA256 != att.SHA256 || res[2].Resources[0].Size != len(blob) {
		t.Errorf("attachment: %+v, resources %+v (want %d bytes, sha256 %x)", att, res[2].Resources, len(blob), sum)
	}

	// 2. With the narrowed token in the x-mailbox-token header.
	before := flagsIn(t, d, "INBOX")
	bobBefore := count(t, s, bob, "INBOX")
	listed, res := sdkCalls(t, g.URL, map[string]string{"x-mailbox-token": token.Token}, true,
		sdkCall{"imap_set_flags", map[string]any{"uids": uidArgs(flagMe), "add": []any{"flagged", "$Work"}}},
		sdkCall{"imap_create_folder", map[string]any{"name": projects}},
		sdkCall{"imap_create_folder", map[string]any{"name": empty}},
		sdkCall{"imap_move_emails", map[string]any{"uids": uidArgs(moveMe), "to_folder": projects}},
		sdkCall{"imap_trash_emails", map[string]any{"uids": uidArgs(trashMe)}},
		sdkCall{"imap_trash_emails", map[string]any{"uids": uidArgs(flagMe), "permanent": true}},
		sdkCall{"smtp_send_email", map[string]any{"to": []any{bob}, "subject": "must not go", "text": "x"}},
		sdkCall{"smtp_send_draft", map[string]any{"uid": draft.UID}},
		sdkCall{"imap_delete_folder", map[string]any{"folder": empty}},
	)
	for _, want := range []string{"imap_set_flags", "imap_move_emails", "imap_trash_emails", "imap_create_folder", "imap_rename_folder", "imap_save_draft", "imap_get_attachment"} {
		if !slices.Contains(listed, want) {
			t.Errorf("the organize token's tools/list lacks %s: %v", want, listed)
		}
	}
	for _, not := range []string{"imap_delete_folder", "smtp_send_email", "smtp_reply_email", "smtp_forward_email", "smtp_send_draft"} {
		if slices.Contains(listed, not) {
			t.Errorf("the organize, no-send token's tools/list shows %s", not)
		}
	}
	for i, name := range []string{"imap_set_flags", "imap_create_folder", "imap_create_folder", "imap_move_emails", "imap_trash_emails"} {
		res[i].ok(t, name, nil)
	}
	res[5].refused(t, "permanent trash with an organize token", "needs the full access level, and the credentials token or sign-in allows organize")
	res[6].refused(t, "smtp_send_email with a no-send token", "the credentials token or sign-in does not allow sending")
	res[7].refused(t, "smtp_send_draft with a no-send token", "the credentials token or sign-in does not allow sending")
	res[8].refused(t, "imap_delete_folder with an organize token", "needs the full access level")

	now := flagsIn(t, d, "INBOX")
	if now[flagMe] != `$Work \Flagged` {
		t.Errorf("flagged message: Dovecot has %q", now[flagMe])
	}
	if _, there := now[moveMe]; there {
		t.Error("the moved message is still in INBOX")
	}
	if _, there := now[trashMe]; there {
		t.Error("the trashed message is still in INBOX")
	}
	for uid, f := range before {
		if uid != flagMe && uid != moveMe && uid != trashMe && now[uid] != f {
			t.Errorf("uid %d changed from %q to %q", uid, f, now[uid])
		}
	}
	if subj := subjectsIn(t, d, projects); !slices.Contains(slices.Collect(maps.Values(subj)), "sdk: move me") {
		t.Errorf("%s holds %v", projects, subj)
	}
	if subj := subjectsIn(t, d, "Trash"); !slices.Contains(slices.Collect(maps.Values(subj)), "sdk: trash me") {
		t.Errorf("Trash holds %v", subj)
	}
	if _, ok := draftFlags(t, d, "Drafts", draft.UID); !ok {
		t.Error("the refused smtp_send_draft removed the draft")
	}
	if !folderExists(t, d, empty) {
		t.Errorf("the refused imap_delete_folder removed %s", empty)
	}
	time.Sleep(time.Second) // anything wrongly sent would have been delivered by now
	if n := count(t, s, bob, "INBOX"); n != bobBefore {
		t.Errorf("bob's INBOX went from %d to %d while sending was refused", bobBefore, n)
	}

	// 3. With header credentials (full): the draft goes out, the message
	// with the file is forwarded, the empty folder deleted.
	_, res = sdkCalls(t, g.URL, full, false,
		sdkCall{"smtp_send_draft", map[string]any{"uid": draft.UID}},
		sdkCall{"smtp_forward_email", map[string]any{"uid": withFile, "to": []any{bob}, "text": "Zur Info."}},
		sdkCall{"imap_delete_folder", map[string]any{"folder": empty}},
	)
	var sent, fwd struct {
		MessageID string `json:"message_id"`
	}
	res[0].ok(t, "smtp_send_draft", &sent)
	res[1].ok(t, "smtp_forward_email", &fwd)
	res[2].ok(t, "imap_delete_folder", nil)
	if _, err := s.WaitMessages(bob, "INBOX", bobBefore+2, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	bd := direct(t, s, bob)
	if m := findByMessageID(t, bd, "INBOX", sent.MessageID); !strings.Contains(string(m.raw), "Entwurf, sp") {
		t.Errorf("the sent draft arrived without its text:\n%s", m.raw)
	}
	if _, ok := draftFlags(t, d, "Drafts", draft.UID); ok {
		t.Error("the sent draft is still in Drafts")
	}
	findByMessageID(t, d, "Sent", sent.MessageID)
	m := findByMessageID(t, bd, "INBOX", fwd.MessageID)
	if _, _, atts := parts(t, m.raw); sha256.Sum256(atts["zahlen.bin"]) != sum {
		t.Errorf("the forward carried %d bytes of zahlen.bin, not the original's %d", len(atts["zahlen.bin"]), len(blob))
	}
	if folderExists(t, d, empty) {
		t.Errorf("%s still exists after imap_delete_folder", empty)
	}

	// 4. The REST mirror: the same operations at their routes.
	restFlag := appendMsg(t, d, "INBOX", "rest: flag me")
	var flags struct {
		Messages []struct {
			UID uint32 `json:"uid"`
		} `json:"messages"`
	}
	restCall(t, g, "POST", "/v1/emails/flags", full, map[string]any{"uids": uidArgs(restFlag), "add": []any{"seen"}}).decode(t, &flags)
	if f := flagsIn(t, d, "INBOX")[restFlag]; f != `\Seen` || len(flags.Messages) != 1 {
		t.Errorf("POST /v1/emails/flags: Dovecot has %q, result %+v", f, flags)
	}
	restCall(t, g, "POST", "/v1/emails/move", full, map[string]any{"uids": uidArgs(restFlag), "to_folder": projects}).decode(t, &struct{}{})
	if subj := subjectsIn(t, d, projects); !slices.Contains(slices.Collect(maps.Values(subj)), "rest: flag me") {
		t.Errorf("POST /v1/emails/move: %s holds %v", projects, subj)
	}
	var restAtt struct {
		SHA256 string `json:"sha256"`
	}
	restCall(t, g, "GET", "/v1/emails/"+strconv.Itoa(int(withFile))+"/attachments/2", full, nil).decode(t, &restAtt)
	if restAtt.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("GET /v1/emails/{uid}/attachments/2: sha256 %s", restAtt.SHA256)
	}
	msg := restCall(t, g, "POST", "/v1/folders/delete", map[string]string{"x-mailbox-token": token.Token}, map[string]any{"folder": projects}).failure(t, 403, "forbidden")
	if !strings.Contains(msg, "needs the full access level") || !folderExists(t, d, projects) {
		t.Errorf("POST /v1/folders/delete with an organize token: %q", msg)
	}
}

// folderExists asks Dovecot, with a LIST of its own, whether name exists.
func folderExists(t *testing.T, d *imapclient.Client, name string) bool {
	t.Helper()
	found, err := d.List("", name, nil).Collect()
	if err != nil {
		t.Fatalf("LIST %q: %v", name, err)
	}
	return len(found) == 1
}
