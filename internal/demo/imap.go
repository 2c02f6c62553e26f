package demo

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
)

// Capabilities is what the demo IMAP server advertises: what imapserver plus
// imapmemserver really implement, plus what the session wrapper in this file
// adds (SPECIAL-USE, CREATE-SPECIAL-USE, CHILDREN, APPENDLIMIT).
//
// Not advertised because nothing implements them: CONDSTORE, QRESYNC, SORT,
// THREAD, OBJECTID, QUOTA, ID, UNAUTHENTICATE, STARTTLS. imapserver adds
// SASL-IR, LITERAL-, AUTH=PLAIN, UNSELECT, ENABLE, IDLE and UTF8=ACCEPT on
// its own.
func Capabilities() imap.CapSet {
	return imap.CapSet{
		imap.CapIMAP4rev1:        {},
		imap.CapIMAP4rev2:        {},
		imap.CapNamespace:        {},
		imap.CapUIDPlus:          {},
		imap.CapESearch:          {},
		imap.CapSearchRes:        {},
		imap.CapListExtended:     {},
		imap.CapListStatus:       {},
		imap.CapMove:             {},
		imap.CapStatusSize:       {},
		imap.CapBinary:           {},
		imap.CapChildren:         {},
		imap.CapSpecialUse:       {},
		imap.CapCreateSpecialUse: {},
		imap.CapLiteralPlus:      {},
	}
}

const delim = '/'

// account is one demo user: the imapmemserver user holding the messages, and
// the folder registry the session wrapper needs because imapmemserver keeps
// its mailbox list, special-use attributes and subscriptions private (and
// never sets special-use at all).
type account struct {
	addr, password string
	mem            *imapmemserver.User

	mu      sync.Mutex
	folders map[string]*folder
}

type folder struct {
	specialUse []imap.MailboxAttr
	subscribed bool
}

func newAccount(addr, password string) *account {
	return &account{
		addr:     addr,
		password: password,
		mem:      imapmemserver.NewUser(addr, password),
		folders:  make(map[string]*folder),
	}
}

func (a *account) checkPassword(password string) bool {
	return subtle.ConstantTimeCompare([]byte(password), []byte(a.password)) == 1
}

// createLocked creates name and any missing parent, as RFC 3501 section
// 6.3.3 suggests. The caller holds a.mu.
func (a *account) createLocked(name string, specialUse []imap.MailboxAttr) error {
	parts := strings.Split(name, string(delim))
	for i := 1; i < len(parts); i++ {
		parent := strings.Join(parts[:i], string(delim))
		if _, ok := a.folders[parent]; ok {
			continue
		}
		if err := a.mem.Create(parent, &imap.CreateOptions{}); err != nil {
			return err
		}
		a.folders[parent] = &folder{}
	}
	if err := a.mem.Create(name, &imap.CreateOptions{}); err != nil {
		return err
	}
	a.folders[name] = &folder{specialUse: slices.Clone(specialUse)}
	return nil
}

