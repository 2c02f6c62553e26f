package mailbox

// What forwarding a message needs from IMAP: its header, its whole text
// and, when asked, its attachments' bytes, all read without changing it.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// File is an attachment's decoded content.
type File struct {
	Filename    string
	ContentType string
	Data        []byte
}

// ForwardSource is a message read for forwarding.
type ForwardSource struct {
	// Message has the header fields, the attachment list and the whole
	// text (up to MaxMaxChars characters; Truncated says when it was cut).
	Message *Message
	// Files are the attachments' contents, in the order of
	// Message.Attachments, when they were asked for and fit.
	Files []File
	// FilesTooLarge says the attachments were asked for but take about
	// FilesSize bytes, more than allowed; none was fetched.
	FilesTooLarge bool
	FilesSize     int64
}

// ReadForForward reads message uid of folder for a forward, without
// changing it (EXAMINE, BODY.PEEK). With maxFileBytes >= 0 it also fetches
// the attachments, unless their sizes (as the structure states them) add
// up to more than maxFileBytes: then FilesTooLarge is set and none is
// fetched.
func (c *Client) ReadForForward(ctx context.Context, creds credentials.Credentials, folder string, uid uint32, maxFileBytes int64) (*ForwardSource, error) {
	folder, err := c.folderArg(ctx, creds, folder)
	if err != nil {
		return nil, err
	}
	if uid == 0 {
		return nil, badUID()
	}
	var out *ForwardSource
	err = c.do(ctx, creds, "reading the message to forward", true, func(ctx context.Context, conn *Conn) error {
		if _, err := conn.examineFresh(folder); err != nil {
			return err
		}
		cl := conn.client()
		m, bs, err := fetchHeaderAndStructure(cl, folder, uid)
		if err != nil {
			return err
		}
		atts := attachmentParts(bs)
		body, warnings, err := fetchBody(cl, uid, bs, bodyTexts(bs), atts, textPartCap(0, MaxMaxChars), &m.TextFrom)
		if err != nil {
			return err
		}
		m.Warnings = append(m.Warnings, warnings...)
		m.TotalChars = utf8.RuneCountInString(body)
		m.Text, m.Truncated, _ = mailmsg.Truncate(body, 0, MaxMaxChars)
		for _, a := range atts {
			m.Attachments = append(m.Attachments, a.Attachment)
		}
		out = &ForwardSource{Message: m}
		if maxFileBytes < 0 || len(atts) == 0 {
			return nil
		}
		for _, a := range atts {
			out.FilesSize += a.Size
		}
		if out.FilesSize > maxFileBytes {
			out.FilesTooLarge = true
			return nil
		}
		files, warnings, err := fetchFiles(cl, folder, uid, atts, maxFileBytes)
		if err != nil {
			return err
		}
		if files == nil {
			out.FilesTooLarge = true
			return nil
		}
		out.Files = files
		m.Warnings = append(m.Warnings, warnings...)
		return nil
	})
	return out, err
}

// fetchFiles fetches the raw (transfer-encoded) attachments in one
// command and decodes them here, leniently as text parts are: Dovecot
// 2.3's BINARY is not trusted for every part (parts.go). Each part is read
// at most to the size the structure states, and all together to limit
// once decoded; nil means the decoded data would exceed limit.
func fetchFiles(cl *imapclient.Client, folder string, uid uint32, atts []attachmentPart, limit int64) ([]File, []string, error) {
	sections := make([]*imap.FetchItemBodySection, len(atts))
	for i, a := range atts {
		sections[i] = &imap.FetchItemBodySection{Part: a.path, Peek: true}
	}
	cmd := cl.Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{UID: true, BodySection: sections})
	defer cmd.Close()
	raw := make([][]byte, len(atts))
	got := make([]bool, len(atts))
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		for item := msg.Next(); item != nil; item = msg.Next() {
			it, ok := item.(imapclient.FetchItemDataBodySection)
			if !ok || it.Literal == nil {
				continue
			}
			for i, want := range sections {
				if !got[i] && it.MatchCommand(want) {
					b, err := io.ReadAll(io.LimitReader(it.Literal, int64(atts[i].part.Size)+1))
					if err != nil {
						return nil, nil, imapError(err, folder)
					}
					raw[i], got[i] = b, true
					break
				}
			}
		}
	}
	if err := cmd.Close(); err != nil {
		return nil, nil, imapError(err, folder)
	}
	var files []File
	var warnings []string
	var total int64
	for i, a := range atts {
		if !got[i] {
			return nil, nil, noMessage(uid, folder)
		}
		data, damaged := mailmsg.UndoTransferEncoding(raw[i], a.part.Encoding)
		if damaged {
			warnings = append(warnings, fmt.Sprintf("attachment %s (part %s) is damaged in the original (encoding %s); it was carried as far as it could be decoded", quote(a.Filename), a.PartID, mailmsg.SanitizeLine(a.part.Encoding)))
		}
		if total += int64(len(data)); total > limit {
			return nil, nil, nil
		}
		ct := a.ContentType
		if cs := a.part.Params["charset"]; strings.HasPrefix(strings.ToLower(ct), "text/") && cs != "" {
			// Carried byte for byte: the charset stays what it was. An
			// attachment in any charset but UTF-8 goes as an opaque file,
			// which the composer accepts.
			if !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
				ct = "application/octet-stream"
			} else {
				ct += "; charset=" + strings.ToLower(cs)
			}
		}
		files = append(files, File{Filename: a.Filename, ContentType: ct, Data: data})
	}
	return files, warnings, nil
}
