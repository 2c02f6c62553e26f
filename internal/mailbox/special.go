package mailbox

import (
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// A special folder is found by its special-use attribute (RFC 6154), else
// by a usual name: a folder matches by its whole name or its last level
// ("INBOX.Sent"), most likely names first.
var (
	sentNames = []string{
		"Sent", "Sent Items", "Sent Messages", "Sent Mail", "Sent-Mail", "[Gmail]/Sent Mail",
		"Gesendet", "Gesendete Objekte", "Gesendete Elemente", "Envoyés", "Éléments envoyés",
		"Enviados", "Elementos enviados", "Inviati", "Posta inviata", "Verzonden", "Verzonden items",
		"Skickat", "Sendt", "Lähetetyt", "Wysłane", "Отправленные",
	}
	trashNames = []string{
		"Trash", "Deleted Items", "Deleted Messages", "Deleted", "Bin", "[Gmail]/Trash", "[Gmail]/Bin",
		"Papierkorb", "Gelöschte Elemente", "Gelöschte Objekte", "Corbeille", "Éléments supprimés",
		"Papelera", "Elementos eliminados", "Cestino", "Prullenbak", "Verwijderde items",
		"Papperskorgen", "Slettet", "Roskakori", "Kosz", "Корзина",
	}
	draftsNames = []string{
		"Drafts", "Draft", "[Gmail]/Drafts", "Entwürfe", "Brouillons", "Borradores", "Bozze",
		"Concepten", "Utkast", "Kladder", "Luonnokset", "Szkice", "Черновики",
	}
)

// findSent returns the Sent folder's name, or "" when there is none.
func findSent(cl *imapclient.Client) (string, error) {
	return findSpecial(cl, imap.MailboxAttrSent, sentNames)
}

// sentFolder is findSent, remembered for the connection's life: a pooled
// connection serves one user, whose Sent folder hardly ever moves, and the
// LIST would cost every send and every thread a round trip.
func (conn *Conn) sentFolder() (string, error) {
	if conn.sentName != "" {
		return conn.sentName, nil
	}
	name, err := findSent(conn.client())
	if err == nil {
		conn.sentName = name
	}
	return name, err
}

// findSpecial returns the name of the folder with the special-use attribute
// attr, else of the first folder with one of names, or "" when there is
// none.
func findSpecial(cl *imapclient.Client, attr imap.MailboxAttr, names []string) (string, error) {
	if cl.Caps().Has(imap.CapSpecialUse) {
		// LIST (SPECIAL-USE): only the special-use folders, however many
		// folders the mailbox has.
		data, err := cl.List("", "*", &imap.ListOptions{SelectSpecialUse: true}).Collect()
		if err == nil {
			if name := withAttr(data, attr); name != "" {
				return name, nil
			}
		} else if !asIMAP(err, new(*imap.Error)) {
			return "", imapError(err, "")
		}
	}
	opts := &imap.ListOptions{}
	if cl.Caps().Has(imap.CapSpecialUse) {
		opts.ReturnSpecialUse = true
	}
	data, err := cl.List("", "*", opts).Collect()
	if err != nil {
		return "", imapError(err, "")
	}
	return pickSpecial(data, attr, names), nil
}

// pickSpecial chooses a special folder from a LIST answer: the folder with
// attr, else the first usual name, else "".
func pickSpecial(data []*imap.ListData, attr imap.MailboxAttr, names []string) string {
	if name := withAttr(data, attr); name != "" {
		return name
	}
	for _, want := range names {
		for _, d := range data {
			if !selectable(d) {
				continue
			}
			leaf := d.Mailbox
			if d.Delim != 0 {
				if i := strings.LastIndexByte(leaf, byte(d.Delim)); i >= 0 && d.Delim < 0x80 {
					leaf = leaf[i+1:]
				}
			}
			if strings.EqualFold(d.Mailbox, want) || strings.EqualFold(leaf, want) {
				return d.Mailbox
			}
		}
	}
	return ""
}

func withAttr(data []*imap.ListData, attr imap.MailboxAttr) string {
	for _, d := range data {
		if !selectable(d) {
			continue
		}
		for _, a := range d.Attrs {
			if strings.EqualFold(string(a), string(attr)) {
				return d.Mailbox
			}
		}
	}
	return ""
}

func selectable(d *imap.ListData) bool {
	for _, a := range d.Attrs {
		if s := strings.ToLower(string(a)); s == `\noselect` || s == `\nonexistent` {
			return false
		}
	}
	return true
}

// createSpecial creates the special folder name (placed in the personal
// namespace) for a mailbox that has none, marked attr where the server
// takes CREATE ... USE (RFC 6154), and subscribes to it. One created by
// someone else meanwhile is used.
func (c *Client) createSpecial(conn *Conn, attr imap.MailboxAttr, name string) (string, error) {
	cl := conn.client()
	name = conn.place(name)
	var opts *imap.CreateOptions
	if cl.Caps().Has(imap.CapCreateSpecialUse) {
		opts = &imap.CreateOptions{SpecialUse: []imap.MailboxAttr{attr}}
	}
	err := cl.Create(name, opts).Wait()
	if err != nil && opts != nil {
		// a server that takes no USE for this name: a plain folder
		err = cl.Create(name, nil).Wait()
	}
	if err != nil {
		if d, lerr := listOne(cl, name); lerr == nil && d != nil && selectable(d) {
			return name, nil
		}
		return "", folderOpError(err, name, "create")
	}
	_ = cl.Subscribe(name).Wait()
	return name, nil
}
