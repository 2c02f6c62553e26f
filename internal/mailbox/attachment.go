package mailbox

// Attachment content: the decoded bytes of one part that Read lists as an
// attachment (attachmentParts decides, so the two always agree), fetched
// with BODY.PEEK under EXAMINE so that \Seen never changes. Attachment
// returns them whole up to a limit; StreamAttachment streams any size
// through a fixed buffer, one partial FETCH at a time, holding a pooled
// connection only while a chunk is fetched, never while the caller writes.

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// streamChunk is what one partial FETCH of StreamAttachment asks for, in
// transfer-encoded bytes: the memory a download holds, and the longest a
// pooled connection is held for it at a time.
var streamChunk = 1 << 20 // a variable for tests

// AttachmentContent is one attachment and, unless TooLarge, its bytes.
type AttachmentContent struct {
	Attachment
	Folder      string
	UID         uint32
	UIDValidity uint32 // of Folder when the part was read
	// Data is the decoded content; nil when TooLarge.
	Data []byte
	// Base64 is Data in standard base64, when the part came in it
	// already (canonical base64 in lines, passed through without its
	// line breaks); "" otherwise: encode Data (Base64Of does either).
	Base64 string
	// TooLarge says the decoded content is over the limit asked for; Size
	// is then the decoded size as Read states it (exact when the server
	// says, else estimated).
	TooLarge bool
}

// Attachment reads attachment partID of message uid in folder: its
// metadata as Read lists it, and its decoded bytes unless they take more
// than limit bytes. Only a part Read lists as an attachment can be read.
func (c *Client) Attachment(ctx context.Context, creds credentials.Credentials, folder string, uid uint32, partID string, limit int64) (*AttachmentContent, error) {
	folder, err := c.folderArg(ctx, creds, folder)
	if err != nil {
		return nil, err
	}
	if err := checkPart(uid, partID); err != nil {
		return nil, err
	}
	var out *AttachmentContent
	// The structure's FETCH goes with the EXAMINE, and asks for the part
	// itself as far as an attachment that fits can take (firstBytes): the
	// usual attachment comes in that one flight.
	sec := &imap.FetchItemBodySection{Part: partPath(partID), Peek: true, Partial: &imap.SectionPartial{Size: firstBytes(limit)}}
	var first *imapclient.FetchCommand
	open := &opening{folder: folder, send: func(conn *Conn, _ imap.CapSet) {
		first = conn.client().Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{
			UID: true, BodyStructure: &imap.FetchItemBodyStructure{Extended: true}, BodySection: []*imap.FetchItemBodySection{sec},
		})
	}}
	err = c.doOpen(ctx, creds, open, "reading the attachment", true, func(ctx context.Context, conn *Conn) error {
		defer first.Close()
		if _, err := conn.examine(folder); err != nil {
			return err
		}
		cl := conn.client()
		bs, atts, i, raw, err := findAttachmentWith(first, folder, uid, partID, sec)
		if conn.mayNotSeeYet(err, uid) {
			// Delivered after the connection last looked (fresh.go).
			if err = conn.catchUp(folder); err == nil {
				again := cl.Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{
					UID: true, BodyStructure: &imap.FetchItemBodyStructure{Extended: true}, BodySection: []*imap.FetchItemBodySection{sec},
				})
				bs, atts, i, raw, err = findAttachmentWith(again, folder, uid, partID, sec)
				again.Close()
			}
		}
		if err != nil {
			return err
		}
		a := atts[i]
		out = &AttachmentContent{Attachment: a.Attachment, Folder: folder, UID: uid, UIDValidity: conn.uidValidity}
		size := int64(-1) // unknown yet
		if !mayFit(a.part, limit) {
			size = exactSize(cl, uid, bs, atts, i)
		}
		if size <= limit {
			var data []byte
			if raw != nil && int64(len(raw)) < sec.Partial.Size {
				// The whole part came with the structure.
				if data, out.Base64 = passBase64(raw, a, limit); data == nil {
					data, err = decodeCapped(bytes.NewReader(raw), a, limit)
				}
			} else {
				data, err = fetchDecoded(cl, folder, uid, a, limit)
			}
			if err != nil {
				return imapError(err, folder)
			}
			if int64(len(data)) <= limit {
				out.Data, out.Size = data, int64(len(data))
				return nil
			}
			size = exactSize(cl, uid, bs, atts, i)
		}
		out.TooLarge = true
		// Decoding showed more than limit even when the estimate was lower.
		out.Size = max(size, limit+1)
		return nil
	})
	return out, err
}

