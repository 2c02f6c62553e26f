package tests

// The interop matrix: every tool that needs no SMTP, called through the
// gateway against Dovecot, Cyrus IMAP 3.6 and Courier IMAP 5.0 (each as
// Debian configures it: scripts/imapservers.sh) and the in-memory demo
// server, each result compared with what the server holds as a plain
// go-imap client sees it (never the gateway's code). Each server's subtest
// names the tools in order; the closing subtest says how many were right.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message/charset"
	"github.com/mark3labs/mcp-go/client"

	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// interopServer is one server of the matrix: how the gateway reaches it
// and how the test's own client does.
type interopServer struct {
	name       string
	user, pass string
	env        []string // the gateway's IMAP_* settings
	dial       func(t testing.TB) *imapclient.Client
}

// interopRecheck is WAIT_RECHECK in the matrix: a wait must wake within it
// (plus delivery) on servers whose IDLE does not push.
const interopRecheck = 2 * time.Second

func plainServer(name, addr, user, pass string) interopServer {
	host, port, _ := strings.Cut(addr, ":")
	return interopServer{
		name: name, user: user, pass: pass,
		env: []string{"IMAP_HOST=" + host, "IMAP_PORT=" + port, "IMAP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true"},
		dial: func(t testing.TB) *imapclient.Client {
			t.Helper()
			c, err := imapclient.DialInsecure(addr, &imapclient.Options{WordDecoder: &mime.WordDecoder{CharsetReader: charset.Reader}})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Login(user, pass).Wait(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Logout().Wait(); c.Close() })
			return c
		},
	}
}

// interopKind is one server of the matrix: started once, with users
// enough for every mode (the demo, whose two users are fixed, starts
// anew for each mode).
type interopKind struct {
	name string
	// users returns n users of one instance for a mode, none given to
	// another mode before.
	users func(t *testing.T, n int) []interopServer
}

// interopUsers is how many users a server of the matrix has: one warm,
// two cold (one teaching each fresh gateway the server, the other calling
// the tools), one after idling, two interleaved.
const interopUsers = 6

// interopKinds starts the four servers of the matrix.
func interopKinds(t *testing.T) []interopKind {
	t.Helper()
	dovecotUsers := map[string]string{}
	for i := range interopUsers {
		dovecotUsers[fmt.Sprintf("interop%d@example.test", i)] = fmt.Sprintf("interop-pw-%d", i)
	}
	st := mailtest.StartT(t, mailtest.Options{Users: dovecotUsers})
	serverUsers := map[string]string{}
	for i := range interopUsers {
		serverUsers[fmt.Sprintf("interop%d", i)] = fmt.Sprintf("interoppw%d", i)
	}
	cy := mailtest.StartIMAP(t, mailtest.Cyrus, serverUsers)
	co := mailtest.StartIMAP(t, mailtest.Courier, serverUsers)
	// pick hands out each instance's users in turn.
	pick := func(names func(i int) (string, string), srv func(user, pass string) interopServer) func(t *testing.T, n int) []interopServer {
		var mu sync.Mutex
		next := 0
		return func(t *testing.T, n int) []interopServer {
			mu.Lock()
			defer mu.Unlock()
			if next+n > interopUsers {
				t.Fatalf("the matrix asks for more than %d users", interopUsers)
			}
			var out []interopServer
			for ; n > 0; n-- {
				out = append(out, srv(names(next)))
				next++
			}
			return out
		}
	}
	dovecot := func(user, pass string) interopServer {
		return interopServer{
			name: "dovecot", user: user, pass: pass,
			env:  []string{"IMAP_HOST=127.0.0.1", "IMAP_PORT=" + strconv.Itoa(st.IMAPSPort), "MAIL_CA_FILE=" + st.CAFile},
			dial: func(t testing.TB) *imapclient.Client { return direct(t, st, user) },
		}
	}
	named := func(prefix, pw string) func(i int) (string, string) {
		return func(i int) (string, string) { return fmt.Sprintf(prefix+"%d", i), fmt.Sprintf(pw+"%d", i) }
	}
	return []interopKind{
		{"dovecot", pick(named("interop", "interop-pw-"), func(u, p string) interopServer { return dovecot(u+"@example.test", p) })},
		{"cyrus", pick(named("interop", "interoppw"), func(u, p string) interopServer { return plainServer("cyrus", cy.Addr(), u, p) })},
		{"courier", pick(named("interop", "interoppw"), func(u, p string) interopServer { return plainServer("courier", co.Addr(), u, p) })},
		{"demo", func(t *testing.T, n int) []interopServer {
			dm, err := demo.Start(context.Background(), demo.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dm.Close() })
			all := []interopServer{
				plainServer("demo", dm.IMAPAddr, demo.BobAddress, demo.BobPassword),
				plainServer("demo", dm.IMAPAddr, demo.AliceAddress, demo.AlicePassword),
			}
			return all[:n]
		}},
	}
}

