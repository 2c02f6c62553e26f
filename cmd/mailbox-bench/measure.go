package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mcpcall"
)

const (
	toolList    = "imap_list_emails"
	toolSearch  = "imap_search_emails"
	toolRead    = "imap_read_email"
	toolFolders = "imap_list_folders"
	toolSend    = "smtp_send_email"
	toolFloor   = "floor: no mail work"
	sink        = "sink@elsewhere.test" // Postfix accepts and discards other domains
)

var readTools = []string{toolList, toolSearch, toolRead, toolFolders}

// pickTargets finds, in user's INBOX, a typical message to read (single-part
// text of about 2 KB, among the newest) and the sender of the newest message
// to search for.
func (b *bench) pickTargets(user string) error {
	d, err := openDirect(b.stack.IMAPSAddr(), b.stack.TLSConfig(), user, b.stack.Users[user])
	if err != nil {
		return fmt.Errorf("direct login as %s: %w", user, err)
	}
	defer d.close()
	res, err := d.c.UIDSearch(&imap.SearchCriteria{Larger: 1800, Smaller: 2600}, nil).Wait()
	if err != nil {
		return err
	}
	uids := res.AllUIDs()
	slices.Reverse(uids)
	for _, uid := range uids[:min(len(uids), 50)] {
		bufs, err := d.c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodyStructure: &imap.FetchItemBodyStructure{}}).Collect()
		if err != nil {
			return err
		}
		if len(bufs) == 1 {
			if sp, ok := bufs[0].BodyStructure.(*imap.BodyStructureSinglePart); ok && sp.MediaType() == "text/plain" {
				b.typical[user] = uint32(uid)
				break
			}
		}
	}
	if b.typical[user] == 0 {
		return fmt.Errorf("no single-part ~2 KB text message in %s's INBOX", user)
	}
	bufs, err := d.c.Fetch(imap.SeqSetNum(d.n), &imap.FetchOptions{Envelope: true}).Collect()
	if err != nil {
		return err
	}
	if len(bufs) != 1 || bufs[0].Envelope == nil || len(bufs[0].Envelope.From) == 0 {
		return fmt.Errorf("no sender on the newest message of %s", user)
	}
	b.sender[user] = bufs[0].Envelope.From[0].Addr()
	return nil
}

// gwOp is one call of tool through c, checked.
func (b *bench) gwOp(tool string, c caller, user string, size int, send map[string]any) func() error {
	switch tool {
	case toolList:
		return func() error {
			p, err := c(tool, map[string]any{})
			if err != nil {
				return err
			}
			if got, total := len(list(p, "messages")), num(p, "total"); got != min(20, size) || total < size {
				return fmt.Errorf("list: %d messages of %d, want 20 of %d", got, total, size)
			}
			return nil
		}
	case toolSearch:
		from := b.sender[user]
		return func() error {
			p, err := c(tool, map[string]any{"from": from})
			if err != nil {
				return err
			}
			if num(p, "matched") == 0 || len(list(p, "messages")) == 0 {
				return fmt.Errorf("search from %s: no match", from)
			}
			return nil
		}
	case toolRead:
		uid := b.typical[user]
		return func() error {
			m, err := c(tool, map[string]any{"uid": uid})
			if err != nil {
				return err
			}
			if text, _ := m["text"].(string); num(m, "uid") != int(uid) || text == "" {
				return fmt.Errorf("read: uid %d, %d chars of text", num(m, "uid"), len(text))
			}
			return nil
		}
	case toolFolders:
		return func() error {
			f, err := c(tool, map[string]any{})
			if err != nil {
				return err
			}
			for _, x := range list(f, "folders") {
				if x, _ := x.(map[string]any); x != nil && x["name"] == "INBOX" {
					return nil
				}
			}
			return errors.New("folders: no INBOX")
		}
	case toolSend:
		return func() error { _, err := c(tool, send); return err }
	}
	return func() error { return fmt.Errorf("the bench has no call for tool %s", tool) }
}

// floorOp is an MCP call that does no mail work: an unknown tool, which
// mcp-go answers with an error.
func floorOp(c *client.Client) func() error {
	return func() error {
		_, err := mcpcall.CallErr(c, "bench_no_such_tool", map[string]any{})
		if err == nil || !strings.Contains(err.Error(), "not found") {
			return fmt.Errorf("unknown tool: %v", err)
		}
		return nil
	}
}