// StreamAttachment writes the decoded bytes of attachment partID of
// message uid in folder to the writer that open returns, given the part's
// metadata (open returning nil ends it there: for a HEAD request). The
// folder must still have UIDVALIDITY uidValidity (0: not checked). The
// part is fetched in partial FETCHes of streamChunk bytes and decoded on
// the fly, so memory does not depend on its size; each chunk takes a
// pooled connection only while it is fetched, so a slow writer never holds
// one. An error after the first byte was written leaves the output
// incomplete: the caller must not present it as whole. The returned Size
// is the number of bytes written.
func (c *Client) StreamAttachment(ctx context.Context, creds credentials.Credentials, folder string, uid, uidValidity uint32, partID string, open func(Attachment) io.Writer) (*Attachment, error) {
	folder, err := c.folderArg(ctx, creds, folder)
	if err != nil {
		return nil, err
	}
	if err := checkPart(uid, partID); err != nil {
		return nil, err
	}
	var part attachmentPart
	err = c.do(ctx, creds, "finding the attachment", true, func(ctx context.Context, conn *Conn) error {
		if err := conn.examineAt(folder, uid, uidValidity); err != nil {
			return err
		}
		_, atts, i, err := findAttachment(conn.client(), folder, uid, partID)
		if err == nil {
			part = atts[i]
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	meta := part.Attachment
	w := open(meta)
	if w == nil {
		return &meta, nil
	}
	src := &partReader{c: c, ctx: ctx, creds: creds, folder: folder, uid: uid, uidValidity: uidValidity, path: part.path}
	n, err := io.Copy(w, transferReader(src, part.part.Encoding))
	meta.Size = n
	return &meta, err
}

// examineAt is examine, refusing a folder rebuilt since UIDVALIDITY
// uidValidity (0: not checked): UID uid may name another message now.
func (conn *Conn) examineAt(folder string, uid, uidValidity uint32) error {
	if _, err := conn.examine(folder); err != nil {
		return err
	}
	if uidValidity != 0 && conn.uidValidity != uidValidity {
		return mailerr.Newf(mailerr.NotFound, "folder %s was rebuilt on the server (UIDVALIDITY changed), so UID %d may name another message now", quote(folder), uid).About(mailerr.SubjectMessage)
	}
	return nil
}

// partReader reads a part's raw (transfer-encoded) bytes, one partial
// FETCH per chunk, each on a pooled connection taken for that FETCH only.
type partReader struct {
	c           *Client
	ctx         context.Context
	creds       credentials.Credentials
	folder      string
	uid         uint32
	uidValidity uint32
	path        []int

	buf      []byte // the current chunk
	pos      int    // read position in buf
	offset   int64  // of the next chunk in the part
	finished bool   // the last chunk was shorter than asked: the part's end
}

func (r *partReader) Read(p []byte) (int, error) {
	if r.pos == len(r.buf) {
		if r.finished {
			return 0, io.EOF
		}
		if err := r.next(); err != nil {
			return 0, err
		}
		if len(r.buf) == 0 {
			return 0, io.EOF
		}
	}
	n := copy(p, r.buf[r.pos:])
	r.pos += n
	return n, nil
}

// next fetches the chunk at offset into buf.
func (r *partReader) next() error {
	if r.buf == nil {
		r.buf = make([]byte, streamChunk)
	}
	buf := r.buf[:streamChunk]
	got := 0
	err := r.c.do(r.ctx, r.creds, "streaming the attachment", true, func(ctx context.Context, conn *Conn) error {
		if err := conn.examineAt(r.folder, r.uid, r.uidValidity); err != nil {
			return err
		}
		sec := &imap.FetchItemBodySection{Part: r.path, Peek: true, Partial: &imap.SectionPartial{Offset: r.offset, Size: int64(streamChunk)}}
		cmd := conn.client().Fetch(imap.UIDSetNum(imap.UID(r.uid)), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{sec}})
		defer cmd.Close()
		found := false
		for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
			for item := msg.Next(); item != nil; item = msg.Next() {
				it, ok := item.(imapclient.FetchItemDataBodySection)
				if !ok || found {
					continue
				}
				found = true
				if it.Literal == nil {
					continue // NIL: nothing there
				}
				n, err := io.ReadFull(it.Literal, buf)
				got = n
				if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
					return imapError(err, r.folder)
				}
			}
		}
		if err := cmd.Close(); err != nil {
			return imapError(err, r.folder)
		}
		if !found {
			return noMessage(r.uid, r.folder)
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.buf, r.pos = buf[:got], 0
	r.offset += int64(got)
	r.finished = got < streamChunk
	return nil
}

// partIDPattern is an IMAP part number: 2, 1.2, 1.2.3.
var partIDPattern = regexp.MustCompile(`^[1-9][0-9]{0,5}(\.[1-9][0-9]{0,5}){0,19}$`)

func checkPart(uid uint32, partID string) error {
	if uid == 0 {
		return badUID()
	}
	if !partIDPattern.MatchString(partID) {
		// Not echoed: errors are logged, and the field may hold anything.
		return mailerr.New(mailerr.BadInput, "part_id must be a part number such as 2 or 1.2, as the message's attachment list gives it")
	}
	return nil
}

// findAttachment fetches the structure of message uid of the selected
// folder and finds partID among its attachments: atts[i].
func findAttachment(cl *imapclient.Client, folder string, uid uint32, partID string) (imap.BodyStructure, []attachmentPart, int, error) {
	return findAttachmentIn(startStructure(cl, uid), folder, uid, partID)
}

// startStructure sends the FETCH of message uid's body structure.
func startStructure(cl *imapclient.Client, uid uint32) *imapclient.FetchCommand {
	return cl.Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{
		UID: true, BodyStructure: &imap.FetchItemBodyStructure{Extended: true},
	})
}

// findAttachmentIn is findAttachment once the FETCH of the structure
// (startStructure) is sent.
func findAttachmentIn(cmd *imapclient.FetchCommand, folder string, uid uint32, partID string) (imap.BodyStructure, []attachmentPart, int, error) {
	bs, atts, i, _, err := findAttachmentWith(cmd, folder, uid, partID, nil)
	return bs, atts, i, err
}

// findAttachmentWith is findAttachmentIn for a FETCH that may also have
// asked for section sec (nil: none) of the part: raw is what came of it,
// nil if nothing did.
func findAttachmentWith(cmd *imapclient.FetchCommand, folder string, uid uint32, partID string, sec *imap.FetchItemBodySection) (bs imap.BodyStructure, atts []attachmentPart, i int, raw []byte, err error) {
	bufs, err := cmd.Collect()
	if err != nil {
		return nil, nil, 0, nil, imapError(err, folder)
	}
	for _, b := range bufs {
		if uint32(b.UID) != uid {
			continue
		}
		if b.BodyStructure == nil {
			return nil, nil, 0, nil, mailerr.New(mailerr.Internal, "the mail server sent no body structure")
		}
		atts := attachmentParts(b.BodyStructure)
		ids := make([]string, len(atts))
		for i, a := range atts {
			if a.PartID == partID {
				if sec != nil {
					raw = b.FindBodySection(sec)
				}
				return b.BodyStructure, atts, i, raw, nil
			}
			ids[i] = a.PartID
		}
		return nil, nil, 0, nil, notAttachment(folder, uid, partID, ids)
	}
	return nil, nil, 0, nil, noMessage(uid, folder)
}

// firstBytes is how much of a part the first FETCH of an attachment asks
// for: what a base64 attachment that decodes to at most limit bytes takes
// (mayFit's margin), and no more than speculativeBytes, so that a part
// that is larger costs little more than a round trip.
func firstBytes(limit int64) int64 {
	return min(limit+limit/3+limit/16+2048, speculativeBytes)
}

// speculativeBytes bounds what is fetched of an attachment before its size
// is known: 256 KiB take about 20 ms at 100 Mbit/s, a round trip's worth.
const speculativeBytes = 256 << 10

// partPath is the section path of a part number such as 1.2 (checkPart
// has checked it).
func partPath(partID string) []int {
	var path []int
	for _, f := range strings.Split(partID, ".") {
		n, _ := strconv.Atoi(f)
		path = append(path, n)
	}
	return path
}

// notAttachment names the part asked for and the ones that are
// attachments (by number only: file names are the sender's text).
func notAttachment(folder string, uid uint32, partID string, ids []string) error {
	msg := fmt.Sprintf("part_id %q of message UID %d in folder %s is not an attachment", partID, uid, quote(folder))
	switch len(ids) {
	case 0:
		msg += "; the message has no attachments"
	case 1:
		msg += "; its only attachment is part_id " + ids[0]
	default:
		msg += "; its attachments are part_id " + strings.Join(ids[:len(ids)-1], ", ") + " and " + ids[len(ids)-1]
	}
	return mailerr.New(mailerr.BadInput, msg)
}

// mayFit says whether a part can decode to at most limit bytes, judged by
// its encoded size: base64 shrinks to about 3/4 (estimatedSize; lines
// longer than usual make the estimate a little low, hence the margin),
// quoted-printable to between 1/3 and all of it, anything else not at all.
// What is fetched is decoded against limit anyway: this only spares
// fetching what cannot fit.
func mayFit(p *imap.BodyStructureSinglePart, limit int64) bool {
	switch transferKind(p.Encoding) {
	case encodedBase64:
		return estimatedSize(p) <= limit+limit/16+1024
	case encodedQP:
		return int64(p.Size) <= 3*limit+1024
	}
	return int64(p.Size) <= limit
}

// fetchDecoded fetches a part and decodes it while it streams in, keeping
// at most limit+1 decoded bytes (more than limit means it does not fit).
func fetchDecoded(cl *imapclient.Client, folder string, uid uint32, a attachmentPart, limit int64) ([]byte, error) {
	sec := &imap.FetchItemBodySection{Part: a.path, Peek: true}
	cmd := cl.Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{sec}})
	defer cmd.Close()
	var data []byte
	found := false
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		for item := msg.Next(); item != nil; item = msg.Next() {
			it, ok := item.(imapclient.FetchItemDataBodySection)
			if !ok || found {
				continue
			}
			found = true
			if it.Literal == nil {
				continue
			}
			var err error
			if data, err = decodeCapped(it.Literal, a, limit); err != nil {
				return nil, imapError(err, folder)
			}
		}
	}
	if err := cmd.Close(); err != nil {
		return nil, imapError(err, folder)
	}
	if !found {
		return nil, noMessage(uid, folder)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// decodeCapped decodes part a from r, keeping at most limit+1 bytes.
func decodeCapped(r io.Reader, a attachmentPart, limit int64) ([]byte, error) {
	buf := make([]byte, 0, min(limit+1, estimatedSize(a.part)+512))
	w := &capped{b: buf, max: int(limit + 1)}
	if _, err := io.Copy(w, transferReader(r, a.part.Encoding)); err != nil && err != errCapped {
		return nil, err
	}
	return w.b, nil
}

// passBase64 decodes a base64 part that is canonical base64 in lines (the
// usual case: what a strict decoder accepts once CR and LF are skipped,
// which is exactly what encoding the decoded bytes again gives) and
// returns its decoded bytes and its base64 without the line breaks, so
// that the content need not be encoded again to be passed on. Any other
// part, or one that decodes to more than limit bytes, gives nil, "": the
// lenient decoder (decodeCapped) takes it, whose result for a canonical
// part is the same bytes.
func passBase64(raw []byte, a attachmentPart, limit int64) ([]byte, string) {
	if transferKind(a.part.Encoding) != encodedBase64 {
		return nil, ""
	}
	// StdEncoding skips only CR and LF; Strict refuses padding bits that
	// are not zero, the one way two texts decode to the same bytes.
	enc := base64.StdEncoding.Strict()
	if int64(enc.DecodedLen(len(raw))) > limit+3 {
		return nil, "" // the lenient decoder caps it
	}
	data := make([]byte, enc.DecodedLen(len(raw)))
	n, err := enc.Decode(data, raw)
	if err != nil || int64(n) > limit {
		return nil, ""
	}
	var b strings.Builder
	b.Grow(base64.StdEncoding.EncodedLen(n))
	for len(raw) > 0 {
		i := bytes.IndexAny(raw, "\r\n")
		if i < 0 {
			b.Write(raw)
			break
		}
		b.Write(raw[:i])
		raw = raw[i+1:]
	}
	return data[:n], b.String()
}

// Base64Of is the content in standard base64: a.Base64 when the part
// came in it, else Data encoded.
func (a *AttachmentContent) Base64Of() string {
	if a.Base64 != "" || len(a.Data) == 0 {
		return a.Base64
	}
	return base64.StdEncoding.EncodeToString(a.Data)
}

// capped collects at most max bytes; the write that would pass it fails
// with errCapped after taking what fits.
type capped struct {
	b   []byte
	max int
}

var errCapped = errors.New("over the limit")

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - len(c.b)
	if len(p) > room {
		c.b = append(c.b, p[:room]...)
		return room, errCapped
	}
	c.b = append(c.b, p...)
	return len(p), nil
}