// The matrix runs every tool in four ways, for what users hit:
//
//   - warm: one user, each tool right after the one before, on the
//     gateway's pooled connection (the first call learns the server);
//   - cold: a second user of a server the gateway has learned: before each
//     tool, a fresh gateway is taught the server by another user's call,
//     so that the tool's first call is this user's first, on a fresh
//     connection (Courier drops commands sent behind a LOGIN: issue 35);
//   - idle: each tool's first call comes after the user's pooled
//     connections idled out (POOL_IDLE_TIMEOUT=200ms);
//   - interleaved: two users on one gateway, tool by tool in turn.
//
// The servers, and the modes of one server, run side by side.
var interopModes = []string{"warm", "cold", "idle", "interleaved"}

func TestInteropMatrix(t *testing.T) {
	for _, k := range interopKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			for _, mode := range interopModes {
				t.Run(mode, func(t *testing.T) {
					t.Parallel()
					runMode(t, k, mode)
				})
			}
		})
	}
}

// interopIdle is POOL_IDLE_TIMEOUT in the idle mode: the pool looks for
// idle connections every second, so one is closed 0.2 to 1.2 s after its
// last call.
const interopIdle = 200 * time.Millisecond

// matrix is one user's run.
type matrix struct {
	srv      interopServer
	g, g2    *gateway
	me       *client.Client // the user, no agent name
	alpha    *client.Client // agents alpha and beta of the same mailbox
	beta     *client.Client
	beta2    *client.Client // beta on a second gateway: what is stored is on the server
	prefix   string         // the personal namespace's prefix, as the test's client finds it
	delim    string
	uids     map[string]imap.UID // fixture -> UID in INBOX
	attached []byte
	// trashFolder is where imap_trash_emails put the message.
	trashFolder string
}

// matrixStep is one tool's step.
type matrixStep struct {
	tool string
	run  func(m *matrix, t *testing.T)
}

var matrixSteps = []matrixStep{
	{"imap_list_folders", (*matrix).listFolders},
	{"imap_list_emails", (*matrix).listEmails},
	{"imap_search_emails", (*matrix).search},
	{"imap_read_email", (*matrix).read},
	{"imap_get_thread", (*matrix).thread},
	{"imap_get_attachment", (*matrix).attachment},
	{"imap_peek_inbox", (*matrix).peek},
	{"imap_wait_for_email", (*matrix).wait},
	{"imap_check_inbox", (*matrix).check},
	{"imap_set_flags", (*matrix).setFlags},
	{"imap_create_folder", (*matrix).createFolder},
	{"imap_rename_folder", (*matrix).renameFolder},
	{"imap_move_emails", (*matrix).move},
	{"imap_trash_emails", (*matrix).trash},
	{"imap_delete_folder", (*matrix).deleteFolder},
	{"imap_save_draft", (*matrix).saveDraft},
	{"imap_encrypt_credentials", (*matrix).encrypt},
	{"agent_send", (*matrix).agentSend},
	{"agent_list", (*matrix).agentList},
	{"agent_set_status", (*matrix).agentStatus},
	{"agent_set_state", (*matrix).agentSetState},
	{"agent_get_state", (*matrix).agentGetState},
	{"agent_create_conversation", (*matrix).agentCreateConversation},
	{"agent_list_conversations", (*matrix).agentListConversations},
	{"agent_history", (*matrix).agentHistory},
	{"agent_leave_conversation", (*matrix).agentLeave},
	{"agent_prune", (*matrix).agentPrune},
	{"errors_say_what_the_server_said", (*matrix).errors},
}