func (a *account) hasChildrenLocked(name string) bool {
	prefix := name + string(delim)
	for n := range a.folders {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

func (a *account) hasSubscribedChildLocked(name string) bool {
	prefix := name + string(delim)
	for n, f := range a.folders {
		if f.subscribed && strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

func (s *Server) newIMAPServer() *imapserver.Server {
	return imapserver.New(&imapserver.Options{
		NewSession: func(c *imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			tc, _ := c.NetConn().(*trackedConn)
			s.log.Debug("IMAP connection", "remote", c.NetConn().RemoteAddr().String())
			return &imapSession{srv: s, conn: tc}, nil, nil
		},
		Caps:         Capabilities(),
		Logger:       printfLogger{s.log.With("proto", "imap")},
		InsecureAuth: true, // loopback only, see loopbackAddr
	})
}

var (
	errReadOnly = &imap.Error{
		Type: imap.StatusResponseTypeNo,
		Text: "Mailbox is read-only (opened with EXAMINE)",
	}
	errUseAttr = &imap.Error{
		Type: imap.StatusResponseTypeNo,
		Code: "USEATTR",
		Text: "Only \\Archive, \\Drafts, \\Junk, \\Sent, \\Trash and \\Important are supported",
	}
)

// imapSession wraps imapmemserver's session. The embedded UserSession is nil
// until LOGIN succeeds; imapserver only calls the promoted methods in the
// authenticated or selected state.
type imapSession struct {
	*imapmemserver.UserSession

	srv      *Server
	conn     *trackedConn // nil only if the listener was not ours
	acct     *account
	readOnly bool

	// imapserver runs Idle in a goroutine it does not wait for; Close waits
	// for it instead, so that Server.Close really waits for everything.
	idleMu   sync.Mutex
	idleDone chan struct{} // closed when the current Idle returns
	closed   bool
}

var (
	_ imapserver.SessionIMAP4rev2   = (*imapSession)(nil)
	_ imapserver.SessionAppendLimit = (*imapSession)(nil)
)

func (sess *imapSession) Login(username, password string) error {
	acct := sess.srv.accounts[strings.ToLower(username)]
	if acct == nil || !acct.checkPassword(password) {
		sess.srv.log.Info("IMAP login failed", "user", username)
		return imapserver.ErrAuthFailed
	}
	sess.acct = acct
	sess.UserSession = imapmemserver.NewUserSession(acct.mem)
	sess.srv.log.Debug("IMAP login", "user", acct.addr)
	return nil
}

func (sess *imapSession) Close() error {
	// imapserver has closed Idle's stop channel before it closes the session,
	// so this wait is short.
	sess.idleMu.Lock()
	sess.closed = true
	idleDone := sess.idleDone
	sess.idleMu.Unlock()
	if idleDone != nil {
		<-idleDone
	}

	var err error
	if sess.UserSession != nil {
		err = sess.UserSession.Close()
	}
	if sess.conn != nil {
		sess.conn.endSession()
	}
	return err
}

func (sess *imapSession) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
	sess.idleMu.Lock()
	if sess.closed {
		sess.idleMu.Unlock()
		return nil
	}
	done := make(chan struct{})
	sess.idleDone = done
	sess.idleMu.Unlock()
	defer close(done)
	return sess.UserSession.Idle(w, stop)
}

func (sess *imapSession) AppendLimit() uint32 { return MaxMessageBytes }

func (sess *imapSession) List(w *imapserver.ListWriter, ref string, patterns []string, options *imap.ListOptions) error {
	if len(patterns) == 0 {
		// LIST "" "": the hierarchy delimiter and root.
		return w.WriteList(&imap.ListData{
			Attrs: []imap.MailboxAttr{imap.MailboxAttrNoSelect},
			Delim: delim,
		})
	}

	a := sess.acct
	a.mu.Lock()
	var out []imap.ListData
	for name, f := range a.folders {
		if !matchAny(name, ref, patterns) {
			continue
		}
		data := imap.ListData{Mailbox: name, Delim: delim}
		if options.SelectSubscribed && !f.subscribed {
			// RFC 5258 RECURSIVEMATCH: a parent of a subscribed mailbox is
			// listed with CHILDINFO even if not subscribed itself.
			if !options.SelectRecursiveMatch || !a.hasSubscribedChildLocked(name) {
				continue
			}
		}
		if options.SelectSpecialUse && len(f.specialUse) == 0 {
			continue
		}
		if f.subscribed && (options.SelectSubscribed || options.ReturnSubscribed) {
			data.Attrs = append(data.Attrs, imap.MailboxAttrSubscribed)
		}
		if a.hasChildrenLocked(name) {
			data.Attrs = append(data.Attrs, imap.MailboxAttrHasChildren)
		} else {
			data.Attrs = append(data.Attrs, imap.MailboxAttrHasNoChildren)
		}
		// Like Dovecot, special-use attributes come with every LIST, not
		// only with RETURN (SPECIAL-USE).
		data.Attrs = append(data.Attrs, f.specialUse...)
		if options.SelectRecursiveMatch && a.hasSubscribedChildLocked(name) {
			data.ChildInfo = &imap.ListDataChildInfo{Subscribed: true}
		}
		if options.ReturnStatus != nil {
			st, err := a.mem.Status(name, options.ReturnStatus)
			if err == nil {
				data.Status = st
			}
		}
		out = append(out, data)
	}
	a.mu.Unlock()

	slices.SortFunc(out, func(x, y imap.ListData) int {
		// INBOX first, as every real server does.
		if (x.Mailbox == FolderInbox) != (y.Mailbox == FolderInbox) {
			if x.Mailbox == FolderInbox {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Mailbox, y.Mailbox)
	})
	for i := range out {
		if err := w.WriteList(&out[i]); err != nil {
			return err
		}
	}
	return nil
}

func matchAny(name, ref string, patterns []string) bool {
	for _, p := range patterns {
		if imapserver.MatchList(name, delim, ref, p) ||
			name == FolderInbox && ref == "" && strings.EqualFold(p, FolderInbox) { // INBOX is case-insensitive
			return true
		}
	}
	return false
}

func (sess *imapSession) Create(name string, options *imap.CreateOptions) error {
	name = strings.TrimRight(name, string(delim))
	if name == "" || strings.ContainsAny(name, "*%") {
		return &imap.Error{Type: imap.StatusResponseTypeNo, Text: "Invalid mailbox name"}
	}
	for _, attr := range options.SpecialUse {
		switch attr {
		case imap.MailboxAttrArchive, imap.MailboxAttrDrafts, imap.MailboxAttrJunk,
			imap.MailboxAttrSent, imap.MailboxAttrTrash, imap.MailboxAttrImportant:
		default:
			// \All and \Flagged would be virtual folders.
			return errUseAttr
		}
	}
	a := sess.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.folders[name]; ok {
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeAlreadyExists, Text: "Mailbox already exists"}
	}
	return a.createLocked(name, options.SpecialUse)
}

func (sess *imapSession) Delete(name string) error {
	if name == FolderInbox {
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeCannot, Text: "INBOX cannot be deleted"}
	}
	a := sess.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.folders[name]; !ok {
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeNonExistent, Text: "No such mailbox"}
	}
	if a.hasChildrenLocked(name) {
		// Dovecot does the same; RFC 3501 would allow keeping the name as
		// \Noselect, which imapmemserver cannot represent.
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeHasChildren, Text: "Mailbox has children, delete them first"}
	}
	if err := a.mem.Delete(name); err != nil {
		return err
	}
	delete(a.folders, name)
	return nil
}

