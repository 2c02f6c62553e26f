package mailbox

import (
	"context"
	"errors"
	"sort"
	"strings"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Folder is one mailbox folder.
type Folder struct {
	Name       string `json:"name"`
	Delimiter  string `json:"delimiter,omitempty"`
	Role       string `json:"role,omitempty"` // inbox, sent, drafts, trash, junk, archive, all, flagged
	Selectable bool   `json:"selectable"`
	Total      uint32 `json:"total"`
	Unread     uint32 `json:"unread"`
}

// roles maps special-use attributes (RFC 6154), lower-cased, to roles.
var roles = map[string]string{
	`\sent`: "sent", `\drafts`: "drafts", `\trash`: "trash", `\junk`: "junk",
	`\archive`: "archive", `\all`: "all", `\flagged`: "flagged",
}

var folderStatus = &imap.StatusOptions{NumMessages: true, NumUnseen: true}

// ListFolders lists every folder with its role and counts: one LIST-STATUS
// round trip when the server offers it, else LIST plus pipelined STATUS.
func (c *Client) ListFolders(ctx context.Context, creds credentials.Credentials) ([]Folder, error) {
	var out []Folder
	err := c.do(ctx, creds, "listing the folders", true, func(ctx context.Context, conn *Conn) error {
		var err error
		out, err = listFolders(conn)
		return err
	})
	return out, err
}

func listFolders(conn *Conn) ([]Folder, error) {
	cl := conn.client()
	caps := cl.Caps()
	opts := &imap.ListOptions{}
	if caps.Has(imap.CapSpecialUse) {
		opts.ReturnSpecialUse = true
	}
	listStatus := caps.Has(imap.CapListStatus) || caps.Has(imap.CapIMAP4rev2)
	if listStatus {
		opts.ReturnStatus = folderStatus
	}
	data, err := cl.List("", "*", opts).Collect()
	if err != nil {
		return nil, imapError(err, "")
	}
	folders := make([]Folder, 0, len(data))
	var pending []*statusWait
	for _, d := range data {
		f := Folder{Name: d.Mailbox, Selectable: true}
		if d.Delim != 0 {
			f.Delimiter = string(d.Delim)
		}
		f.Role, f.Selectable = roleOf(d), selectable(d)
		if d.Status != nil {
			f.Total, f.Unread = deref(d.Status.NumMessages), deref(d.Status.NumUnseen)
		} else if f.Selectable && !listStatus {
			// Pipelined: every STATUS is sent before the first answer is read.
			pending = append(pending, &statusWait{i: len(folders), cmd: cl.Status(d.Mailbox, folderStatus)})
		}
		f.Name = mailmsg.SanitizeLine(f.Name)
		folders = append(folders, f)
	}
	for _, p := range pending {
		sd, err := p.cmd.Wait()
		if err != nil {
			var ie *imap.Error
			if errors.As(err, &ie) {
				continue // a folder that vanished between LIST and STATUS
			}
			return nil, imapError(err, "")
		}
		folders[p.i].Total, folders[p.i].Unread = deref(sd.NumMessages), deref(sd.NumUnseen)
	}
	sort.SliceStable(folders, func(i, j int) bool {
		// INBOX first, then the server's order.
		return folders[i].Role == "inbox" && folders[j].Role != "inbox"
	})
	return folders, nil
}

// roleOf is a LISTed folder's role: inbox by name, else from its special-use
// attribute.
func roleOf(d *imap.ListData) string {
	if strings.EqualFold(d.Mailbox, "INBOX") {
		return "inbox"
	}
	for _, a := range d.Attrs {
		if r := roles[strings.ToLower(string(a))]; r != "" {
			return r
		}
	}
	return ""
}

type statusWait struct {
	i   int
	cmd interface {
		Wait() (*imap.StatusData, error)
	}
}

func deref(p *uint32) uint32 {
	if p == nil {
		return 0
	}
	return *p
}

// imapError classifies a command's error: a NO about a mailbox is "no such
// folder", anything else keeps its cause for the log and a generic message.
func imapError(err error, folder string) error {
	var ie *imap.Error
	if errors.As(err, &ie) {
		switch ie.Code {
		case imap.ResponseCodeNonExistent, imap.ResponseCodeTryCreate:
			return mailerr.Wrap(mailerr.NotFound, err, "folder "+quote(folder)+" does not exist").About(mailerr.SubjectFolder)
		case imap.ResponseCodeUnavailable, imap.ResponseCodeInUse:
			return mailerr.Wrap(mailerr.Temporary, err, "the mail server is temporarily unable to do this")
		case imap.ResponseCodeLimit:
			return mailerr.Wrap(mailerr.Temporary, err, "the mail server refused: a server limit was reached")
		case imap.ResponseCodeOverQuota:
			return mailerr.Wrap(mailerr.Permanent, err, "the mailbox is over its quota")
		case imap.ResponseCodeNoPerm:
			return mailerr.Wrap(mailerr.Permanent, err, "the mail server does not allow this for your account")
		}
		if folder != "" && ie.Type == imap.StatusResponseTypeNo {
			return mailerr.Wrap(mailerr.NotFound, err, "folder "+quote(folder)+" does not exist or cannot be opened").About(mailerr.SubjectFolder)
		}
		return mailerr.Wrap(mailerr.Internal, err, "the mail server refused the command")
	}
	return mailerr.Wrap(mailerr.Unavailable, err, "the connection to the mail server failed")
}

func quote(s string) string { return "\"" + s + "\"" }

func asIMAP(err error, target **imap.Error) bool { return errors.As(err, target) }