// sideProfile marks a failed per-tool pass in the report's cells, so that
// it fails the run at the end like any failed cell.
const sideProfile = "cpu pass"

// cpuPass measures the gateway's CPU per call of each tool (and the floor)
// with calls back to back: the bench calls that tool alone, one call at a
// time, for a fixed window on the first size's user, and reads the
// gateway's CPU from /proc over the window. Unlike a concurrency-1 cell,
// where the gateway idles while the direct side's call runs and its
// background work (the runtime's sysmon, timers) is charged to its calls
// in proportion to that idle time, the window holds little but the calls:
// the regression guard reads this figure. With -profile the gateway also
// writes a CPU and a delta allocs profile of each window, which
// breakdown.go shares out among the libraries. smtp_send_email is left
// out: it waits on Postfix.
func (b *bench) cpuPass(ctx context.Context, gw *gateway, tools []string) error {
	secs := 6
	if b.o.smoke {
		secs = 4 // the guard reads it: long enough for thousands of floor calls
	}
	n := b.o.sizes[0]
	user := b.sizeUser[n]
	c, err := mcpClient(gw.url, user, b.stack.Users[user])
	if err != nil {
		return err
	}
	defer c.Close()
	for _, tool := range append([]string{toolFloor}, tools...) {
		if tool == toolSend {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		op, file := b.gwOp(tool, viaMCP(c), user, n, nil), tool
		if tool == toolFloor {
			op, file = floorOp(c), "floor"
		}
		var prof *profilePaths
		if b.o.profileDir != "" {
			prof = &profilePaths{cpu: filepath.Join(b.o.profileDir, "cpu-"+file+".pprof"), allocs: filepath.Join(b.o.profileDir, "allocs-"+file+".pprof")}
		}
		logf("%s back to back for %d s", tool, secs)
		t, err := measureBackToBack(gw, op, prof, secs)
		if err != nil {
			b.rep.add(tool, n, 1, sideProfile, &result{Calls: 1, Errors: 1, Err: err})
			continue
		}
		t.tool = tool
		b.rep.callCPU = append(b.rep.callCPU, t)
		if t.bd != nil {
			logf("  %d calls, %.3f ms CPU per call in the profile, %.3f from /proc", t.calls,
				float64(t.bd.total)/float64(t.calls)/1e6, float64(t.procCPU)/float64(t.calls)/1e6)
		} else {
			logf("  %d calls, %.3f ms CPU per call from /proc", t.calls, float64(t.procCPU)/float64(t.calls)/1e6)
		}
	}
	return nil
}

// profilePaths are where the gateway's profiles of one window go.
type profilePaths struct{ cpu, allocs string }

// measureBackToBack calls op in a loop for secs seconds and measures the
// gateway's CPU over the window; with prof, the gateway also writes its
// CPU profile and the allocations of the same window (a delta allocs
// profile) there, and both are read back.
func measureBackToBack(gw *gateway, op func() error, prof *profilePaths, secs int) (toolCPU, error) {
	for range 5 { // warm up, as the cells do
		if err := op(); err != nil {
			return toolCPU{}, err
		}
	}
	done, allocsDone := make(chan error, 1), make(chan error, 1)
	t0, cpu0 := time.Now(), gw.cpu()
	if prof != nil {
		go func() { done <- gw.fetchProfile(fmt.Sprintf("profile?seconds=%d", secs), prof.cpu) }()
		go func() { allocsDone <- gw.fetchProfile(fmt.Sprintf("allocs?seconds=%d", secs), prof.allocs) }()
	}
	// The profile starts a moment after t0 and ends a moment after the
	// last call: off by one call in thousands.
	t := toolCPU{windowSecs: float64(secs)}
	var callErr error
	for time.Since(t0) < time.Duration(secs)*time.Second {
		if callErr = op(); callErr != nil {
			break
		}
		t.calls++
	}
	t.procCPU = gw.cpu() - cpu0
	if prof != nil {
		if err := <-done; err != nil {
			return t, fmt.Errorf("cpu profile: %w", err)
		}
		if err := <-allocsDone; err != nil {
			return t, fmt.Errorf("allocs profile: %w", err)
		}
	}
	if callErr != nil {
		return t, callErr
	}
	if t.calls == 0 {
		return t, errors.New("no call completed in the window")
	}
	if prof == nil {
		return t, nil
	}
	var err error
	if t.bd, err = readBreakdown(prof.cpu, sampleCPU); err != nil {
		return t, err
	}
	t.allocs, err = readBreakdown(prof.allocs, sampleAlloc)
	return t, err
}

// directOp is the same IMAP commands on a warm connection.
func (b *bench) directOp(tool string, d *direct, user string) func() error {
	switch tool {
	case toolList:
		return d.list
	case toolSearch:
		from := b.sender[user]
		return func() error { return d.search(from) }
	case toolRead:
		uid := imap.UID(b.typical[user])
		return func() error { return d.read(uid) }
	case toolFolders:
		return d.folders
	case toolSend:
		return func() error { return b.directSend(user, d) }
	}
	return func() error { return fmt.Errorf("the bench has no call for tool %s", tool) }
}

// coldOp is a direct call on a fresh connection: TLS, LOGIN, EXAMINE, the
// commands, LOGOUT.
func (b *bench) coldOp(tool, user string) func() error {
	return func() error {
		d, err := openDirect(b.stack.IMAPSAddr(), b.stack.TLSConfig(), user, b.stack.Users[user])
		if err != nil {
			return err
		}
		defer d.close()
		return b.directOp(tool, d, user)()
	}
}

var sendBody = strings.Repeat("A short benchmark message, about one kilobyte of plain text.\r\n", 16)

// directSend submits one message with go-smtp and appends a copy to Sent
// on the warm IMAP connection, as the gateway does (directSendVia).
func (b *bench) directSend(user string, d *direct) error {
	return directSendVia(b.stack.SubmissionsAddr(), b.stack.TLSConfig(), user, b.stack.Users[user], d.c)
}

// sendMessage is the message the direct side sends.
func sendMessage(user string) string {
	return "From: <" + user + ">\r\nTo: <" + sink + ">\r\nSubject: bench\r\nDate: " + time.Now().Format(time.RFC1123Z) +
		"\r\nMessage-ID: <" + rand.Text() + "@bench.test>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + sendBody
}

// sendArgs builds smtp_send_email's arguments from its input schema.
func sendArgs(t mcp.Tool) map[string]any {
	args := map[string]any{"subject": "bench"}
	props := t.InputSchema.Properties
	to := any(sink)
	if p, ok := props["to"].(map[string]any); ok && p["type"] == "array" {
		to = []any{sink}
	}
	args["to"] = to
	body := "body"
	if _, ok := props["body"]; !ok {
		if _, ok := props["text"]; ok {
			body = "text"
		}
	}
	args[body] = sendBody
	return args
}

func (b *bench) measure(ctx context.Context) error {
	o := b.o
	gw, err := startGateway(b.bin, b.dir, "gateway", b.stack, b.key, o.profileDir != "", o.gwEnv...)
	if err != nil {
		return err
	}
	defer gw.stop()
	b.rep.rssStart, _ = gw.status("VmRSS")

	first := b.load[0]
	c0, err := mcpClient(gw.url, first, b.stack.Users[first])
	if err != nil {
		return err
	}
	defer c0.Close()
	tl, err := c0.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return err
	}
	var send map[string]any
	for _, t := range tl.Tools {
		if t.Name == toolSend {
			send = sendArgs(t)
		}
	}
	tools := slices.Clone(readTools)
	if send != nil {
		tools = append(tools, toolSend)
	} else {
		b.rep.notes = append(b.rep.notes, toolSend+": not available (the gateway does not list it)")
	}
	if o.only != nil {
		tools = slices.DeleteFunc(tools, func(t string) bool { return !o.only[t] })
	}
	b.rep.tools = tools

	// CPU profiles: one of the first seconds at concurrency 1 (where each
	// call's overhead shows), one of the concurrent runs.
	profSecs := 20
	if o.smoke {
		profSecs = 3
	}
	profile := func(name string) chan error {
		done := make(chan error, 1)
		if o.profileDir == "" {
			done <- nil
			return done
		}
		go func() {
			done <- gw.fetchProfile(fmt.Sprintf("profile?seconds=%d", profSecs), filepath.Join(o.profileDir, name))
		}()
		return done
	}
	profA := profile("cpu-c1.pprof")

	// A: concurrency 1, gateway and direct alternating, per mailbox size.
	for si, n := range o.sizes {
		user := b.sizeUser[n]
		c, err := mcpClient(gw.url, user, b.stack.Users[user])
		if err != nil {
			return err
		}
		d, err := openDirect(b.stack.IMAPSAddr(), b.stack.TLSConfig(), user, b.stack.Users[user])
		if err != nil {
			return err
		}
		if si == 0 {
			// The floor: an MCP call that does no mail work (an unknown
			// tool, answered by mcp-go) against an IMAP NOOP.
			g := floorOp(c)
			x := func() error { return d.c.Noop().Wait() }
			runPair(budget{5, o.cellMax}, g, x)
			logf("c=1 floor (unknown tool / NOOP)")
			cpu0 := gw.cpu()
			rg, rd := runPair(budget{o.n1, o.cellMax}, g, x)
			rg.CPU = gw.cpu() - cpu0
			b.rep.add(toolFloor, n, 1, sideGateway, rg)
			b.rep.add(toolFloor, n, 1, sideDirect, rd)
		}
		for _, tool := range tools {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if tool == toolSend && si > 0 {
				continue // does not depend on the mailbox
			}
			g, x := b.gwOp(tool, viaMCP(c), user, n, send), b.directOp(tool, d, user)
			bud := budget{o.n1, o.cellMax}
			if tool == toolSend {
				bud.n = max(10, o.n1/3)
			}
			runPair(budget{5, o.cellMax}, g, x) // warm up: EXAMINE, caches
			logf("c=1 %s on %d messages", tool, n)
			cpu0 := gw.cpu()
			rg, rd := runPair(bud, g, x)
			rg.CPU = gw.cpu() - cpu0
			b.rep.add(tool, n, 1, sideGateway, rg)
			b.rep.add(tool, n, 1, sideDirect, rd)
		}
		// The same size through the official TypeScript SDK (sdk.go).
		if err := b.measureSDK(ctx, gw, n, d); err != nil {
			return err
		}
		d.close()
		c.Close()
	}

	// The gateway takes one CPU profile at a time: the next waits for profA.
	if err := <-profA; err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	if err := b.cpuPass(ctx, gw, tools); err != nil {
		return err
	}

	if o.c1Only {
		if o.profileDir != "" {
			if err := gw.fetchProfile("allocs", filepath.Join(o.profileDir, "allocs-c1.pprof")); err != nil {
				return err
			}
		}
		return nil
	}

	// B: concurrency 8 and 64 on the load users (64 = 4 callers on each of
	// 16 users); every worker has its own MCP client.
	clients := make([]*client.Client, 64)
	for w := range clients {
		u := b.load[w%len(b.load)]
		if clients[w], err = mcpClient(gw.url, u, b.stack.Users[u]); err != nil {
			return err
		}
		defer clients[w].Close()
	}
	profDone := profile("cpu-concurrent.pprof")
	size := o.sizes[0]
	for _, conc := range []int{8, 64} {
		for _, tool := range tools {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			ops := make([]func() error, conc)
			for w := range ops {
				u := b.load[w%len(b.load)]
				ops[w] = b.gwOp(tool, viaMCP(clients[w]), u, size, send)
			}
			n := o.n8
			if conc == 64 {
				n = o.n64
			}
			if tool == toolSend {
				n = max(conc*2, n/3)
			}
			// Warm up until one round has no error: the pool fills (logins,
			// folder selections) before the measured run. Failures while it
			// fills are reported, not hidden.
			for round := 1; round <= 10; round++ {
				wu := run(conc, budget{conc * 2, o.cellMax}, func(w int) error { return ops[w]() })
				if wu.Errors == 0 {
					break
				}
				b.rep.notes = append(b.rep.notes, fmt.Sprintf("warm-up round %d of %s with %d callers (not counted): %d of %d calls failed, first: %v",
					round, tool, conc, wu.Errors, wu.Calls, wu.Err))
			}
			logf("c=%d %s on %d messages", conc, tool, size)
			cpu0 := gw.cpu()
			r := run(conc, budget{n, o.cellMax}, func(w int) error { return ops[w]() })
			r.CPU = gw.cpu() - cpu0
			b.rep.add(tool, size, conc, sideGateway, r)
		}
		if conc == 64 {
			b.rep.poolConns, _ = gw.imapConns(b.stack.IMAPSPort)
			b.rep.rssPool, _ = gw.status("VmRSS")
			b.rep.hwmPool, _ = gw.status("VmHWM")
		}
	}
	if err := <-profDone; err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	if o.profileDir != "" {
		for _, p := range []string{"heap", "allocs"} {
			if err := gw.fetchProfile(p, filepath.Join(o.profileDir, p+".pprof")); err != nil {
				return err
			}
		}
		logf("profiles in %s", o.profileDir)
	}

	// C: cold calls, on a second gateway whose pool forgets a connection
	// after 1 ms idle (every call dials, logs in and examines), next to
	// direct calls on a fresh connection each time.
	cold, err := startGateway(b.bin, b.dir, "gateway-cold", b.stack, b.key, false, append(slices.Clone(o.gwEnv), "POOL_IDLE_TIMEOUT=1ms")...)
	if err != nil {
		return err
	}
	defer cold.stop()
	for _, n := range o.sizes {
		user := b.sizeUser[n]
		c, err := mcpClient(cold.url, user, b.stack.Users[user])
		if err != nil {
			return err
		}
		for _, tool := range readTools {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			g := b.gwOp(tool, viaMCP(c), user, n, nil)
			logf("cold %s on %d messages", tool, n)
			bud := budget{max(10, o.n1/5), o.cellMax}
			rg, rd := runPairGap(bud, 5*time.Millisecond, g, b.coldOp(tool, user))
			b.rep.add(tool, n, 1, sideGatewayCold, rg)
			b.rep.add(tool, n, 1, sideDirectCold, rd)
		}
		c.Close()
	}

	// D: peak RSS while reading a 25 MB message.
	return b.bigMessages(gw, c0)
}