// runMode runs every step for the mode's users on server kind k.
func runMode(t *testing.T, k interopKind, mode string) {
	n := 1
	if mode == "cold" || mode == "interleaved" {
		n = 2
	}
	users := k.users(t, n)
	env := append(slices.Clone(users[0].env), "MAILBOX_ACCESS=full", "SMTP_FROM_POLICY=any", "WAIT_RECHECK="+interopRecheck.String())
	if mode == "idle" {
		env = append(env, "POOL_IDLE_TIMEOUT="+interopIdle.String())
	}
	var ms []*matrix
	var before func(t *testing.T, m *matrix)
	switch mode {
	case "cold":
		// users[0] only teaches each fresh gateway the server.
		learner := users[0]
		ms = []*matrix{{srv: users[1]}}
		before = func(t *testing.T, m *matrix) {
			g, g2 := startGatewayEnv(t, env...), startGatewayEnv(t, env...)
			for _, g := range []*gateway{g, g2} {
				c := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": learner.user, "x-imap-pass": learner.pass}, "")
				if res := mailtest.Call(t, c, "imap_list_folders", nil); res.IsError {
					t.Fatalf("teaching the gateway the server: %s", mailtest.Text(res))
				}
			}
			m.connect(t, g, g2)
		}
	default:
		g, g2 := startGatewayEnv(t, env...), startGatewayEnv(t, env...)
		for _, u := range users {
			m := &matrix{srv: u}
			m.connect(t, g, g2)
			ms = append(ms, m)
		}
		if mode == "idle" {
			before = func(t *testing.T, m *matrix) { idledOut(t, m.g, m.g2) }
		}
	}
	for _, m := range ms {
		m.uids = map[string]imap.UID{}
		m.setup(t)
	}
	right := map[string]bool{}
	wrong := map[string]bool{}
	for _, s := range matrixSteps {
		for i, m := range ms {
			name := s.tool
			if len(ms) > 1 {
				name += "/user" + strconv.Itoa(i+1)
			}
			ok := t.Run(name, func(t *testing.T) {
				if before != nil {
					before(t, m)
				}
				s.run(m, t)
			})
			if s.tool == "errors_say_what_the_server_said" {
				continue
			}
			if ok && !wrong[s.tool] {
				right[s.tool] = true
			} else {
				delete(right, s.tool)
				wrong[s.tool] = true
			}
		}
	}
	tools := len(matrixSteps) - 1
	t.Run(fmt.Sprintf("%d_of_%d_tools_right", len(right), tools), func(t *testing.T) {
		if len(wrong) > 0 {
			var names []string
			for n := range wrong {
				names = append(names, n)
			}
			slices.Sort(names)
			t.Errorf("%s, %s: wrong: %s", users[0].name, mode, strings.Join(names, ", "))
		}
	})
	if mode == "idle" {
		if st := ms[0].g.App.PoolStats(); st.Expired == 0 {
			t.Errorf("no pooled connection idled out: %+v", st)
		}
	}
}

// connect makes the user's clients on g (and beta's second on g2).
func (m *matrix) connect(t *testing.T, g, g2 *gateway) {
	m.g, m.g2 = g, g2
	h := map[string]string{"x-imap-user": m.srv.user, "x-imap-pass": m.srv.pass}
	agent := func(g *gateway, name string) *client.Client {
		hh := map[string]string{"x-mailbox-agent": name}
		for k, v := range h {
			hh[k] = v
		}
		return mailtest.MCPClient(t, g.URL, hh, "")
	}
	m.me = mailtest.MCPClient(t, g.URL, h, "")
	m.alpha, m.beta, m.beta2 = agent(g, "alpha"), agent(g, "beta"), agent(g2, "beta")
}

// idledOut waits until the gateways hold no connection, idle or in use:
// the pool closed every idle one (POOL_IDLE_TIMEOUT), so the next call
// dials.
func idledOut(t *testing.T, gs ...*gateway) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, g := range gs {
		for {
			st := g.App.PoolStats()
			if st.Idle == 0 && st.InUse == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pooled connections did not idle out: %+v", st)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// convs is the conversation each run's agent steps share.
var convs sync.Map // *matrix -> string

// call calls a tool and decodes its structured result; a tool error
// fails the test with its sentence.
func (m *matrix) call(t *testing.T, c *client.Client, tool string, args map[string]any) map[string]any {
	t.Helper()
	res := mailtest.Call(t, c, tool, args)
	if res.IsError {
		t.Fatalf("%s: tool error: %s", tool, mailtest.Text(res))
	}
	var out map[string]any
	mailtest.Decode(t, res, &out)
	return out
}

// full is name as a folder the gateway puts at the top level: under the
// personal namespace's prefix.
func (m *matrix) full(name string) string { return m.prefix + name }

func (m *matrix) setup(t *testing.T) {
	d := m.srv.dial(t)
	if d.Caps().Has(imap.CapNamespace) {
		ns, err := d.Namespace().Wait()
		if err != nil {
			t.Fatal(err)
		}
		if len(ns.Personal) > 0 {
			m.prefix = ns.Personal[0].Prefix
		}
	}
	l, err := d.List("", "", nil).Collect()
	if err != nil {
		t.Fatal(err)
	}
	if len(l) > 0 && l[0].Delim != 0 {
		m.delim = string(l[0].Delim)
	}
	m.attached = []byte("attached bytes: interop 42\r\n")
	date := time.Now().Add(-time.Hour).Format(time.RFC1123Z)
	msgs := []struct{ key, raw string }{
		{"one", "From: Carol <carol@example.org>\r\nTo: " + m.srv.user + "\r\nSubject: Interop one\r\nDate: " + date +
			"\r\nMessage-ID: <interop-1@example.org>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nfirst message body\r\n"},
		{"two", "From: Dan <dan@example.org>\r\nTo: " + m.srv.user + "\r\nSubject: Re: Interop one\r\nDate: " + date +
			"\r\nMessage-ID: <interop-2@example.org>\r\nIn-Reply-To: <interop-1@example.org>\r\nReferences: <interop-1@example.org>\r\n" +
			"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b1\r\n\r\n--b1\r\nContent-Type: text/plain\r\n\r\nsee the note\r\n" +
			"--b1\r\nContent-Type: text/plain; name=note.txt\r\nContent-Disposition: attachment; filename=note.txt\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
			b64(m.attached) + "\r\n--b1--\r\n"},
		{"three", "From: Erin <erin@example.org>\r\nTo: " + m.srv.user + "\r\nSubject: Interop three\r\nDate: " + date +
			"\r\nMessage-ID: <interop-3@example.org>\r\nX-Mailbox-Tags: review\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>third <b>message</b></p>\r\n"},
	}
	for _, f := range msgs {
		m.uids[f.key] = appendUID(t, d, "INBOX", []byte(f.raw), nil, time.Time{})
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// appendRaw APPENDs raw to folder with flags and returns its UID (found by
// its Message-ID when the server does not say).
func appendUID(t testing.TB, d *imapclient.Client, folder string, raw []byte, flags []imap.Flag, date time.Time) imap.UID {
	t.Helper()
	cmd := d.Append(folder, int64(len(raw)), &imap.AppendOptions{Flags: flags, Time: date})
	if _, err := cmd.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := cmd.Wait()
	if err != nil {
		t.Fatalf("APPEND to %s: %v", folder, err)
	}
	if data.UID != 0 {
		return data.UID
	}
	id := headerValue(raw, "Message-Id")
	uids := searchUIDs(t, d, folder, &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: id}}})
	if len(uids) != 1 {
		t.Fatalf("appended %s to %s, found %v", id, folder, uids)
	}
	return uids[0]
}

func headerValue(raw []byte, name string) string {
	for _, line := range strings.Split(string(raw), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
		if line == "" {
			break
		}
	}
	return ""
}

// searchUIDs selects folder read-only on d and searches it.
func searchUIDs(t testing.TB, d *imapclient.Client, folder string, crit *imap.SearchCriteria) []imap.UID {
	t.Helper()
	if _, err := d.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatalf("EXAMINE %s: %v", folder, err)
	}
	data, err := d.UIDSearch(crit, nil).Wait()
	if err != nil {
		t.Fatalf("SEARCH in %s: %v", folder, err)
	}
	uids := data.AllUIDs()
	slices.Sort(uids)
	return uids
}