// Rename moves a mailbox and its children (imapmemserver alone would move
// only the mailbox itself and orphan the children).
func (sess *imapSession) Rename(oldName, newName string, options *imap.RenameOptions) error {
	newName = strings.TrimRight(newName, string(delim))
	if oldName == FolderInbox {
		// RFC 3501 wants INBOX's messages moved to the new name and INBOX
		// left empty; imapmemserver would remove INBOX instead.
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeCannot, Text: "Renaming INBOX is not supported by the demo server"}
	}
	if newName == "" || newName == FolderInbox || strings.ContainsAny(newName, "*%") ||
		newName == oldName || strings.HasPrefix(newName, oldName+string(delim)) {
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeCannot, Text: "Invalid new mailbox name"}
	}
	a := sess.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.folders[oldName]; !ok {
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeNonExistent, Text: "No such mailbox"}
	}
	if _, ok := a.folders[newName]; ok {
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeAlreadyExists, Text: "Mailbox already exists"}
	}
	// Create missing parents of the new name.
	parts := strings.Split(newName, string(delim))
	for i := 1; i < len(parts); i++ {
		parent := strings.Join(parts[:i], string(delim))
		if _, ok := a.folders[parent]; ok {
			continue
		}
		if err := a.mem.Create(parent, &imap.CreateOptions{}); err != nil {
			return err
		}
		a.folders[parent] = &folder{}
	}
	moves := []string{oldName}
	for n := range a.folders {
		if strings.HasPrefix(n, oldName+string(delim)) {
			moves = append(moves, n)
		}
	}
	for _, from := range moves {
		to := newName + strings.TrimPrefix(from, oldName)
		if err := a.mem.Rename(from, to, options); err != nil {
			return err
		}
		a.folders[to] = a.folders[from]
		delete(a.folders, from)
	}
	return nil
}

func (sess *imapSession) Subscribe(name string) error { return sess.setSubscribed(name, true) }

func (sess *imapSession) Unsubscribe(name string) error { return sess.setSubscribed(name, false) }

func (sess *imapSession) setSubscribed(name string, on bool) error {
	a := sess.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	f, ok := a.folders[name]
	if !ok {
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeNonExistent, Text: "No such mailbox"}
	}
	f.subscribed = on
	return nil
}

func (sess *imapSession) Select(name string, options *imap.SelectOptions) (*imap.SelectData, error) {
	data, err := sess.UserSession.Select(name, options)
	if err != nil {
		return nil, err
	}
	sess.readOnly = options != nil && options.ReadOnly
	return data, nil
}

func (sess *imapSession) Unselect() error {
	sess.readOnly = false
	return sess.UserSession.Unselect()
}

// Fetch never sets \Seen in a mailbox opened with EXAMINE (imapmemserver
// would, for a non-PEEK body section).
func (sess *imapSession) Fetch(w *imapserver.FetchWriter, numSet imap.NumSet, options *imap.FetchOptions) error {
	if sess.readOnly {
		o := *options
		o.BodySection = make([]*imap.FetchItemBodySection, len(options.BodySection))
		for i, bs := range options.BodySection {
			c := *bs
			c.Peek = true
			o.BodySection[i] = &c
		}
		options = &o
	}
	return sess.UserSession.Fetch(w, numSet, options)
}

func (sess *imapSession) Store(w *imapserver.FetchWriter, numSet imap.NumSet, flags *imap.StoreFlags, options *imap.StoreOptions) error {
	if sess.readOnly {
		return errReadOnly
	}
	return sess.UserSession.Store(w, numSet, flags, options)
}

// Expunge does nothing in a mailbox opened with EXAMINE. It cannot fail
// there: imapserver also calls it for CLOSE, which RFC 3501 says must then
// succeed without expunging; so EXPUNGE after EXAMINE answers OK and removes
// nothing.
func (sess *imapSession) Expunge(w *imapserver.ExpungeWriter, uids *imap.UIDSet) error {
	if sess.readOnly {
		return nil
	}
	return sess.UserSession.Expunge(w, uids)
}

func (sess *imapSession) Move(w *imapserver.MoveWriter, numSet imap.NumSet, dest string) error {
	if sess.readOnly {
		return errReadOnly
	}
	return sess.UserSession.Move(w, numSet, dest)
}

// appendMessage stores raw in a folder of the account without going through
// the network.
func (a *account) appendMessage(folderName string, raw []byte, opts *imap.AppendOptions) error {
	if _, err := a.mem.Append(folderName, bytes.NewReader(raw), opts); err != nil {
		return fmt.Errorf("append to %s/%s: %w", a.addr, folderName, err)
	}
	return nil
}