// bigMessages appends two 25 MB messages to the first load user's "Big"
// folder (a short text with a 25 MB attachment, and a 25 MB text body) and
// measures how much reading each raises the gateway's peak RSS.
func (b *bench) bigMessages(gw *gateway, c *client.Client) error {
	user := b.load[0]
	d, err := openDirect(b.stack.IMAPSAddr(), b.stack.TLSConfig(), user, b.stack.Users[user])
	if err != nil {
		return err
	}
	defer d.close()
	if err := d.c.Create("Big", nil).Wait(); err != nil {
		return err
	}
	const size = 25 << 20
	att := make([]byte, size*3/4) // base64 makes it 25 MB on the wire
	rand.Read(att)
	var enc bytes.Buffer
	b64 := base64.StdEncoding.EncodeToString(att)
	for i := 0; i < len(b64); i += 76 {
		enc.WriteString(b64[i:min(i+76, len(b64))])
		enc.WriteString("\r\n")
	}
	head := "From: <sender@example.org>\r\nTo: <" + user + ">\r\nDate: " + time.Now().Format(time.RFC1123Z) + "\r\nMIME-Version: 1.0\r\n"
	withAtt := head + "Subject: 25 MB attachment\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		sendBody + "\r\n--b1\r\nContent-Type: application/octet-stream; name=\"big.bin\"\r\nContent-Disposition: attachment; filename=\"big.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		enc.String() + "--b1--\r\n"
	line := "The quick brown fox jumps over the lazy dog, again and again, in a very long text body.\r\n"
	bigText := head + "Subject: 25 MB text body\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + strings.Repeat(line, size/len(line))
	var uids []uint32
	for _, m := range []string{withAtt, bigText} {
		cmd := d.c.Append("Big", int64(len(m)), nil)
		if _, err := cmd.Write([]byte(m)); err != nil {
			return err
		}
		if err := cmd.Close(); err != nil {
			return err
		}
		data, err := cmd.Wait()
		if err != nil {
			return err
		}
		uids = append(uids, uint32(data.UID))
	}
	for i, uid := range uids {
		if err := gw.resetPeak(); err != nil {
			return err
		}
		before, _ := gw.status("VmHWM")
		for range 3 {
			m, err := call(c, toolRead, map[string]any{"folder": "Big", "uid": uid})
			if err != nil {
				return err
			}
			if text, _ := m["text"].(string); text == "" {
				return errors.New("25 MB message: no text")
			}
		}
		after, _ := gw.status("VmHWM")
		b.rep.big[i] = max(after-before, 0) // below 0: the RSS shrank, the peak did not move
	}
	return nil
}

// runPairGap is runPair with an untimed pause before each call (so that
// the cold gateway's pool has let its connection expire).
func runPairGap(b budget, gap time.Duration, fa, fb func() error) (*result, *result) {
	ra, rb := &result{}, &result{}
	deadline := time.Now().Add(b.max)
	for i := 0; i < b.n && time.Now().Before(deadline); i++ {
		for _, p := range []struct {
			r *result
			f func() error
		}{{ra, fa}, {rb, fb}} {
			time.Sleep(gap)
			t := time.Now()
			err := p.f()
			p.r.addCall(time.Since(t), err)
		}
	}
	return ra, rb
}
