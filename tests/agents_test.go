package tests

// Agents of one mailbox messaging each other through the gateway against
// Dovecot, with no SMTP server configured: delivery by APPEND into
// Agents/NAME, the waiter's wake-up, the directory's counts against
// STATUS, a broadcast, a three-agent conversation with leave and history,
// refusals that change nothing, the messages' format (go-message, doveadm),
// and the same through the official TypeScript SDK.

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message/mail"
	"github.com/mark3labs/mcp-go/client"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

const agentsUser = "agents@example.test"

func agentHeaders(s *mailtest.Stack, name string) map[string]string {
	h := userHeaders(s, agentsUser)
	h["x-mailbox-agent"] = name
	return h
}

// agentCounts is messages and unread of every folder under Agents, by
// STATUS from a bare client.
func agentCounts(t *testing.T, d *imapclient.Client) map[string][2]uint32 {
	t.Helper()
	out := map[string][2]uint32{}
	list, err := d.List("", "Agents/*", nil).Collect()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list {
		sd, err := d.Status(l.Mailbox, &imap.StatusOptions{NumMessages: true, NumUnseen: true}).Wait()
		if err != nil {
			t.Fatal(err)
		}
		out[l.Mailbox] = [2]uint32{*sd.NumMessages, *sd.NumUnseen}
	}
	return out
}

type agentSent struct {
	MessageID    string `json:"message_id"`
	Conversation string `json:"conversation"`
	Delivered    []struct {
		Agent, Folder string
		UID           uint32
		Created, Own  bool
	} `json:"delivered"`
}

func agentCall(t *testing.T, c *client.Client, name string, args map[string]any, out any) {
	t.Helper()
	res := mailtest.Call(t, c, name, args)
	mailtest.Decode(t, res, out)
}

