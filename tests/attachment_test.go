package tests

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// Attachments against Dovecot and Postfix, through the gateway binary run
// as its own process (so that its memory can be read from /proc): a
// 200 KB file sent by alice through smtp_send_email comes back to bob from
// imap_get_attachment inline, byte for byte; a 30 MiB one comes back
// through the download link with the gateway's RSS growing by less than
// 10 MB while it streams; expired, altered and re-aimed links get 403; a
// part that is not an attachment is refused; nothing of it sets \Seen.
func TestAttachmentsEndToEnd(t *testing.T) {
	s := sendStack(t)
	bin := buildGateway(t)
	key, _ := credentials.NewKey()
	// One mail connection per user: a download that pinned it would stall
	// every other call of the same user.
	g := serveProcess(t, bin, s, key, append(smtpEnv(s), "MAX_POOL_PER_USER=1")...)
	ac := mailtest.MCPClient(t, g.URL, userHeaders(s, alice), "")
	bc := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	d := direct(t, s, bob)

	// 200 KB, sent by alice through the gateway.
	small := attRandom(1, 200_000)
	sent := sendCall(t, ac, "smtp_send_email", map[string]any{
		"to": []any{bob}, "subject": "200 KB attachment", "text": "the file is attached",
		"attachments": []any{map[string]any{"filename": "random-200k.bin", "content_type": "application/octet-stream", "content_base64": base64.StdEncoding.EncodeToString(small)}},
	})
	smallUID := uint32(findByMessageID(t, d, "INBOX", sent.MessageID).uid)

	// 30 MiB: more than Postfix's default message_size_limit (10 MB), so
	// appended to bob's INBOX directly.
	large := attRandom(2, 30<<20)
	largeUID := attAppend(t, d, "30 MiB attachment", "random-30m.bin", large)
	seenBefore := attSeen(t, d, smallUID, largeUID)

	t.Run("listed and annotated", func(t *testing.T) {
		tool, ok := toolNames(t, g.URL, nil)["imap_get_attachment"]
		if !ok {
			t.Fatal("imap_get_attachment is not listed")
		}
		a := tool.Annotations
		if !*a.ReadOnlyHint || *a.DestructiveHint || !*a.IdempotentHint || !*a.OpenWorldHint {
			t.Fatalf("annotations %+v", a)
		}
	})

	var partID string
	t.Run("200 KB inline with the same SHA-256", func(t *testing.T) {
		var msg tools.MessageResult
		mailtest.Decode(t, mailtest.Call(t, bc, "imap_read_email", map[string]any{"uid": smallUID}), &msg)
		for _, a := range msg.Attachments {
			if a.Filename == "random-200k.bin" {
				partID = a.PartID
			}
		}
		if partID == "" {
			t.Fatalf("imap_read_email lists no random-200k.bin: %+v", msg.Attachments)
		}
		res := mailtest.Call(t, bc, "imap_get_attachment", map[string]any{"uid": smallUID, "part_id": partID})
		var r tools.AttachmentResult
		mailtest.Decode(t, res, &r)
		want := sha256.Sum256(small)
		blob := attBlob(t, res)
		got := sha256.Sum256(blob)
		if got != want || r.SHA256 != hex.EncodeToString(want[:]) || r.Delivery != "inline" || r.Size != int64(len(small)) {
			t.Fatalf("blob of %d bytes, sha256 %x; result %+v; want sha256 %x", len(blob), got, r, want)
		}
	})

	t.Run("part that is not an attachment", func(t *testing.T) {
		res := mailtest.Call(t, bc, "imap_get_attachment", map[string]any{"uid": smallUID, "part_id": "1"})
		want := fmt.Sprintf(`part_id "1" of message UID %d in folder "INBOX" is not an attachment; its only attachment is part_id %s`, smallUID, partID)
		if !res.IsError || !strings.Contains(mailtest.Text(res), want) {
			t.Fatalf("got %q, want an error saying %q", mailtest.Text(res), want)
		}
	})

	var link string
	t.Run("30 MiB through the link, RSS bounded", func(t *testing.T) {
		res := mailtest.Call(t, bc, "imap_get_attachment", map[string]any{"uid": largeUID, "part_id": "2"})
		var r tools.AttachmentResult
		mailtest.Decode(t, res, &r)
		rl := attLink(t, res)
		if r.Delivery != "link" || rl.URI != r.URL || r.ExpiresAt == nil || time.Until(*r.ExpiresAt) > 10*time.Minute || time.Until(*r.ExpiresAt) < 9*time.Minute {
			t.Fatalf("result %+v, link %+v", r, rl)
		}
		if strings.Contains(r.URL, bob) || strings.Contains(r.URL, s.Users[bob]) {
			t.Fatalf("the URL shows the login: %s", r.URL)
		}
		link = r.URL
		rssBefore, hwmBefore := procMemory(t, g.PID)
		var peak int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // sample the gateway's RSS while it streams
			defer wg.Done()
			for {
				rss, _ := procMemory(t, g.PID)
				peak = max(peak, rss)
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
		start := time.Now()
		resp, err := http.Get(r.URL)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		n, err := io.Copy(h, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		close(stop)
		wg.Wait()
		rssAfter, hwmAfter := procMemory(t, g.PID)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("download: %s after %d bytes: %v", resp.Status, n, err)
		}
		want := sha256.Sum256(large)
		if got := h.Sum(nil); !bytes.Equal(got, want[:]) || n != int64(len(large)) {
			t.Fatalf("downloaded %d bytes, sha256 %x; want %d bytes, %x", n, got, len(large), want)
		}
		if ct, cd := resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"); ct != "application/octet-stream" || !strings.Contains(cd, "random-30m.bin") {
			t.Errorf("headers: %s; %s", ct, cd)
		}
		t.Logf("30 MiB download: %v (%.1f MB/s); gateway VmRSS before %.1f MB, peak sampled %.1f MB (+%.1f MB), after %.1f MB; VmHWM before %.1f MB, after %.1f MB",
			took.Round(time.Millisecond), float64(n)/1e6/took.Seconds(), mb(rssBefore), mb(peak), mb(peak-rssBefore), mb(rssAfter), mb(hwmBefore), mb(hwmAfter))
		if growth := max(peak, rssAfter) - rssBefore; growth >= 10<<20 {
			t.Errorf("the gateway's RSS grew by %.1f MB during the download (limit 10 MB)", mb(growth))
		}
	})

	t.Run("a stalled download pins no mail connection", func(t *testing.T) {
		var r tools.AttachmentResult
		mailtest.Decode(t, mailtest.Call(t, bc, "imap_get_attachment", map[string]any{"uid": largeUID, "part_id": "2"}), &r)
		u, _ := url.Parse(r.URL)
		// A fixed receive buffer (no autotuning): with the gateway's send
		// buffer (tcp_wmem at most 4 MiB) far less than the 30 MiB can be
		// in flight, so the handler is mid-stream while the client stalls.
		dialer := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 256<<10) })
		}}
		conn, err := dialer.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET "+u.RequestURI()+" HTTP/1.1\r\nHost: "+u.Host+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		h := sha256.New()
		if _, err := io.CopyN(h, resp.Body, 256<<10); err != nil {
			t.Fatal(err)
		}
		// The socket buffers (a few MB) fill; the handler blocks in a write.
		time.Sleep(time.Second)
		start := time.Now()
		res := mailtest.Call(t, bc, "imap_read_email", map[string]any{"uid": smallUID, "max_chars": 100})
		took := time.Since(start)
		if res.IsError || took > 3*time.Second {
			t.Fatalf("another call of the same user during the stalled download: %v, %s", took, mailtest.Text(res))
		}
		n, err := io.Copy(h, resp.Body)
		want := sha256.Sum256(large)
		if err != nil || n+256<<10 != int64(len(large)) || !bytes.Equal(h.Sum(nil), want[:]) {
			t.Fatalf("after the stall: %d more bytes, %v, sha256 equal %v", n, err, bytes.Equal(h.Sum(nil), want[:]))
		}
		t.Logf("a call of the same user (MAX_POOL_PER_USER=1) during a stalled download took %v; the download then finished intact", took.Round(time.Millisecond))
	})

	t.Run("expired, altered and re-aimed links get 403", func(t *testing.T) {
		if link == "" {
			t.Skip("no link")
		}
		keyBytes, _ := hex.DecodeString(key)
		sealer, err := credentials.NewSealer(keyBytes)
		if err != nil {
			t.Fatal(err)
		}
		base := link[:strings.Index(link, "/attachments/")+len("/attachments/")]
		sealed := link[len(base):]
		sealed = sealed[:strings.IndexByte(sealed, '/')]
		expired, err := sealer.SealLink(credentials.Link{Creds: credentials.New(bob, s.Users[bob]), Folder: "INBOX", UID: largeUID, PartID: "2", Expires: time.Now().Add(-time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		i := len(sealed) / 2
		altered := sealed[:i] + string("AB"[attBool(sealed[i] == 'A')]) + sealed[i+1:]
		for _, tc := range []struct{ name, link, says string }{
			{"expired", expired, "expired"},
			{"one character altered", altered, "altered"},
			{"part 2 edited to part 3", reaim(t, keyBytes, sealed, `"pt":"2"`, `"pt":"3"`), "altered"},
		} {
			resp, err := http.Get(base + tc.link + "/random-30m.bin")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), tc.says) || strings.Contains(string(body), "bob") {
				t.Errorf("%s: %s %q", tc.name, resp.Status, body)
			}
		}
	})

	t.Run("nothing set \\Seen", func(t *testing.T) {
		if after := attSeen(t, d, smallUID, largeUID); !slices.Equal(after, seenBefore) {
			t.Fatalf("\\Seen before %v, after %v", seenBefore, after)
		}
	})
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

func attBool(b bool) int {
	if b {
		return 1
	}
	return 0
}

func attRandom(seed byte, n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

// attAppend appends to the selected client's INBOX a message whose part 2
// is data, base64 in 76-character lines, and returns its UID.
func attAppend(t *testing.T, c *imapclient.Client, subject, name string, data []byte) uint32 {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("From: Alice <" + alice + ">\r\nTo: " + bob + "\r\nSubject: " + subject + "\r\nMessage-ID: <" + strconv.FormatInt(time.Now().UnixNano(), 36) + "@example.test>\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"att-b\"\r\n\r\n" +
		"--att-b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nThe file is attached.\r\n" +
		"--att-b\r\nContent-Type: application/octet-stream; name=\"" + name + "\"\r\nContent-Disposition: attachment; filename=\"" + name + "\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString(data)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--att-b--\r\n")
	cmd := c.Append("INBOX", int64(b.Len()), nil)
	if _, err := cmd.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Close(); err != nil {
		t.Fatal(err)
	}
	ad, err := cmd.Wait()
	if err != nil || ad.UID == 0 {
		t.Fatalf("APPEND: %v (%+v)", err, ad)
	}
	return uint32(ad.UID)
}

// attSeen reports for each UID of INBOX whether it has \Seen, read with
// EXAMINE and FETCH FLAGS.
func attSeen(t *testing.T, c *imapclient.Client, uids ...uint32) []bool {
	t.Helper()
	if _, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	var set imap.UIDSet
	for _, u := range uids {
		set.AddNum(imap.UID(u))
	}
	bufs, err := c.Fetch(set, &imap.FetchOptions{UID: true, Flags: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bool, len(uids))
	for _, b := range bufs {
		if i := slices.Index(uids, uint32(b.UID)); i >= 0 {
			out[i] = slices.Contains(b.Flags, imap.FlagSeen)
		}
	}
	return out
}

func attBlob(t *testing.T, res *mcp.CallToolResult) []byte {
	t.Helper()
	for _, c := range res.Content {
		if er, ok := c.(mcp.EmbeddedResource); ok {
			blob, ok := er.Resource.(mcp.BlobResourceContents)
			if !ok {
				t.Fatalf("embedded resource is %T", er.Resource)
			}
			if blob.MIMEType != "application/octet-stream" || !strings.HasPrefix(blob.URI, "mailbox://INBOX/") {
				t.Fatalf("blob %s %s", blob.URI, blob.MIMEType)
			}
			b, err := base64.StdEncoding.DecodeString(blob.Blob)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no embedded resource in %d content blocks", len(res.Content))
	return nil
}

func attLink(t *testing.T, res *mcp.CallToolResult) mcp.ResourceLink {
	t.Helper()
	for _, c := range res.Content {
		if rl, ok := c.(mcp.ResourceLink); ok {
			return rl
		}
	}
	t.Fatalf("no resource_link in %d content blocks", len(res.Content))
	return mcp.ResourceLink{}
}

// reaim edits a sealed link the way an attacker who knows the payload's
// layout would: AES-GCM encrypts in counter mode, so flipping ciphertext
// bits flips the same plaintext bits, and from is turned into to without
// the key. Here the key is used only to find where from is, and to check
// that the edit really reads as to when decrypted without the tag check;
// the tag is what the gateway must refuse it by.
func reaim(t *testing.T, key []byte, sealed, from, to string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(sealed, "att1."))
	if err != nil {
		t.Fatal(err)
	}
	const idLen, nonceLen, tagLen = 4, 12, 16
	block, _ := aes.NewCipher(key)
	ctr := func(ct []byte) []byte { // GCM's keystream for a 12-byte nonce starts at counter 2
		iv := append(slices.Clone(raw[idLen:idLen+nonceLen]), 0, 0, 0, 2)
		out := make([]byte, len(ct))
		cipher.NewCTR(block, iv).XORKeyStream(out, ct)
		return out
	}
	ct := raw[idLen+nonceLen : len(raw)-tagLen]
	plain := ctr(ct)
	i := bytes.Index(plain, []byte(from))
	if i < 0 || len(from) != len(to) {
		t.Fatalf("%q not in the payload %q", from, plain)
	}
	edited := slices.Clone(raw)
	for j := range from {
		edited[idLen+nonceLen+i+j] ^= from[j] ^ to[j]
	}
	if p := ctr(edited[idLen+nonceLen : len(edited)-tagLen]); !bytes.Contains(p, []byte(to)) {
		t.Fatalf("the edit did not take: %q", p)
	}
	return "att1." + base64.RawURLEncoding.EncodeToString(edited)
}

// procMemory reads VmRSS and VmHWM of pid, in bytes.
func procMemory(t *testing.T, pid int) (rss, hwm int64) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			hwm = n << 10
		}
	}
	return rss, hwm
}
