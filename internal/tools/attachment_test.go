package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/download"
)

// demoTagUID is the UID of the demo message tagged tag in folder.
func demoTagUID(t *testing.T, srv *demo.Server, user, folder, tag string) uint32 {
	t.Helper()
	var n uint32
	for _, m := range srv.Messages(user) {
		if m.Folder == folder {
			n++
			if m.Tag == tag {
				return n
			}
		}
	}
	t.Fatalf("no demo message %q in %s", tag, folder)
	return 0
}

// callAttachment calls imap_get_attachment as user, with base as the
// gateway's address ("" for none).
func callAttachment(t *testing.T, tool Tool, user demo.User, base string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx := credentials.NewContext(context.Background(), credentials.New(user.Address, user.Password))
	if base != "" {
		ctx = download.WithBase(ctx, base)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = tool.Def.Name
	req.Params.Arguments = args
	res, err := tool.Handler(ctx, req)
	if err != nil {
		t.Fatalf("Go error %v", err)
	}
	return res
}

func attachmentResult(t *testing.T, res *mcp.CallToolResult) AttachmentResult {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", resultText(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	var r AttachmentResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`"blob"`)) || len(b) > 4000 {
		t.Fatalf("the structured result carries the content: %d bytes", len(b))
	}
	return r
}

func TestGetAttachmentInline(t *testing.T) {
	d, srv := demoDeps(t)
	alice := srv.Users[0]
	tool := getAttachment.bind(d)
	if err := checkContract(tool.Def); err != nil {
		t.Fatal(err)
	}
	uid := demoTagUID(t, srv, alice.Address, demo.FolderInbox, demo.TagPDF)
	res := callAttachment(t, tool, alice, "", map[string]any{"uid": uid, "part_id": "2"})
	r := attachmentResult(t, res)
	if r.Delivery != "inline" || r.Filename != "Service-Agreement-signed.pdf" || r.ContentType != "application/pdf" || r.Folder != "INBOX" || r.UID != uid {
		t.Fatalf("result %+v", r)
	}
	if len(res.Content) != 2 {
		t.Fatalf("%d content blocks, want text and the embedded resource", len(res.Content))
	}
	er, ok := res.Content[1].(mcp.EmbeddedResource)
	if !ok {
		t.Fatalf("second block is %T", res.Content[1])
	}
	blob, ok := er.Resource.(mcp.BlobResourceContents)
	if !ok {
		t.Fatalf("resource is %T", er.Resource)
	}
	data, err := base64.StdEncoding.DecodeString(blob.Blob)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if !bytes.HasPrefix(data, []byte("%PDF-")) || hex.EncodeToString(sum[:]) != r.SHA256 || int64(len(data)) != r.Size {
		t.Fatalf("blob of %d bytes (%q…), sha256 %x, result says %s and %d bytes", len(data), data[:min(8, len(data))], sum, r.SHA256, r.Size)
	}
	wantURI := "mailbox://INBOX/" + jsonNumber(uid) + "/attachments/2"
	if blob.URI != wantURI || r.URI != wantURI || blob.MIMEType != "application/pdf" {
		t.Fatalf("resource %s %s, result uri %s; want %s", blob.URI, blob.MIMEType, r.URI, wantURI)
	}
	text := resultText(res)
	if strings.Contains(text, blob.Blob[:40]) || !strings.Contains(text, r.SHA256) || !strings.Contains(text, UntrustedNote) {
		t.Fatalf("text: %s", text)
	}

	// Not an attachment, not there, not a part number.
	for _, tc := range []struct {
		args map[string]any
		says string
	}{
		{map[string]any{"uid": uid, "part_id": "1"}, `part_id "1" of message UID ` + jsonNumber(uid) + ` in folder "INBOX" is not an attachment; its only attachment is part_id 2`},
		{map[string]any{"uid": 9999, "part_id": "2"}, "no message with UID 9999"},
		{map[string]any{"uid": uid, "part_id": "../2"}, "part_id must be a part number"},
		{map[string]any{"uid": uid}, "part_id"},
		{map[string]any{"folder": "Nope", "uid": uid, "part_id": "2"}, `folder "Nope" does not exist`},
	} {
		res := callAttachment(t, tool, alice, "", tc.args)
		if !res.IsError || !strings.Contains(resultText(res), tc.says) {
			t.Errorf("%v: %s", tc.args, resultText(res))
		}
	}
}

func jsonNumber(n uint32) string { b, _ := json.Marshal(n); return string(b) }