// exactSize is atts[i]'s decoded size as Read reports it: BINARY.SIZE
// when the server has BINARY and binarySized allows asking for this part,
// else the estimate.
func exactSize(cl *imapclient.Client, uid uint32, bs imap.BodyStructure, atts []attachmentPart, i int) int64 {
	a := &atts[i]
	if !cl.Caps().Has(imap.CapBinary) && !cl.Caps().Has(imap.CapIMAP4rev2) {
		return a.Size
	}
	if sized := binarySized(bs, atts); sized != a {
		return a.Size
	}
	cmd := cl.Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{UID: true, BinarySectionSize: []*imap.FetchItemBinarySectionSize{{Part: a.path}}})
	defer cmd.Close()
	size := a.Size
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		for item := msg.Next(); item != nil; item = msg.Next() {
			if it, ok := item.(imapclient.FetchItemDataBinarySectionSize); ok && plausibleSize(a.part, it.Size) {
				size = int64(it.Size)
			}
		}
	}
	if cmd.Close() != nil {
		return a.Size // the server could not decode it: the estimate stands
	}
	return size
}

// Transfer encodings, as transferKind names them.
const (
	encodedIdentity = iota // 7bit, 8bit, binary, and unknown ones: as is
	encodedBase64
	encodedQP
)

// transferKind names a Content-Transfer-Encoding leniently, as mailmsg
// does for text parts (case, quotes, common misspellings).
func transferKind(enc string) int {
	switch strings.ToLower(strings.Trim(strings.TrimSpace(enc), `"`)) {
	case "base64", "base-64":
		return encodedBase64
	case "quoted-printable", "quoted_printable", "qp":
		return encodedQP
	}
	return encodedIdentity
}

