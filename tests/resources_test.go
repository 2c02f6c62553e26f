package tests

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// The gateway's MCP resources and prompts through the official TypeScript
// SDK, against Dovecot: resources/list is the user's 20 newest INBOX
// messages, reading a message gives imap_read_email's fenced text, reading
// an attachment its exact bytes (or, above MAX_ATTACHMENT_BYTES, a refusal
// naming imap_get_attachment), a folder with "/" in its name works
// percent-encoded, a missing message is an error with the URI in data,
// and none of it sets \Seen (checked with a bare IMAP client). prompts/get
// expands a prompt and refuses a bad argument as invalid params.
func TestResourcesAndPromptsThroughTypeScriptSDK(t *testing.T) {
	dir := clientsDir(t)
	const (
		user, pass = "resources@example.test", "resourcespw"
		folder     = "Projects/Q3"
		limit      = 256 << 10 // MAX_ATTACHMENT_BYTES
	)
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: pass}})
	if err := s.Seed(user, 25, "INBOX"); err != nil {
		t.Fatal(err)
	}
	c := direct(t, s, user)
	small, large := randomBytes(t, 150<<10), randomBytes(t, 300<<10)
	attUID := appendRaw(t, c, "INBOX", attachmentMessage(small, large))
	if err := c.Create(folder, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	folderUID := appendRaw(t, c, folder, "From: Planner <planner@example.org>\nTo: "+user+"\nSubject: Q3 plan\n"+
		"Date: Tue, 03 Nov 2026 09:00:00 +0000\nMessage-ID: <q3@example.org>\n\nThe Q3 plan is written here.\n")
	want := newest20(t, s, user)
	if want[0].UID != attUID {
		t.Fatalf("the appended message is uid %d, the newest %d", attUID, want[0].UID)
	}
	g := startGateway(t, s, fmt.Sprintf("MAX_ATTACHMENT_BYTES=%d", limit))

	seen := func(f string, uid uint32) bool {
		if _, err := c.Select(f, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(flagsOf(t, c, imap.UID(uid)), imap.FlagSeen)
	}
	if seen("INBOX", attUID) || seen(folder, folderUID) {
		t.Fatal("the appended messages are \\Seen before any read: the check below would prove nothing")
	}

	msgURI := fmt.Sprintf("mailbox://INBOX/%d", attUID)
	smallURI, largeURI := msgURI+"/attachments/2", msgURI+"/attachments/3"
	folderURI := fmt.Sprintf("mailbox://Projects%%2FQ3/%d", folderUID)
	missingURI := "mailbox://INBOX/4000000"
	var out struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
		Resources       []struct {
			URI, Name, Description, MimeType string
			Size                             int64
		} `json:"resources"`
		Templates []struct {
			URITemplate string `json:"uriTemplate"`
		} `json:"templates"`
		Reads []struct {
			URI      string
			Contents []struct{ URI, MimeType, Text, Blob string }
			Error    *rpcErr
		} `json:"reads"`
		Missing struct {
			Error  *rpcErr
			Result any
		} `json:"missing"`
		Prompts []struct{ Name string } `json:"prompts"`
		Prompt  struct {
			Messages []struct {
				Role    string
				Content struct{ Type, Text string }
			}
		} `json:"prompt"`
		BadPrompt struct{ Error *rpcErr } `json:"badPrompt"`
	}
	runNode(t, dir, "resources.mjs", map[string]any{
		"url": g.URL, "headers": userHeaders(s, user),
		"read":      []string{msgURI, smallURI, largeURI, folderURI},
		"missing":   missingURI,
		"prompt":    map[string]any{"name": "draft_reply", "arguments": map[string]string{"uid": fmt.Sprint(attUID), "intent": "thank them for the files"}},
		"badPrompt": map[string]any{"name": "summarize_thread", "arguments": map[string]string{"uid": "zero"}},
	}, &out)
	t.Logf("the SDK spoke protocol %s", out.ProtocolVersion)

	t.Run("capabilities_resources_and_prompts", func(t *testing.T) {
		if out.Capabilities["resources"] == nil || out.Capabilities["prompts"] == nil {
			t.Errorf("capabilities %v", out.Capabilities)
		}
	})
	t.Run("list_is_the_20_newest_"+uidRange(want), func(t *testing.T) {
		if len(out.Resources) != 20 {
			t.Fatalf("%d resources, want 20", len(out.Resources))
		}
		for i, r := range out.Resources {
			name := []rune(mailmsg.SanitizeLine(want[i].Subject))
			if len(name) > 200 {
				name = append(name[:200], '…')
			}
			if len(name) == 0 {
				name = []rune("(no subject)")
			}
			if r.URI != fmt.Sprintf("mailbox://INBOX/%d", want[i].UID) || r.MimeType != "text/plain" || r.Size <= 0 || r.Name != string(name) {
				t.Errorf("resource %d: %+v, want uid %d named %q", i, r, want[i].UID, name)
			}
		}
	})
	t.Run("two_templates", func(t *testing.T) {
		var got []string
		for _, x := range out.Templates {
			got = append(got, x.URITemplate)
		}
		slices.Sort(got)
		if strings.Join(got, " ") != "mailbox://{folder}/{uid}/attachments/{part_id} mailbox://{folder}/{uid}{?include_hidden}" {
			t.Errorf("templates %v", got)
		}
	})
	read := func(t *testing.T, i int) (string, string, string) {
		t.Helper()
		r := out.Reads[i]
		if r.Error != nil || len(r.Contents) != 1 || r.Contents[0].URI != r.URI {
			t.Fatalf("read %s: %+v", r.URI, r)
		}
		return r.Contents[0].MimeType, r.Contents[0].Text, r.Contents[0].Blob
	}
	t.Run("message_is_fenced_text", func(t *testing.T) {
		mt, text, _ := read(t, 0)
		for _, w := range []string{tools.UntrustedNote, "Subject: Files for the resource test\n", "The two files are attached.",
			"Attachment: small.png (image/png, ", ", part 2)\n", "Attachment: large.bin (application/octet-stream, ", ", part 3)\n"} {
			if !strings.Contains(text, w) {
				t.Errorf("the text lacks %q:\n%s", w, text)
			}
		}
		if mt != "text/plain" || !strings.HasPrefix(text, fmt.Sprintf("Message uid %d in INBOX", attUID)) {
			t.Errorf("mimeType %q, text starts %q", mt, text[:min(len(text), 60)])
		}
	})
	t.Run("attachment_has_the_same_sha256", func(t *testing.T) {
		mt, _, blob := read(t, 1)
		b, err := base64.StdEncoding.DecodeString(blob)
		if err != nil || sha256.Sum256(b) != sha256.Sum256(small) || mt != "image/png" {
			t.Errorf("attachment: %d bytes (sent %d), mimeType %q, %v", len(b), len(small), mt, err)
		}
	})
	t.Run("attachment_over_the_limit_points_to_imap_get_attachment", func(t *testing.T) {
		e := out.Reads[2].Error
		if e == nil || !strings.Contains(e.Message, "more than the 256 KiB this gateway returns inline") || !strings.Contains(e.Message, "imap_get_attachment") {
			t.Errorf("got %+v", out.Reads[2])
		}
	})
	t.Run("folder_with_a_slash", func(t *testing.T) {
		_, text, _ := read(t, 3)
		if !strings.Contains(text, `in Projects/Q3`) || !strings.Contains(text, "Subject: Q3 plan") {
			t.Errorf("text:\n%s", text)
		}
	})
	t.Run("missing_message_is_an_error_with_the_uri", func(t *testing.T) {
		code := -32002 // resource not found, up to 2025-11-25
		if out.ProtocolVersion == "2026-07-28" {
			code = -32602
		}
		e := out.Missing.Error
		if e == nil || e.Code != code || e.Data["uri"] != missingURI || !strings.Contains(e.Message, "no message with UID 4000000") {
			t.Errorf("got %+v, result %v", e, out.Missing.Result)
		}
	})
	t.Run("reading_left_seen_unchanged", func(t *testing.T) {
		for f, uid := range map[string]uint32{"INBOX": attUID, folder: folderUID} {
			if seen(f, uid) {
				t.Errorf("%s uid %d is \\Seen after the reads", f, uid)
			}
		}
	})
	t.Run("prompts", func(t *testing.T) {
		var names []string
		for _, p := range out.Prompts {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		if strings.Join(names, " ") != "draft_reply summarize_thread triage_inbox" {
			t.Errorf("prompts %v", names)
		}
		m := out.Prompt.Messages
		if len(m) != 1 || m[0].Role != "user" || m[0].Content.Type != "text" ||
			!strings.Contains(m[0].Content.Text, fmt.Sprintf("uid %d", attUID)) || !strings.Contains(m[0].Content.Text, "thank them for the files") {
			t.Errorf("draft_reply: %+v", m)
		}
		if e := out.BadPrompt.Error; e == nil || e.Code != -32602 || !strings.Contains(e.Message, `uid must be a positive message UID, from imap_list_emails or imap_search_emails (got "zero")`) {
			t.Errorf("bad argument: %+v", e)
		}
	})
}

// rpcErr is a JSON-RPC error as the client script reports it.
type rpcErr struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data"`
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// attachmentMessage is a message with a text body and two base64
// attachments: part 2 (image/png) and part 3.
func attachmentMessage(small, large []byte) string {
	var b strings.Builder
	b.WriteString("From: Sender <sender@example.org>\nTo: resources@example.test\nSubject: Files for the resource test\n" +
		"Date: Mon, 02 Nov 2026 09:00:00 +0000\nMessage-ID: <files@example.org>\nMIME-Version: 1.0\n" +
		"Content-Type: multipart/mixed; boundary=\"b1\"\n\n--b1\nContent-Type: text/plain; charset=utf-8\n\nThe two files are attached.\n")
	for _, a := range []struct {
		name, ct string
		data     []byte
	}{{"small.png", "image/png", small}, {"large.bin", "application/octet-stream", large}} {
		fmt.Fprintf(&b, "--b1\nContent-Type: %s\nContent-Disposition: attachment; filename=\"%s\"\nContent-Transfer-Encoding: base64\n\n%s\n",
			a.ct, a.name, wrap76(base64.StdEncoding.EncodeToString(a.data)))
	}
	b.WriteString("--b1--\n")
	return b.String()
}
