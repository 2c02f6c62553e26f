package mailbox

import (
	"context"
	"errors"
	"sort"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Folder is one mailbox folder.
type Folder struct {
	Name string `json:"name"`
	// Display is Name without the personal namespace's prefix, where the
	// server has one ("INBOX.Sent" -> "Sent").
	Display    string `json:"display_name,omitempty" desc:"the name without the server's personal prefix (INBOX. on Cyrus and Courier), where it has one; use name in calls"`
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
	// The LIST goes behind the LOGIN on a new connection to a host whose
	// capabilities are known (opening.go).
	var fl folderList
	open := &opening{send: func(conn *Conn, caps imap.CapSet) { fl.send(conn.client(), caps) }}
	err := c.doOpen(ctx, creds, open, "listing the folders", true, func(ctx context.Context, conn *Conn) error {
		// Read first: it was sent first, and go-imap stalls while an
		// answer waits for its reader.
		data, err := fl.cmd.Collect()
		if err != nil && fl.refused(err, conn.client()) {
			fl.send(conn.client(), conn.client().Caps())
			data, err = fl.cmd.Collect()
		}
		if err != nil {
			return imapError(err, "")
		}
		if conn.srv, err = c.learn(conn); err != nil {
			return err
		}
		out, err = listFolders(conn, data, fl.status)
		return err
	})
	return out, err
}

// folderList is the LIST of every folder, with its special-use
// attributes and STATUS where the server offers them.
type folderList struct {
	cmd    *imapclient.ListCommand
	status bool // the LIST asks for STATUS (LIST-STATUS)
}

func (fl *folderList) send(cl *imapclient.Client, caps imap.CapSet) {
	opts := &imap.ListOptions{}
	if caps.Has(imap.CapSpecialUse) {
		opts.ReturnSpecialUse = true
	}
	fl.status = caps.Has(imap.CapListStatus) || caps.Has(imap.CapIMAP4rev2)
	if fl.status {
		opts.ReturnStatus = folderStatus
	}
	fl.cmd = cl.List("", "*", opts)
}

// refused says whether err is a BAD to a LIST that asked, on the host's
// learned capabilities, for more than this connection's server offers:
// asked again, it asks for what the server offers.
func (fl *folderList) refused(err error, cl *imapclient.Client) bool {
	var ie *imap.Error
	caps := cl.Caps()
	return asIMAP(err, &ie) && ie.Type == imap.StatusResponseTypeBad &&
		(fl.status && !caps.Has(imap.CapListStatus) && !caps.Has(imap.CapIMAP4rev2) || !caps.Has(imap.CapSpecialUse))
}

// listFolders makes the folders of the LIST's answer data; status says
// whether it carried their STATUS.
func listFolders(conn *Conn, data []*imap.ListData, listStatus bool) ([]Folder, error) {
	cl := conn.client()
	caps := cl.Caps()
	folders := make([]Folder, 0, len(data))
	var pending []*statusWait
	if !listStatus && conn.selected != "" {
		// STATUS of the selected folder is discouraged (RFC 3501) and not
		// current on every server: never ask it.
		if err := conn.unselect(); err != nil {
			return nil, err
		}
	}
	var ns Namespace
	if conn.srv != nil {
		ns = conn.srv.Namespace
	}
	for _, d := range data {
		f := Folder{Name: d.Mailbox, Selectable: true, Display: ns.Display(d.Mailbox)}
		if d.Delim != 0 {
			f.Delimiter = string(d.Delim)
		}
		f.Role, f.Selectable = roleOf(d), selectable(d)
		if f.Role == "" && !caps.Has(imap.CapSpecialUse) {
			f.Role = ns.roleByName(d.Mailbox)
		}
		if d.Status != nil {
			f.Total, f.Unread = deref(d.Status.NumMessages), deref(d.Status.NumUnseen)
		} else if f.Selectable && !listStatus {
			// Pipelined: every STATUS is sent before the first answer is read.
			pending = append(pending, &statusWait{i: len(folders), cmd: cl.Status(d.Mailbox, folderStatus)})
		}
		f.Name, f.Display = mailmsg.SanitizeLine(f.Name), mailmsg.SanitizeLine(f.Display)
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
			// No code to go by: the server's words say why. Only a code,
			// or a LIST without the folder (Conn.folderError), says that
			// it does not exist.
			return refusal(err, ie, "the mail server refused this for folder "+quote(folder))
		}
		return mailerr.Wrap(mailerr.Internal, err, "the mail server refused the command")
	}
	return mailerr.Wrap(mailerr.Unavailable, err, "the connection to the mail server failed")
}

// folderError classifies a refusal of a command about folder on conn
// (op says what was tried, to complete "could not OP folder X"): it does
// not exist on [NONEXISTENT] or [TRYCREATE], or when a LIST shows no such
// folder (Cyrus and Courier answer a SELECT of a missing folder with a
// NO without a code); a NO for permission, a read-only folder, quota or
// an invalid name is reported as that, with the server's words.
func (conn *Conn) folderError(err error, folder, op string) error {
	return folderErrorOn(conn.client(), err, folder, op)
}

// folderErrorOn is Conn.folderError on a client.
func folderErrorOn(cl *imapclient.Client, err error, folder, op string) error {
	var ie *imap.Error
	if !errors.As(err, &ie) || ie.Type != imap.StatusResponseTypeNo {
		return imapError(err, folder)
	}
	switch ie.Code {
	case imap.ResponseCodeNonExistent, imap.ResponseCodeTryCreate:
		return notFound(err, folder)
	case imap.ResponseCodeOverQuota:
		return refusal(err, ie, "the mailbox is over its quota: could not "+op+" folder "+quote(folder))
	case imap.ResponseCodeNoPerm:
		return refusal(err, ie, "the mail server does not allow this for your account: could not "+op+" folder "+quote(folder))
	case imap.ResponseCodeUnavailable, imap.ResponseCodeInUse, imap.ResponseCodeLimit:
		return imapError(err, folder)
	case "":
		if !strings.EqualFold(folder, "INBOX") {
			if d, lerr := listOne(cl, folder); lerr == nil && (d == nil || !selectable(d)) {
				return notFound(err, folder)
			}
		}
	}
	return refusal(err, ie, "the mail server refused to let the gateway "+op+" folder "+quote(folder))
}

func notFound(err error, folder string) error {
	return mailerr.Wrap(mailerr.NotFound, err, "folder "+quote(folder)+" does not exist").About(mailerr.SubjectFolder)
}

// refusal is a NO the user can act on: msg, and what the server said.
func refusal(err error, ie *imap.Error, msg string) error {
	if said := serverSaid(ie); said != "" {
		msg += " (it said: " + said + ")"
	}
	return mailerr.Wrap(mailerr.Permanent, err, msg)
}

// serverSaid is the text of the server's answer, cleaned for a message:
// one line, without Dovecot's timing, at most 200 characters.
func serverSaid(ie *imap.Error) string {
	said := strings.TrimSpace(dovecotTiming.ReplaceAllString(mailmsg.SanitizeLine(ie.Text), ""))
	if r := []rune(said); len(r) > 200 {
		said = string(r[:200]) + "…"
	}
	return said
}

func quote(s string) string { return "\"" + s + "\"" }

func asIMAP(err error, target **imap.Error) bool { return errors.As(err, target) }