// transferReader undoes a Content-Transfer-Encoding while r streams in,
// by the same lenient rules as mailmsg.UndoTransferEncoding (a test
// checks they agree): bad base64 is decoded as far as it goes, bad
// quoted-printable escapes are kept, an unknown encoding passes as is. It
// holds a few kilobytes whatever the input, however its reads fall.
func transferReader(r io.Reader, enc string) io.Reader {
	switch transferKind(enc) {
	case encodedBase64:
		return &decodeReader{src: r, dec: &base64State{}}
	case encodedQP:
		return &decodeReader{src: r, dec: &qpState{}}
	}
	return r
}

// decoder is a streaming decoding state: feed appends what in decodes to,
// end what is left at the end of the input.
type decoder interface {
	feed(out, in []byte) []byte
	end(out []byte) []byte
}

// decodeReader reads src through a decoder.
type decodeReader struct {
	src io.Reader
	dec decoder
	in  [4096]byte
	out []byte
	pos int
	err error
}

func (d *decodeReader) Read(p []byte) (int, error) {
	for d.pos == len(d.out) {
		if d.err != nil {
			return 0, d.err
		}
		n, err := d.src.Read(d.in[:])
		d.out, d.pos = d.dec.feed(d.out[:0], d.in[:n]), 0
		if err != nil {
			if err == io.EOF {
				d.out = d.dec.end(d.out)
			}
			d.err = err
		}
	}
	n := copy(p, d.out[d.pos:])
	d.pos += n
	return n, nil
}