// flagsOf fetches the flags of uid in folder (lower-cased).
func flagsOfUID(t testing.TB, d *imapclient.Client, folder string, uid imap.UID) []string {
	t.Helper()
	if _, err := d.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	bufs, err := d.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, Flags: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range bufs {
		for _, f := range b.Flags {
			out = append(out, strings.ToLower(string(f)))
		}
	}
	return out
}

// folders lists the server's selectable folders.
func folderNames(t testing.TB, d *imapclient.Client) []string {
	t.Helper()
	l, err := d.List("", "*", nil).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range l {
		if !slices.ContainsFunc(x.Attrs, func(a imap.MailboxAttr) bool {
			return strings.EqualFold(string(a), `\noselect`) || strings.EqualFold(string(a), `\nonexistent`)
		}) {
			out = append(out, x.Mailbox)
		}
	}
	slices.Sort(out)
	return out
}

func status(t testing.TB, d *imapclient.Client, folder string) (total, unseen uint32) {
	t.Helper()
	sd, err := d.Status(folder, &imap.StatusOptions{NumMessages: true, NumUnseen: true}).Wait()
	if err != nil {
		t.Fatalf("STATUS %s: %v", folder, err)
	}
	return *sd.NumMessages, *sd.NumUnseen
}

func num(v any) uint32 {
	f, _ := v.(float64)
	return uint32(f)
}

func list(v any) []any { l, _ := v.([]any); return l }

func obj(v any) map[string]any { o, _ := v.(map[string]any); return o }

// uidsOf is the uid field of each of a result's messages.
func uidsOf(msgs any) []imap.UID {
	var out []imap.UID
	for _, x := range list(msgs) {
		out = append(out, imap.UID(num(obj(x)["uid"])))
	}
	slices.Sort(out)
	return out
}

func (m *matrix) listFolders(t *testing.T) {
	res := m.call(t, m.me, "imap_list_folders", nil)
	d := m.srv.dial(t)
	want := folderNames(t, d)
	var got []string
	var inbox map[string]any
	for _, f := range list(res["folders"]) {
		f := obj(f)
		if f["selectable"] == true {
			got = append(got, str(f["name"]))
		}
		if str(f["name"]) == "INBOX" {
			inbox = f
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("folders: gateway %q, server %q", got, want)
	}
	total, unseen := status(t, d, "INBOX")
	if inbox == nil || num(inbox["total"]) != total || num(inbox["unread"]) != unseen {
		t.Errorf("INBOX: gateway %v, server total %d unread %d", inbox, total, unseen)
	}
}

func (m *matrix) listEmails(t *testing.T) {
	res := m.call(t, m.me, "imap_list_emails", map[string]any{"limit": 20})
	d := m.srv.dial(t)
	all := searchUIDs(t, d, "INBOX", &imap.SearchCriteria{})
	want := all[max(0, len(all)-20):]
	if got := uidsOf(res["messages"]); !slices.Equal(got, want) {
		t.Errorf("newest 20: gateway %v, server %v", got, want)
	}
	for _, x := range list(res["messages"]) {
		x := obj(x)
		if imap.UID(num(x["uid"])) == m.uids["one"] && str(x["subject"]) != "Interop one" {
			t.Errorf("subject of %d: %q", m.uids["one"], x["subject"])
		}
	}
}

func (m *matrix) search(t *testing.T) {
	res := m.call(t, m.me, "imap_search_emails", map[string]any{"subject": "Interop"})
	want := searchUIDs(t, m.srv.dial(t), "INBOX", &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "Interop"}}})
	if got := uidsOf(res["messages"]); !slices.Equal(got, want) || len(want) != 3 {
		t.Errorf("subject Interop: gateway %v, server %v", got, want)
	}
}