// Over the inline limit, the result is a link that the download handler
// serves, byte for byte; without a known address there is no link.
func TestGetAttachmentLink(t *testing.T) {
	d, srv := demoDeps(t)
	alice := srv.Users[0]
	big := make([]byte, defaultInlineAttachment+123)
	rand.NewChaCha8([32]byte{7}).Read(big)
	appendWithAttachment(t, srv.IMAPAddr, alice, "big.bin", big)
	uid := uint32(srv.Seeded(alice.Address, demo.FolderInbox) + 1)

	mux := http.NewServeMux()
	mux.Handle(download.Prefix, download.New(d.Sealer, d.Mailbox, nil, slog.New(slog.DiscardHandler)))
	ts := httptest.NewServer(mux)
	defer ts.Close()

	tool := getAttachment.bind(d)
	res := callAttachment(t, tool, alice, ts.URL, map[string]any{"uid": uid, "part_id": "2"})
	r := attachmentResult(t, res)
	if r.Delivery != "link" || r.ExpiresAt == nil || r.SHA256 != "" || !strings.HasPrefix(r.URL, ts.URL+"/attachments/att1.") || !strings.HasSuffix(r.URL, "/big.bin") {
		t.Fatalf("result %+v", r)
	}
	if strings.Contains(r.URL, alice.Password) || strings.Contains(r.URL, "alice") {
		t.Fatalf("the URL shows the login: %s", r.URL)
	}
	link, ok := res.Content[1].(mcp.ResourceLink)
	if !ok || link.URI != r.URL || link.Name != "big.bin" || link.Size == nil || *link.Size != r.Size {
		t.Fatalf("content %#v", res.Content[1])
	}
	resp, err := http.Get(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, big) {
		t.Fatalf("download: %s, %d bytes, equal %v", resp.Status, len(got), bytes.Equal(got, big))
	}

	res = callAttachment(t, tool, alice, "", map[string]any{"uid": uid, "part_id": "2"})
	if !res.IsError || !strings.Contains(resultText(res), "PUBLIC_URL") {
		t.Fatalf("without an address: %s", resultText(res))
	}
}

// appendWithAttachment appends to user's INBOX a message whose part 2 is
// data as a base64 attachment named name.
func appendWithAttachment(t *testing.T, addr string, user demo.User, name string, data []byte) {
	t.Helper()
	c, err := imapclient.DialInsecure(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(user.Address, user.Password).Wait(); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString("From: peer@example.org\r\nTo: " + user.Address + "\r\nSubject: big file\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/plain\r\n\r\nhere\r\n--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=" + name + "\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString(data)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--b--\r\n")
	cmd := c.Append("INBOX", int64(b.Len()), nil)
	cmd.Write(b.Bytes())
	cmd.Close()
	if _, err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

// benchAttachment is imap_get_attachment's answer for a 20 KB PDF, as
// the latency bench's fixture has (cmd/mailbox-bench/rtt.go).
func benchAttachment() AttachmentResult {
	data := make([]byte, 20<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	sum := sha256.Sum256(data)
	r := AttachmentResult{Folder: "INBOX", UID: 201, Delivery: "inline", SHA256: hex.EncodeToString(sum[:]), blob: base64.StdEncoding.EncodeToString(data),
		URI: resourceRef{Folder: "INBOX", UID: 201, PartID: "2"}.String(), Untrusted: newFence().describe("filename")}
	r.PartID, r.ContentType, r.Filename, r.Size = "2", "application/pdf", "report.pdf", int64(len(data))
	return r
}

// BenchmarkAttachmentAnswer is what one inline attachment costs on each
// side of the HTTP connection once it is read: "render" our content
// blocks, "encode" mcp-go's encoding of the JSON-RPC answer (json.Encoder
// over mcp.CallToolResult's MarshalJSON, which encoding/json compacts
// byte by byte), "client-parse" what mcp-go's client does with the
// answer's bytes (transport.StreamableHTTP's Decode, then
// mcp.ParseCallToolResult, which unmarshals the content blocks again,
// level by level).
func BenchmarkAttachmentAnswer(b *testing.B) {
	r := benchAttachment()
	result := func() *mcp.CallToolResult {
		res := mcp.NewToolResultStructured(r, attachmentText(r))
		res.Content = append(res.Content, attachmentContent(r)...)
		return res
	}
	resp := mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(1), Result: result()}
	var wire bytes.Buffer
	if err := json.NewEncoder(&wire).Encode(resp); err != nil {
		b.Fatal(err)
	}
	b.Run("render", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			result()
		}
	})
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(wire.Len()))
		for b.Loop() {
			resp.Result = result()
			if err := json.NewEncoder(io.Discard).Encode(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("client-parse", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(wire.Len()))
		for b.Loop() {
			var got struct {
				Result json.RawMessage `json:"result"`
			}
			if err := json.NewDecoder(bytes.NewReader(wire.Bytes())).Decode(&got); err != nil {
				b.Fatal(err)
			}
			if _, err := mcp.ParseCallToolResult(&got.Result); err != nil {
				b.Fatal(err)
			}
		}
	})
}