// base64State decodes base64 leniently: white space and other bytes
// outside the alphabet are skipped, "=" ends a quantum (so concatenated
// blocks decode), a dangling single character at the end is dropped.
type base64State struct {
	q uint32
	n int
}

func (s *base64State) feed(out, in []byte) []byte {
	out = slices.Grow(out, len(in)/4*3+3)
	q, n := s.q, s.n
	for _, c := range in {
		v := b64Values[c]
		if v < 0 {
			if c == '=' {
				s.q, s.n = q, n
				out = s.end(out)
				q, n = 0, 0
			}
			continue
		}
		q = q<<6 | uint32(v)
		if n++; n == 4 {
			out = append(out, byte(q>>16), byte(q>>8), byte(q))
			q, n = 0, 0
		}
	}
	s.q, s.n = q, n
	return out
}

func (s *base64State) end(out []byte) []byte {
	switch s.n {
	case 2:
		out = append(out, byte(s.q>>4))
	case 3:
		out = append(out, byte(s.q>>10), byte(s.q>>2))
	}
	s.q, s.n = 0, 0
	return out
}

// b64Values maps a byte to its value in the standard base64 alphabet, or -1.
var b64Values = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/" {
		t[c] = int8(i)
	}
	return t
}()

// qpState decodes quoted-printable leniently: "=XX" (either case) is the
// byte, "=" ending a line (white space after it allowed) is a soft break,
// any other "=" is kept, white space ending a line is removed, and line
// breaks become CRLF. White space is held until what follows it shows
// whether it ends a line; past maxHeldSpace bytes of it, it is let through.
type qpState struct {
	state int
	space []byte // white space that may end the line
	after []byte // white space after "=", in qpEqualsSpace
	hex   byte   // the digit after "=", in qpEqualsHex
}

