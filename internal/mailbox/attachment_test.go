package mailbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"math/rand/v2"
	"mime/quotedprintable"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/emersion/go-imap/v2"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

func randomBytes(seed byte, n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

// base64Lines encodes b as mail does: base64 in lines of 76 characters.
func base64Lines(b []byte) string {
	s := base64.StdEncoding.EncodeToString(b)
	var out strings.Builder
	for len(s) > 76 {
		out.WriteString(s[:76] + "\n")
		s = s[76:]
	}
	out.WriteString(s + "\n")
	return out.String()
}

func qpEncode(t testing.TB, b []byte, binary bool) string {
	var out bytes.Buffer
	w := quotedprintable.NewWriter(&out)
	w.Binary = binary
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return out.String()
}

// attachmentMessage is a message with a body text (part 1), a binary
// base64 attachment (part 2) and a quoted-printable text one (part 3).
func attachmentMessage(t testing.TB, bin, text []byte) string {
	return "From: Peer <peer@example.org>\nTo: u@example.test\nSubject: files\nMIME-Version: 1.0\n" +
		"Content-Type: multipart/mixed; boundary=\"b1\"\n\n" +
		"--b1\nContent-Type: text/plain; charset=utf-8\n\nsee the files\n" +
		"--b1\nContent-Type: application/octet-stream; name=\"data.bin\"\nContent-Disposition: attachment; filename=\"data.bin\"\nContent-Transfer-Encoding: base64\n\n" +
		base64Lines(bin) +
		"--b1\nContent-Type: text/plain; charset=utf-8; name=\"notes.txt\"\nContent-Disposition: attachment; filename=\"notes.txt\"\nContent-Transfer-Encoding: quoted-printable\n\n" +
		strings.ReplaceAll(qpEncode(t, text, false), "\r\n", "\n") + "\n" +
		"--b1--\n"
}

func TestAttachment(t *testing.T) {
	c, creds, add := memServer(t)
	bin := randomBytes(1, 3000)
	text := []byte("Zeile eins: 1+1=2, \u00e4\u00f6\u00fc\r\n" + strings.Repeat("long line ", 30) + "\r\nend\r\n")
	add(attachmentMessage(t, bin, text))
	ctx := context.Background()

	got, err := c.Attachment(ctx, creds, "INBOX", 1, "2", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got.TooLarge || !bytes.Equal(got.Data, bin) || got.Size != int64(len(bin)) || got.Filename != "data.bin" ||
		got.ContentType != "application/octet-stream" || got.PartID != "2" || got.UIDValidity == 0 {
		t.Fatalf("part 2: %+v (data %d bytes, equal %v)", got.Attachment, len(got.Data), bytes.Equal(got.Data, bin))
	}
	got, err = c.Attachment(ctx, creds, "inbox", 1, "3", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, text) || got.Filename != "notes.txt" {
		t.Fatalf("part 3: %q", got.Data)
	}

	// Over the limit: metadata only, and a size over the limit.
	for _, limit := range []int64{100, 2999} {
		got, err = c.Attachment(ctx, creds, "INBOX", 1, "2", limit)
		if err != nil {
			t.Fatal(err)
		}
		if !got.TooLarge || got.Data != nil || got.Size <= limit {
			t.Fatalf("limit %d: too large %v, %d bytes of data, size %d", limit, got.TooLarge, len(got.Data), got.Size)
		}
	}
	// Exactly at the limit: returned.
	if got, err = c.Attachment(ctx, creds, "INBOX", 1, "2", 3000); err != nil || got.TooLarge || len(got.Data) != 3000 {
		t.Fatalf("limit = size: %v %+v", err, got)
	}

	for _, tc := range []struct {
		folder  string
		uid     uint32
		part    string
		kind    mailerr.Kind
		message string
	}{
		{"INBOX", 1, "1", mailerr.BadInput, `part_id "1" of message UID 1 in folder "INBOX" is not an attachment; its attachments are part_id 2 and 3`},
		{"INBOX", 1, "4", mailerr.BadInput, `part_id "4" of message UID 1 in folder "INBOX" is not an attachment`},
		{"INBOX", 1, "2.1", mailerr.BadInput, "is not an attachment"},
		{"INBOX", 1, "x", mailerr.BadInput, `part_id must be a part number such as 2 or 1.2, as the message's attachment list gives it`},
		{"INBOX", 1, "", mailerr.BadInput, "part_id must be"},
		{"INBOX", 1, "0", mailerr.BadInput, "part_id must be"},
		{"INBOX", 0, "2", mailerr.BadInput, "uid must be"},
		{"INBOX", 9, "2", mailerr.NotFound, "no message with UID 9"},
		{"Nowhere", 1, "2", mailerr.NotFound, `folder "Nowhere"`},
	} {
		_, err := c.Attachment(ctx, creds, tc.folder, tc.uid, tc.part, 1<<20)
		if mailerr.KindOf(err) != tc.kind || !strings.Contains(mailerr.Message(err), tc.message) {
			t.Errorf("%s/%d/%q: %v %q, want %v %q", tc.folder, tc.uid, tc.part, mailerr.KindOf(err), mailerr.Message(err), tc.kind, tc.message)
		}
	}
}

func TestStreamAttachment(t *testing.T) {
	c, creds, add := memServer(t)
	bin := randomBytes(2, 5000)
	text := []byte(strings.Repeat("caf\u00e9 = 3\u20ac\r\n", 50))
	add(attachmentMessage(t, bin, text))
	ctx := context.Background()
	whole, err := c.Attachment(ctx, creds, "INBOX", 1, "2", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer func(n int) { streamChunk = n }(streamChunk)
	// Chunks that cut base64 groups and quoted-printable escapes anywhere,
	// one that divides the part, and one larger than it.
	for _, chunk := range []int{1, 7, 76, 78, 1000, 6756, 1 << 20} {
		streamChunk = chunk
		for part, want := range map[string][]byte{"2": bin, "3": text} {
			var out bytes.Buffer
			var opened *Attachment
			meta, err := c.StreamAttachment(ctx, creds, "INBOX", 1, whole.UIDValidity, part, func(a Attachment) io.Writer {
				opened = &a
				return &out
			})
			if err != nil {
				t.Fatalf("chunk %d part %s: %v", chunk, part, err)
			}
			if !bytes.Equal(out.Bytes(), want) || meta.Size != int64(len(want)) || opened == nil || opened.PartID != part {
				t.Fatalf("chunk %d part %s: %d bytes (want %d), meta %+v", chunk, part, out.Len(), len(want), meta)
			}
		}
	}
	streamChunk = 1 << 20

	// HEAD: the metadata, nothing fetched or written.
	meta, err := c.StreamAttachment(ctx, creds, "INBOX", 1, 0, "2", func(Attachment) io.Writer { return nil })
	if err != nil || meta.Filename != "data.bin" {
		t.Fatalf("open returning nil: %v %+v", err, meta)
	}
	// A link from before the folder was rebuilt, a part that is not an
	// attachment, a message that is gone: refused before anything is
	// opened.
	for _, tc := range []struct {
		uid, uv uint32
		part    string
		kind    mailerr.Kind
		says    string
	}{
		{1, whole.UIDValidity + 1, "2", mailerr.NotFound, "UIDVALIDITY changed"},
		{1, whole.UIDValidity, "1", mailerr.BadInput, "not an attachment"},
		{2, whole.UIDValidity, "2", mailerr.NotFound, "no message with UID 2"},
	} {
		_, err := c.StreamAttachment(ctx, creds, "INBOX", tc.uid, tc.uv, tc.part, func(Attachment) io.Writer {
			t.Fatalf("%+v: opened", tc)
			return nil
		})
		if mailerr.KindOf(err) != tc.kind || !strings.Contains(mailerr.Message(err), tc.says) {
			t.Errorf("%+v: %v", tc, err)
		}
	}
	// A failing writer stops the stream with its error.
	streamChunk = 100
	_, err = c.StreamAttachment(ctx, creds, "INBOX", 1, 0, "2", func(Attachment) io.Writer { return failingWriter{} })
	if err != io.ErrShortWrite {
		t.Fatalf("writer error: %v", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrShortWrite }

// The streaming decoder undoes valid encodings as the standard library
// does, whatever the reads' sizes.
func TestTransferReaderValid(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 57, 4095, 4096, 4097, 100_000} {
		b := randomBytes(byte(n), n)
		for enc, encoded := range map[string]string{
			"base64":           base64Lines(b),
			"BASE64":           base64.StdEncoding.EncodeToString(b),
			"quoted-printable": qpEncode(t, b, true),
			"7bit":             string(b),
			"x-unknown":        string(b),
		} {
			for _, r := range []io.Reader{strings.NewReader(encoded), iotest.OneByteReader(strings.NewReader(encoded)), iotest.HalfReader(strings.NewReader(encoded))} {
				got, err := io.ReadAll(transferReader(r, enc))
				if err != nil || !bytes.Equal(got, b) {
					t.Fatalf("%s of %d bytes: %v, %d bytes back, equal %v", enc, n, err, len(got), bytes.Equal(got, b))
				}
			}
		}
	}
}

// FuzzTransferReader: streamed in reads of any size, the decoder gives
// exactly what mailmsg.UndoTransferEncoding gives for the whole input
// (the rule read and forward use), for any bytes, broken encodings
// included, but for one case the stream bounds on purpose: a run of
// quoted-printable white space longer than maxHeldSpace, which it lets
// through instead of holding it to see whether it ends the line
// (TestQPLongSpaceRunIsLetThrough).
func FuzzTransferReader(f *testing.F) {
	f.Add([]byte("SGVsbG8s\r\nIHdvcmxk\r\n"), true, uint8(3))
	f.Add([]byte("SGVsbG8=SGVsbG8=\nA"), true, uint8(1))
	f.Add([]byte("a=\r\nb =3D c=3d=ZZ =\t \r\nd= x\r\ntrail  \r\n=4"), false, uint8(2))
	f.Add([]byte("==\n=\r= \n=A\n=A=\n"), false, uint8(5))
	f.Add([]byte(strings.Repeat(" ", 5000)+"x"), false, uint8(7))
	f.Fuzz(func(t *testing.T, raw []byte, base64 bool, step uint8) {
		enc := "quoted-printable"
		if base64 {
			enc = "base64"
		}
		if !base64 && longQPSpaceRun(raw) {
			t.Skip("a white-space run longer than the stream holds")
		}
		want, _ := mailmsg.UndoTransferEncoding(raw, enc)
		r := io.Reader(&stepReader{b: raw, step: int(step%9) + 1})
		got, err := io.ReadAll(transferReader(r, enc))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s %q in reads of %d: got %q, want %q", enc, raw, int(step%9)+1, got, want)
		}
	})
}

// longQPSpaceRun reports whether raw has a run of quoted-printable white
// space longer than the stream holds that ends its line (a line break or
// the end of the input follows): only there do the two decoders differ.
func longQPSpaceRun(raw []byte) bool {
	run := 0
	for _, c := range raw {
		switch {
		case isQPSpace(c):
			run++
		case c == '\n' && run > maxHeldSpace:
			return true
		default:
			run = 0
		}
	}
	return run > maxHeldSpace
}

// TestQPLongSpaceRunIsLetThrough pins the stream's bound: white space that
// may end a line is held up to maxHeldSpace bytes; past that the held
// bytes go out and holding starts again, so a longer run before a line
// break keeps all but its last part. The whole-input decoder drops it all.
func TestQPLongSpaceRunIsLetThrough(t *testing.T) {
	raw := strings.Repeat(" ", 5000) + "\r\nx"
	for _, step := range []int{1, 2, 7, 4096} {
		got, err := io.ReadAll(transferReader(&stepReader{b: []byte(raw), step: step}, "quoted-printable"))
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat(" ", maxHeldSpace) + "\r\nx"; string(got) != want {
			t.Errorf("reads of %d: got %d bytes (%q…), want %d spaces, CRLF, x", step, len(got), got[:min(len(got), 8)], maxHeldSpace)
		}
	}
	if whole, _ := mailmsg.UndoTransferEncoding([]byte(raw), "quoted-printable"); string(whole) != "\r\nx" {
		t.Errorf("whole-input decode: %q", whole)
	}
}

// stepReader returns at most step bytes a read.
type stepReader struct {
	b    []byte
	step int
}

func (r *stepReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.b)
	r.b = r.b[n:]
	return n, nil
}

// While the writer is blocked (a slow HTTP client), no pooled connection
// is held: each chunk's connection is released before its bytes are
// written.
func TestStreamHoldsNoConnectionWhileWriting(t *testing.T) {
	c, creds, add := memServer(t)
	bin := randomBytes(4, 5000)
	add(attachmentMessage(t, bin, []byte("x")))
	defer func(n int) { streamChunk = n }(streamChunk)
	streamChunk = 1000
	w := &blockingWriter{entered: make(chan struct{}, 100), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := c.StreamAttachment(context.Background(), creds, "INBOX", 1, 0, "2", func(Attachment) io.Writer { return w })
		done <- err
	}()
	for range 3 {
		<-w.entered
		if st := c.Stats(); st.InUse != 0 || st.Idle != 1 {
			t.Fatalf("while the writer is blocked: %+v", st)
		}
		w.release <- struct{}{}
	}
	close(w.release)
	if err := <-done; err != nil || !bytes.Equal(w.buf.Bytes(), bin) {
		t.Fatalf("%v, %d bytes", err, w.buf.Len())
	}
}

// blockingWriter signals each Write and waits to be released.
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	buf     bytes.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.entered <- struct{}{}
	<-w.release
	return w.buf.Write(p)
}

// An attachment's base64 is passed on as it came when it is canonical
// (passBase64), and decoded leniently and encoded again when it is not:
// either way the content and its base64 are the decoded bytes' and their
// standard encoding, whatever the line lengths, breaks, white space or
// stray characters of the part.
func TestAttachmentBase64Shapes(t *testing.T) {
	bin := randomBytes(3, 1000)
	enc := base64.StdEncoding.EncodeToString(bin)
	lines := func(s string, n int, sep string) string {
		var b strings.Builder
		for len(s) > n {
			b.WriteString(s[:n] + sep)
			s = s[n:]
		}
		return b.String() + s + sep
	}
	for _, tc := range []struct {
		name   string
		body   string // the part's body as it is in the message
		want   []byte // its content
		passed bool   // passed on without encoding again
	}{
		{"76 a line", lines(enc, 76, "\n"), bin, true},
		{"odd line lengths", lines(enc[:100], 13, "\n") + lines(enc[100:], 77, "\n"), bin, true},
		{"one line", enc + "\n", bin, true},
		{"CR only inside", enc[:40] + "\r" + enc[40:] + "\n", bin, true},
		{"spaces at line ends", lines(enc, 76, " \n"), bin, false},
		{"a tab inside", enc[:40] + "\t" + enc[40:] + "\n", bin, false},
		{"stray characters", enc[:40] + "*!" + enc[40:] + "\n", bin, false},
		{"no padding", "QUJDRA\n", []byte("ABCD"), false},
		{"padding bits not zero", "QUJDRB==\n", []byte("ABCD"), false},
		{"two blocks", "QQ==\nQg==\n", []byte("AB"), false},
		{"dangling character", "QUJDR\n", []byte("ABC"), false},
		{"empty", "\n", []byte{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, creds, add := memServer(t)
			add("From: Peer <peer@example.org>\nTo: u@example.test\nSubject: file\nMIME-Version: 1.0\n" +
				"Content-Type: multipart/mixed; boundary=\"b1\"\n\n" +
				"--b1\nContent-Type: text/plain\n\nsee the file\n" +
				"--b1\nContent-Type: application/octet-stream\nContent-Disposition: attachment; filename=\"f.bin\"\nContent-Transfer-Encoding: base64\n\n" +
				tc.body + "--b1--\n")
			got, err := c.Attachment(context.Background(), creds, "INBOX", 1, "2", 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if got.TooLarge || !bytes.Equal(got.Data, tc.want) || got.Size != int64(len(tc.want)) {
				t.Fatalf("content %q (size %d), want %q", got.Data, got.Size, tc.want)
			}
			if b64 := got.Base64Of(); b64 != base64.StdEncoding.EncodeToString(tc.want) {
				t.Fatalf("base64 %q, want %q", b64, base64.StdEncoding.EncodeToString(tc.want))
			}
			if passed := got.Base64 != "" || len(tc.want) == 0; passed != tc.passed {
				t.Errorf("passed on as it came: %v, want %v", passed, tc.passed)
			}
		})
	}
}

// FuzzPassBase64: whatever a base64 part holds, passBase64 either leaves
// it to the lenient decoder or gives exactly the lenient decoder's bytes
// and their standard encoding.
func FuzzPassBase64(f *testing.F) {
	for _, s := range []string{"QUJD\r\nRA==\r\n", "QUJDRA==", "QUJDRB==", "QQ==QQ==", "QUJD\n=", " QUJD", "", "\r\n", "QUJDRA=\r\n=", "Q\r\nU\r\nJ\r\nD"} {
		f.Add([]byte(s), int64(1<<20))
	}
	f.Add([]byte("QUJDRA=="), int64(3))
	f.Fuzz(func(t *testing.T, raw []byte, limit int64) {
		if limit < 0 || limit > 1<<20 {
			return
		}
		a := attachmentPart{part: &imap.BodyStructureSinglePart{Encoding: "base64"}}
		data, b64 := passBase64(raw, a, limit)
		if data == nil {
			if b64 != "" {
				t.Fatalf("no data but base64 %q", b64)
			}
			return
		}
		want, err := decodeCapped(bytes.NewReader(raw), a, limit)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, want) || int64(len(data)) > limit {
			t.Fatalf("%q (limit %d): passBase64 %q, lenient %q", raw, limit, data, want)
		}
		if b64 != base64.StdEncoding.EncodeToString(data) {
			t.Fatalf("%q: base64 %q, want %q", raw, b64, base64.StdEncoding.EncodeToString(data))
		}
	})
}

// BenchmarkAttachmentContent is the latency bench's 20 KB attachment
// (base64 in lines of 76) made ready to answer with: "lenient" decodes
// it byte by byte and encodes the bytes again (what every part took
// before passBase64), "passed" is passBase64; both hash the content.
func BenchmarkAttachmentContent(b *testing.B) {
	raw := []byte(strings.ReplaceAll(base64Lines(randomBytes(4, 20<<10)), "\n", "\r\n"))
	a := attachmentPart{part: &imap.BodyStructureSinglePart{Encoding: "base64", Size: uint32(len(raw))}}
	b.Run("lenient", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			data, err := decodeCapped(bytes.NewReader(raw), a, 5<<20)
			if err != nil {
				b.Fatal(err)
			}
			sha256.Sum256(data)
			_ = base64.StdEncoding.EncodeToString(data)
		}
	})
	b.Run("passed", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			data, b64 := passBase64(raw, a, 5<<20)
			if data == nil || b64 == "" {
				b.Fatal("not passed")
			}
			sha256.Sum256(data)
		}
	})
}