func (m *matrix) read(t *testing.T) {
	res := m.call(t, m.me, "imap_read_email", map[string]any{"uid": m.uids["one"]})
	if str(res["message_id"]) != "interop-1@example.org" || !strings.Contains(str(res["text"]), "first message body") {
		t.Errorf("read: message_id %q text %q", res["message_id"], res["text"])
	}
	if f := flagsOfUID(t, m.srv.dial(t), "INBOX", m.uids["one"]); slices.Contains(f, `\seen`) {
		t.Errorf("reading set \\Seen: %v", f)
	}
}

func (m *matrix) thread(t *testing.T) {
	res := m.call(t, m.me, "imap_get_thread", map[string]any{"uid": m.uids["two"]})
	var got []imap.UID
	for _, x := range list(res["messages"]) {
		if str(obj(x)["folder"]) == "INBOX" {
			got = append(got, imap.UID(num(obj(x)["uid"])))
		}
	}
	slices.Sort(got)
	want := []imap.UID{m.uids["one"], m.uids["two"]}
	if !slices.Equal(got, want) {
		t.Errorf("thread: gateway %v (%v), want %v", got, res["messages"], want)
	}
}

func (m *matrix) attachment(t *testing.T) {
	rd := m.call(t, m.me, "imap_read_email", map[string]any{"uid": m.uids["two"]})
	atts := list(rd["attachments"])
	if len(atts) != 1 {
		t.Fatalf("attachments: %v", atts)
	}
	res := m.call(t, m.me, "imap_get_attachment", map[string]any{"uid": m.uids["two"], "part_id": str(obj(atts[0])["part_id"])})
	sum := sha256.Sum256(m.attached)
	if str(res["sha256"]) != hex.EncodeToString(sum[:]) || str(res["filename"]) != "note.txt" {
		t.Errorf("attachment: %v", res)
	}
}

func (m *matrix) peek(t *testing.T) {
	res := m.call(t, m.me, "imap_peek_inbox", nil)
	total, unseen := status(t, m.srv.dial(t), "INBOX")
	if num(res["total"]) != total || num(res["unread"]) != unseen {
		t.Errorf("peek: gateway total %v unread %v, server %d %d", res["total"], res["unread"], total, unseen)
	}
}

func (m *matrix) wait(t *testing.T) {
	d := m.srv.dial(t)
	before := searchUIDs(t, d, "INBOX", &imap.SearchCriteria{})
	since := before[len(before)-1]
	type result struct {
		out map[string]any
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		res, err := mailtest.CallErr(m.me, "imap_wait_for_email", map[string]any{"since_uid": since, "timeout_s": 30})
		r := result{err: err, at: time.Now()}
		if err == nil && !res.IsError {
			err = mailtest.DecodeErr(res, &r.out)
			r.err = err
		} else if err == nil {
			r.err = fmt.Errorf("tool error: %s", mailtest.Text(res))
		}
		done <- r
	}()
	time.Sleep(time.Second) // the wait is in IDLE by now
	raw := "From: Fay <fay@example.org>\r\nTo: " + m.srv.user + "\r\nSubject: Interop four\r\nMessage-ID: <interop-4@example.org>\r\n\r\nfourth\r\n"
	sent := time.Now()
	m.uids["four"] = appendUID(t, m.srv.dial(t), "INBOX", []byte(raw), nil, time.Time{})
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	took := r.at.Sub(sent)
	if got := uidsOf(r.out["messages"]); !slices.Equal(got, []imap.UID{m.uids["four"]}) {
		t.Fatalf("wait returned %v (timed_out %v) %.1fs after the delivery, want [%d]", got, r.out["timed_out"], took.Seconds(), m.uids["four"])
	}
	if took > interopRecheck+2*time.Second {
		t.Errorf("the wait woke %.1fs after the delivery, WAIT_RECHECK is %v", took.Seconds(), interopRecheck)
	}
}