const (
	qpText = iota
	qpEquals
	qpEqualsHex
	qpEqualsSpace
)

const maxHeldSpace = 4096

func isQPSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

func (s *qpState) feed(out, in []byte) []byte {
	for _, c := range in {
		out = s.byte(out, c)
	}
	return out
}

func (s *qpState) byte(out []byte, c byte) []byte {
	switch s.state {
	case qpText:
		switch {
		case c == '\n':
			s.space = s.space[:0]
			return append(out, '\r', '\n')
		case isQPSpace(c):
			if len(s.space) == maxHeldSpace {
				out = append(out, s.space...)
				s.space = s.space[:0]
			}
			s.space = append(s.space, c)
			return out
		}
		out = append(out, s.space...)
		s.space = s.space[:0]
		if c == '=' {
			s.state = qpEquals
			return out
		}
		return append(out, c)
	case qpEquals:
		switch {
		case c == '\n':
			s.state = qpText // soft line break
		case isQPSpace(c):
			s.after = append(s.after[:0], c)
			s.state = qpEqualsSpace
		case hexValue(c) >= 0:
			s.hex, s.state = c, qpEqualsHex
		default:
			s.state = qpText
			out = s.byte(append(out, '='), c)
		}
		return out
	case qpEqualsHex:
		s.state = qpText
		if v := hexValue(c); v >= 0 {
			return append(out, byte(hexValue(s.hex)<<4|v))
		}
		return s.byte(s.byte(append(out, '='), s.hex), c)
	}
	// qpEqualsSpace
	switch {
	case c == '\n':
		s.state = qpText // soft line break with white space before it
		return out
	case isQPSpace(c) && len(s.after) < maxHeldSpace:
		s.after = append(s.after, c)
		return out
	}
	s.state = qpText
	out = append(out, '=')
	for _, b := range s.after {
		out = s.byte(out, b)
	}
	return s.byte(out, c)
}

func (s *qpState) end(out []byte) []byte {
	if s.state == qpEqualsHex {
		out = append(out, '=', s.hex)
	}
	// Trailing white space, and "=" ending the input, are dropped.
	s.state, s.space, s.after = qpText, s.space[:0], s.after[:0]
	return out
}

func hexValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}