func TestAgentsMessaging(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{agentsUser: "agents-pw-1"}})
	g := startGateway(t, s) // no SMTP_HOST: delivery is APPEND only
	d := direct(t, s, agentsUser)
	backend := mailtest.MCPClient(t, g.URL, agentHeaders(s, "backend"), "")
	frontend := mailtest.MCPClient(t, g.URL, agentHeaders(s, "frontend"), "")
	db := mailtest.MCPClient(t, g.URL, agentHeaders(s, "db"), "")

	// The first message creates the recipient's folder.
	var first agentSent
	agentCall(t, backend, "agent_send", map[string]any{"to": []any{"frontend"}, "subject": "hello", "text": "first", "tags": []any{"api"}}, &first)
	if len(first.Delivered) != 1 || first.Delivered[0].Folder != "Agents/frontend" || !first.Delivered[0].Created {
		t.Fatalf("first send: %+v", first)
	}

	// The waiter wakes: through IDLE (Dovecot tells 0.5 s after delivery)
	// and with WAIT_POLL_INTERVAL=100ms; the second gateway also allows
	// organize, for agent_prune.
	g2 := startGateway(t, s, "WAIT_POLL_INTERVAL=100ms", "MAILBOX_ACCESS=organize")
	for _, gw := range []struct {
		name string
		url  string
	}{{"idle", g.URL}, {"poll 100ms", g2.URL}} {
		t.Run("wait wakes/"+gw.name, func(t *testing.T) {
			waiter := mailtest.MCPClient(t, gw.url, agentHeaders(s, "frontend"), "")
			type waited struct {
				Messages []struct{ Subject string } `json:"messages"`
				TimedOut bool                       `json:"timed_out"`
			}
			done := make(chan waited, 1)
			var woke time.Time
			go func() {
				var w waited
				res, err := mailtest.CallErr(waiter, "imap_wait_for_email", map[string]any{"folder": "Agents/frontend", "timeout_s": 20})
				woke = time.Now()
				if err == nil {
					mailtest.DecodeErr(res, &w)
				}
				done <- w
			}()
			time.Sleep(700 * time.Millisecond) // the wait is in IDLE
			start := time.Now()
			var sent agentSent
			agentCall(t, backend, "agent_send", map[string]any{"to": []any{"frontend"}, "subject": "wake up", "text": "the API is ready"}, &sent)
			appended := time.Now()
			w := <-done
			if w.TimedOut || len(w.Messages) != 1 || w.Messages[0].Subject != "wake up" {
				t.Fatalf("wait: %+v", w)
			}
			t.Logf("wake-up (%s): %v from the agent_send call (which took %v), %v after it returned", gw.name,
				woke.Sub(start).Round(time.Millisecond), appended.Sub(start).Round(time.Millisecond), woke.Sub(appended).Round(time.Millisecond))
			if woke.Sub(start) > 2*time.Second {
				t.Errorf("woke after %v", woke.Sub(start))
			}
		})
	}

	t.Run("directory", func(t *testing.T) {
		agentCall(t, frontend, "agent_send", map[string]any{"to": []any{"backend", "db"}, "text": "hi both"}, &agentSent{})
		var list struct {
			Agents []struct {
				Name          string
				Unread, Total uint32
				LastActivity  *time.Time `json:"last_activity"`
				UnreadFromYou *int       `json:"unread_from_you"`
			} `json:"agents"`
		}
		agentCall(t, backend, "agent_list", map[string]any{}, &list)
		want := agentCounts(t, d)
		if len(list.Agents) != 3 {
			t.Fatalf("agents: %+v", list.Agents)
		}
		for _, a := range list.Agents {
			c := want["Agents/"+a.Name]
			if a.Total != c[0] || a.Unread != c[1] || a.LastActivity == nil || a.UnreadFromYou == nil {
				t.Errorf("%s: %+v, STATUS says %v", a.Name, a, c)
			}
			fromMe := map[string]int{"frontend": 3, "backend": 0, "db": 0}[a.Name] // first and two wake-ups
			if *a.UnreadFromYou != fromMe {
				t.Errorf("%s: unread_from_you %d, want %d", a.Name, *a.UnreadFromYou, fromMe)
			}
		}
	})

	t.Run("broadcast", func(t *testing.T) {
		before := agentCounts(t, d)
		var sent agentSent
		agentCall(t, db, "agent_send", map[string]any{"to": []any{"*"}, "subject": "all hands", "text": "standup"}, &sent)
		after := agentCounts(t, d)
		for f, c := range after {
			want := before[f][0] + 1
			if f == "Agents/db" {
				want = before[f][0]
			}
			if c[0] != want {
				t.Errorf("%s: %d messages, want %d", f, c[0], want)
			}
		}
		if len(sent.Delivered) != 2 {
			t.Errorf("delivered %+v", sent.Delivered)
		}
	})

	t.Run("conversation", func(t *testing.T) {
		var conv agentSent
		agentCall(t, backend, "agent_create_conversation", map[string]any{"name": "Release 1.4", "participants": []any{"frontend", "db"}}, &conv)
		id := conv.Conversation
		agentCall(t, frontend, "agent_send", map[string]any{"conversation": id, "text": "UI done"}, &agentSent{})
		agentCall(t, db, "agent_leave_conversation", map[string]any{"conversation": id}, &agentSent{})
		dbBefore := agentCounts(t, d)["Agents/db"]
		var last agentSent
		agentCall(t, backend, "agent_send", map[string]any{"conversation": id, "text": "shipping now"}, &last)
		if got := agentCounts(t, d)["Agents/db"]; got != dbBefore || len(last.Delivered) != 2 {
			t.Fatalf("after leaving, db has %v (was %v); delivered %+v", got, dbBefore, last.Delivered)
		}
		var h struct {
			Participants []string `json:"participants"`
			Messages     []struct {
				From, Text, Left string
			} `json:"messages"`
		}
		agentCall(t, frontend, "agent_history", map[string]any{"conversation": id}, &h)
		var from []string
		for _, m := range h.Messages {
			from = append(from, m.From)
		}
		if !slices.Equal(from, []string{"backend", "frontend", "db", "backend"}) || h.Messages[2].Left != "db" ||
			!strings.Contains(h.Messages[3].Text, "shipping now") || !slices.Equal(h.Participants, []string{"backend", "frontend"}) {
			t.Fatalf("history: %+v", h)
		}
		var convs struct {
			Conversations []struct{ ID string } `json:"conversations"`
		}
		agentCall(t, db, "agent_list_conversations", map[string]any{}, &convs)
		if len(convs.Conversations) != 0 {
			t.Errorf("db still lists %+v", convs)
		}
		agentCall(t, frontend, "agent_list_conversations", map[string]any{}, &convs)
		if len(convs.Conversations) != 1 || convs.Conversations[0].ID != id {
			t.Errorf("frontend lists %+v", convs)
		}
		// One thread: the last message refers to the first.
		raws := folderRaws(t, d, "Agents/frontend")
		mr, err := mail.CreateReader(bytes.NewReader(raws[len(raws)-1]))
		if err != nil {
			t.Fatal(err)
		}
		refs, _ := mr.Header.MsgIDList("References")
		irt, _ := mr.Header.MsgIDList("In-Reply-To")
		if len(refs) == 0 || refs[0] != conv.MessageID || len(irt) != 1 || mr.Header.Get("X-Mailbox-Conversation") != id {
			t.Errorf("threading: refs %v in-reply-to %v", refs, irt)
		}
	})

	t.Run("refusals change nothing", func(t *testing.T) {
		before := agentCounts(t, d)
		long := strings.Repeat("x", 3000)
		for _, args := range []map[string]any{
			{"to": []any{"Bad Name"}, "text": "x"},
			{"to": []any{"frontend", long}, "text": "x"},
			{"to": []any{"frontend", ".state"}, "text": "x"},
			{"to": []any{"frontend"}, "text": "x", "tags": []any{"NOT A TAG"}},
			{"to": []any{"*", "frontend"}, "text": "x"},
			{"conversation": "conv-unknown", "text": "x"},
		} {
			res, err := mailtest.CallErr(backend, "agent_send", args)
			if err != nil || !res.IsError {
				t.Errorf("%v: not refused", args["to"])
				continue
			}
			if strings.Contains(mailtest.Text(res), long) {
				t.Errorf("the sentence echoes the long name")
			}
		}
		nameless := mailtest.MCPClient(t, g.URL, userHeaders(s, agentsUser), "")
		res, _ := mailtest.CallErr(nameless, "agent_send", map[string]any{"to": []any{"frontend"}, "text": "x"})
		if res == nil || !res.IsError || !strings.Contains(mailtest.Text(res), "x-mailbox-agent") {
			t.Errorf("without a name: %v", res)
		}
		if after := agentCounts(t, d); !maps.Equal(before, after) {
			t.Fatalf("before %v, after %v", before, after)
		}
	})

	t.Run("format", func(t *testing.T) {
		n, err := s.MessageCount(agentsUser, "Agents/frontend")
		if err != nil || n != int(agentCounts(t, d)["Agents/frontend"][0]) {
			t.Fatalf("doveadm: %d %v", n, err)
		}
		raw := folderRaws(t, d, "Agents/frontend")[0]
		mr, err := mail.CreateReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		h := mr.Header
		from, _ := h.AddressList("From")
		to, _ := h.AddressList("To")
		id, _ := h.MessageID()
		date, derr := h.Date()
		if len(from) != 1 || from[0].Name != "backend" || from[0].Address != agentsUser || len(to) != 1 || to[0].Name != "frontend" ||
			id != first.MessageID || derr != nil || time.Since(date) > time.Hour ||
			h.Get("X-Mailbox-Agent-From") != "backend" || h.Get("X-Mailbox-Agent-To") != "frontend" || h.Get("X-Mailbox-Tags") != "api" {
			t.Fatalf("header: %v", h.Map())
		}
		p, err := mr.NextPart()
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		body.ReadFrom(p.Body)
		if strings.TrimSpace(body.String()) != "first" {
			t.Fatalf("body %q", body.String())
		}
	})

	t.Run("prune", func(t *testing.T) {
		before := agentCounts(t, d)
		pruner := mailtest.MCPClient(t, g2.URL, agentHeaders(s, "frontend"), "")
		var p struct {
			Moved   int `json:"moved"`
			Folders []struct{ Agent string }
		}
		agentCall(t, pruner, "agent_prune", map[string]any{"older_than_days": 1}, &p)
		if p.Moved != 0 || len(p.Folders) != 1 || p.Folders[0].Agent != "frontend" || !maps.Equal(before, agentCounts(t, d)) {
			t.Fatalf("prune of new mail: %+v", p)
		}
		res, _ := mailtest.CallErr(backend, "agent_prune", map[string]any{})
		if res == nil || !res.IsError || !strings.Contains(mailtest.Text(res), "organize") {
			t.Errorf("agent_prune at the read level: %v", res)
		}
	})

	t.Run("typescript sdk", func(t *testing.T) {
		tools, results := sdkCalls(t, g.URL, agentHeaders(s, "sdk"), true,
			sdkCall{Name: "agent_send", Arguments: map[string]any{"to": []any{"frontend"}, "text": "from the SDK"}},
			sdkCall{Name: "agent_list", Arguments: map[string]any{}})
		for _, want := range []string{"agent_send", "agent_list", "agent_create_conversation", "agent_list_conversations", "agent_leave_conversation", "agent_history"} {
			if !slices.Contains(tools, want) {
				t.Errorf("tools/list lacks %s", want)
			}
		}
		if slices.Contains(tools, "agent_prune") {
			t.Errorf("agent_prune is listed at the read level")
		}
		for _, r := range results {
			if r.IsError {
				t.Fatalf("sdk call failed: %s", r.Text)
			}
		}
		var list struct {
			Agents []struct{ Name string } `json:"agents"`
			You    string                  `json:"you"`
		}
		// sdk has only sent, but its call was recorded (last activity),
		// which gave it a folder: the directory lists it too.
		if err := json.Unmarshal(results[1].Structured, &list); err != nil || list.You != "sdk" || len(list.Agents) != 4 ||
			!slices.ContainsFunc(list.Agents, func(a struct{ Name string }) bool { return a.Name == "sdk" }) {
			t.Fatalf("sdk agent_list: %s %v", results[1].Structured, err)
		}

		// State and status between two SDK clients, and the frontend
		// taking the SDK's message from its own folder.
		_, results = sdkCalls(t, g.URL, agentHeaders(s, "sdk"), false,
			sdkCall{Name: "agent_set_state", Arguments: map[string]any{"key": "sdk/plan", "value": []any{"build", "test", "ship"}}},
			sdkCall{Name: "agent_set_status", Arguments: map[string]any{"status": "planning from the SDK"}})
		for _, r := range results {
			r.ok(t, "sdk state/status", nil)
		}
		_, results = sdkCalls(t, g.URL, agentHeaders(s, "frontend"), false,
			sdkCall{Name: "agent_get_state", Arguments: map[string]any{"prefix": "sdk/"}},
			sdkCall{Name: "agent_list", Arguments: map[string]any{}},
			sdkCall{Name: "imap_check_inbox", Arguments: map[string]any{"from": "sdk"}})
		var got struct {
			Entries []struct {
				Key   string `json:"key"`
				Value []any  `json:"value"`
				By    string `json:"by"`
			} `json:"entries"`
		}
		results[0].ok(t, "agent_get_state", &got)
		if len(got.Entries) != 1 || got.Entries[0].Key != "sdk/plan" || len(got.Entries[0].Value) != 3 || got.Entries[0].By != "sdk" {
			t.Errorf("frontend reads sdk's state: %+v", got)
		}
		var dir struct {
			Agents []struct{ Name, Status string } `json:"agents"`
		}
		results[1].ok(t, "agent_list", &dir)
		if !slices.ContainsFunc(dir.Agents, func(a struct{ Name, Status string }) bool {
			return a.Name == "sdk" && a.Status == "planning from the SDK"
		}) {
			t.Errorf("frontend's directory does not show sdk's status: %+v", dir.Agents)
		}
		results[2].ok(t, "imap_check_inbox", nil)
		if !strings.Contains(results[2].Text, "from the SDK") {
			t.Errorf("frontend's check (its own folder, no folder argument) did not take the SDK's message: %s", results[2].Text)
		}
	})
}

// folderRaws are the messages of folder, oldest first, read without
// changing them.
func folderRaws(t *testing.T, d *imapclient.Client, folder string) [][]byte {
	t.Helper()
	sec := &imap.FetchItemBodySection{Peek: true}
	var out [][]byte
	for _, b := range fetchAll(t, d, folder, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{sec}}) {
		out = append(out, b.FindBodySection(sec))
	}
	return out
}