func (m *matrix) check(t *testing.T) {
	res := m.call(t, m.me, "imap_check_inbox", map[string]any{"tag": "review"})
	if got := uidsOf(res["messages"]); !slices.Equal(got, []imap.UID{m.uids["three"]}) {
		t.Errorf("check_inbox returned %v, want [%d]", got, m.uids["three"])
	} else {
		// Read before its claim, with the claim's flags added: what a
		// read returns afterwards.
		read := m.call(t, m.me, "imap_read_email", map[string]any{"uid": m.uids["three"], "max_chars": 20000})
		delete(read, "untrusted") // the read tool's note on the whole answer
		got, _ := json.Marshal(res["messages"].([]any)[0])
		want, _ := json.Marshal(read)
		if string(got) != string(want) {
			t.Errorf("check_inbox returned\n%s\nthe read afterwards\n%s", got, want)
		}
	}
	d := m.srv.dial(t)
	seen := searchUIDs(t, d, "INBOX", &imap.SearchCriteria{Flag: []imap.Flag{imap.FlagSeen}})
	if !slices.Contains(seen, m.uids["three"]) {
		t.Errorf("the message returned is not \\Seen")
	}
	for _, k := range []string{"one", "two", "four"} {
		if slices.Contains(seen, m.uids[k]) {
			t.Errorf("message %s (%d) is \\Seen without being returned", k, m.uids[k])
		}
	}
}

func (m *matrix) setFlags(t *testing.T) {
	m.call(t, m.me, "imap_set_flags", map[string]any{"uids": []any{m.uids["one"]}, "add": []any{"flagged", "$Interop"}})
	f := flagsOfUID(t, m.srv.dial(t), "INBOX", m.uids["one"])
	if !slices.Contains(f, `\flagged`) || !slices.Contains(f, "$interop") {
		t.Errorf("flags on the server: %v", f)
	}
}

const interopFolder = "Interop Ü & Co"

func (m *matrix) createFolder(t *testing.T) {
	res := m.call(t, m.me, "imap_create_folder", map[string]any{"name": interopFolder})
	want := m.full(interopFolder)
	if str(res["folder"]) != want {
		t.Errorf("created %q, want %q", res["folder"], want)
	}
	if !slices.Contains(folderNames(t, m.srv.dial(t)), want) {
		t.Errorf("the server has no folder %q", want)
	}
}

func (m *matrix) renameFolder(t *testing.T) {
	res := m.call(t, m.me, "imap_rename_folder", map[string]any{"folder": m.full(interopFolder), "new_name": "Interop Renamed"})
	want := m.full("Interop Renamed")
	if str(res["folder"]) != want {
		t.Errorf("renamed to %q, want %q", res["folder"], want)
	}
	names := folderNames(t, m.srv.dial(t))
	if !slices.Contains(names, want) || slices.Contains(names, m.full(interopFolder)) {
		t.Errorf("folders on the server after the rename: %q", names)
	}
}

func (m *matrix) move(t *testing.T) {
	to := m.full("Interop Renamed")
	m.call(t, m.me, "imap_move_emails", map[string]any{"uids": []any{m.uids["one"]}, "to_folder": to})
	d := m.srv.dial(t)
	id := &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: "interop-1@example.org"}}}
	if n := len(searchUIDs(t, d, to, id)); n != 1 {
		t.Errorf("%d copies in %s", n, to)
	}
	if n := len(searchUIDs(t, d, "INBOX", id)); n != 0 {
		t.Errorf("%d copies left in INBOX", n)
	}
}

func (m *matrix) trash(t *testing.T) {
	res := m.call(t, m.me, "imap_trash_emails", map[string]any{"uids": []any{m.uids["two"]}})
	trash := str(res["trash_folder"])
	m.trashFolder = trash
	d := m.srv.dial(t)
	if !slices.Contains(folderNames(t, d), trash) {
		t.Fatalf("trash folder %q is not on the server", trash)
	}
	id := &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: "interop-2@example.org"}}}
	if n := len(searchUIDs(t, d, trash, id)); n != 1 {
		t.Errorf("%d copies in %s", n, trash)
	}
	if n := len(searchUIDs(t, d, "INBOX", id)); n != 0 {
		t.Errorf("%d copies left in INBOX", n)
	}
}

func (m *matrix) deleteFolder(t *testing.T) {
	m.call(t, m.me, "imap_delete_folder", map[string]any{"folder": m.full("Interop Renamed")})
	if slices.Contains(folderNames(t, m.srv.dial(t)), m.full("Interop Renamed")) {
		t.Errorf("the folder is still there")
	}
}

func (m *matrix) saveDraft(t *testing.T) {
	res := m.call(t, m.me, "imap_save_draft", map[string]any{"from": "Interop <interop@example.org>", "to": []any{"gus@example.org"}, "subject": "Interop draft", "text": "draft body"})
	folder := str(res["folder"])
	d := m.srv.dial(t)
	uids := searchUIDs(t, d, folder, &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "Interop draft"}}})
	if len(uids) != 1 {
		t.Fatalf("%d drafts in %q", len(uids), folder)
	}
	if f := flagsOfUID(t, d, folder, uids[0]); !slices.Contains(f, `\draft`) {
		t.Errorf("the draft's flags: %v", f)
	}
	// The folders made on first need show their roles, with SPECIAL-USE
	// or (Courier) from their names.
	roles := map[string]string{}
	for _, f := range list(m.call(t, m.me, "imap_list_folders", nil)["folders"]) {
		roles[str(obj(f)["name"])] = str(obj(f)["role"])
	}
	if roles[folder] != "drafts" || roles[m.trashFolder] != "trash" {
		t.Errorf("roles: %s %q, %s %q; want drafts and trash", folder, roles[folder], m.trashFolder, roles[m.trashFolder])
	}
}

// errors: a folder that is not there "does not exist" on every server
// (Cyrus and Courier say only NO: the gateway asks LIST), and a refusal
// is reported as one, with the server's words.
func (m *matrix) errors(t *testing.T) {
	res := mailtest.Call(t, m.me, "imap_list_emails", map[string]any{"folder": "Interop Nowhere"})
	if !res.IsError || !strings.Contains(mailtest.Text(res), "does not exist") {
		t.Errorf("a missing folder: %q", mailtest.Text(res))
	}
	if m.prefix == "" {
		return
	}
	// Outside the personal namespace, where this user may create nothing.
	other := "user.bob.Interop"
	if m.srv.name == "courier" {
		other = "shared.Interop"
	}
	res = mailtest.Call(t, m.me, "imap_create_folder", map[string]any{"name": other})
	if txt := mailtest.Text(res); !res.IsError || strings.Contains(txt, "does not exist") || !strings.Contains(txt, "it said:") {
		t.Errorf("a refused create: %q", txt)
	}
	if slices.Contains(folderNames(t, m.srv.dial(t)), other) {
		t.Errorf("%s was created", other)
	}
}

func (m *matrix) encrypt(t *testing.T) {
	res := m.call(t, m.me, "imap_encrypt_credentials", nil)
	anon := mailtest.MCPClient(t, m.g.URL, nil, "")
	peek := m.call(t, anon, "imap_peek_inbox", map[string]any{"credentials": str(res["token"])})
	total, _ := status(t, m.srv.dial(t), "INBOX")
	if num(peek["total"]) != total {
		t.Errorf("with the token: total %v, server %d", peek["total"], total)
	}
}

// delivered checks that every copy an agent tool reports is on the server.
func (m *matrix) delivered(t *testing.T, res map[string]any) {
	t.Helper()
	d := m.srv.dial(t)
	copies := list(res["delivered"])
	if len(copies) == 0 {
		t.Fatalf("no copies: %v", res)
	}
	for _, c := range copies {
		c := obj(c)
		folder := str(c["folder"])
		if !strings.HasPrefix(folder, m.prefix) {
			t.Errorf("folder %q is outside the personal namespace %q", folder, m.prefix)
		}
		uids := searchUIDs(t, d, folder, &imap.SearchCriteria{UID: []imap.UIDSet{imap.UIDSetNum(imap.UID(num(c["uid"])))}})
		if len(uids) != 1 {
			t.Errorf("copy %v is not on the server", c)
		}
	}
}

func (m *matrix) agentSend(t *testing.T) {
	res := m.call(t, m.alpha, "agent_send", map[string]any{"to": []any{"beta"}, "subject": "Interop hello", "text": "hello beta"})
	m.delivered(t, res)
}

func (m *matrix) agentFolder(t *testing.T, name string) string {
	res := m.call(t, m.beta, "agent_list", nil)
	for _, a := range list(res["agents"]) {
		if str(obj(a)["name"]) == name {
			return str(obj(a)["folder"])
		}
	}
	t.Fatalf("agent %s not listed: %v", name, res)
	return ""
}

func (m *matrix) agentList(t *testing.T) {
	res := m.call(t, m.alpha, "agent_list", nil)
	d := m.srv.dial(t)
	found := false
	for _, a := range list(res["agents"]) {
		a := obj(a)
		if str(a["name"]) != "beta" {
			continue
		}
		found = true
		total, unseen := status(t, d, str(a["folder"]))
		if num(a["total"]) != total || num(a["unread"]) != unseen || total == 0 {
			t.Errorf("beta: gateway %v, server total %d unread %d", a, total, unseen)
		}
	}
	if !found {
		t.Errorf("beta is not listed: %v", res)
	}
}

func (m *matrix) agentStatus(t *testing.T) {
	m.call(t, m.alpha, "agent_set_status", map[string]any{"status": "interop: busy"})
	// Read back through the second gateway: the status is on the server.
	res := m.call(t, m.beta2, "agent_list", nil)
	for _, a := range list(res["agents"]) {
		if str(obj(a)["name"]) == "alpha" {
			if str(obj(a)["status"]) != "interop: busy" {
				t.Errorf("alpha's status: %v", a)
			}
			return
		}
	}
	t.Errorf("alpha is not listed: %v", res)
}

func (m *matrix) agentSetState(t *testing.T) {
	res := m.call(t, m.alpha, "agent_set_state", map[string]any{"key": "interop/k", "value": map[string]any{"n": 1}})
	if e := list(res["entries"]); len(e) != 1 {
		t.Errorf("entries: %v", res)
	}
	// On the server: METADATA on the agents' folder, or a message in it.
	d := m.srv.dial(t)
	var where []string
	for _, f := range folderNames(t, d) {
		if !strings.HasPrefix(f, m.full("Agents")) {
			continue
		}
		if d.Caps().Has(imap.CapMetadata) {
			if md, err := d.GetMetadata(f, []string{"/private/vendor/mailbox-mcp/state/interop/k"}, nil).Wait(); err == nil {
				for _, v := range md.Entries {
					if v != nil && bytes.Contains(*v, []byte(`"n":1`)) {
						where = append(where, f+" (METADATA)")
					}
				}
			}
		}
		if uids := searchUIDs(t, d, f, &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "X-Mailbox-State-Key", Value: "interop/k"}}}); len(uids) > 0 {
			where = append(where, f)
		}
	}
	if len(where) == 0 {
		t.Errorf("the value is nowhere on the server")
	}
}

func (m *matrix) agentGetState(t *testing.T) {
	res := m.call(t, m.beta2, "agent_get_state", map[string]any{"key": "interop/k"})
	e := list(res["entries"])
	if len(e) != 1 {
		t.Fatalf("entries: %v", res)
	}
	v, _ := json.Marshal(obj(e[0])["value"])
	if string(v) != `{"n":1}` {
		t.Errorf("value %s", v)
	}
}

func (m *matrix) agentCreateConversation(t *testing.T) {
	res := m.call(t, m.alpha, "agent_create_conversation", map[string]any{"name": "Interop conv", "participants": []any{"beta"}})
	m.delivered(t, res)
	convs.Store(m, str(res["conversation"]))
}

func (m *matrix) conversation(t *testing.T) string {
	c, ok := convs.Load(m)
	if !ok {
		t.Fatal("no conversation was created")
	}
	return c.(string)
}

func (m *matrix) agentListConversations(t *testing.T) {
	id := m.conversation(t)
	res := m.call(t, m.beta, "agent_list_conversations", nil)
	for _, c := range list(res["conversations"]) {
		if str(obj(c)["conversation"]) == id || str(obj(c)["id"]) == id {
			return
		}
	}
	t.Errorf("conversation %s is not listed: %v", id, res)
}

func (m *matrix) agentHistory(t *testing.T) {
	id := m.conversation(t)
	sent := m.call(t, m.beta, "agent_send", map[string]any{"conversation": id, "text": "reply in conv"})
	m.delivered(t, sent)
	res := m.call(t, m.alpha, "agent_history", map[string]any{"conversation": id})
	msgs := list(res["messages"])
	d := m.srv.dial(t)
	want := searchUIDs(t, d, str(res["folder"]), &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "Interop conv"}}})
	if len(msgs) != len(want) || len(msgs) < 2 {
		t.Errorf("history has %d messages, the server %d in %s", len(msgs), len(want), res["folder"])
	}
}

func (m *matrix) agentLeave(t *testing.T) {
	id := m.conversation(t)
	res := m.call(t, m.beta, "agent_leave_conversation", map[string]any{"conversation": id})
	m.delivered(t, res)
	after := m.call(t, m.beta, "agent_list_conversations", nil)
	for _, c := range list(after["conversations"]) {
		if str(obj(c)["conversation"]) == id || str(obj(c)["id"]) == id {
			t.Errorf("still listed after leaving: %v", c)
		}
	}
}

func (m *matrix) agentPrune(t *testing.T) {
	folder := m.agentFolder(t, "beta")
	d := m.srv.dial(t)
	raw := "From: old@example.org\r\nSubject: Interop old\r\nMessage-ID: <interop-old@example.org>\r\n\r\nold\r\n"
	appendUID(t, d, folder, []byte(raw), []imap.Flag{imap.FlagSeen}, time.Now().AddDate(0, 0, -10))
	res := m.call(t, m.beta, "agent_prune", map[string]any{"older_than_days": 5})
	if num(res["moved"]) < 1 {
		t.Fatalf("pruned nothing: %v", res)
	}
	id := &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: "interop-old@example.org"}}}
	d = m.srv.dial(t)
	if n := len(searchUIDs(t, d, folder, id)); n != 0 {
		t.Errorf("%d copies left in %s", n, folder)
	}
	if n := len(searchUIDs(t, d, str(res["trash_folder"]), id)); n != 1 {
		t.Errorf("%d copies in %s", n, res["trash_folder"])
	}
}
