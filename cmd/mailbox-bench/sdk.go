package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// The official TypeScript SDK's side: users call the gateway from clients
// built on @modelcontextprotocol/sdk, so the figure they feel is measured
// too, next to mcp-go's. tests/clients/bench-sdk.mjs holds one SDK Client
// over streamable HTTP, connected once, and makes one tool call per line it
// reads; its answer carries the call's latency as Node measured it around
// client.callTool, so the pipe between the two processes is not counted.

const (
	sdkScript  = "tests/clients/bench-sdk.mjs"
	sdkPackage = "tests/clients/node_modules/@modelcontextprotocol/sdk/package.json"
	sdkPrefix  = "sdk: "
	// sdkCallMax bounds one call as seen from Go (the SDK's own request
	// timeout is 60 s).
	sdkCallMax = 90 * time.Second
)

// sdkTool is the report's name of tool called through the TypeScript SDK.
func sdkTool(tool string) string { return sdkPrefix + tool }

// sdkReady says what is missing to run bench-sdk.mjs: node on PATH and
// tests/clients/node_modules, from the repository root.
func sdkReady() error {
	if _, err := os.Stat(sdkScript); err != nil {
		return fmt.Errorf("no %s: run mailbox-bench from the repository root", sdkScript)
	}
	if _, err := exec.LookPath("node"); err != nil {
		return errors.New("the TypeScript SDK benchmark needs Node.js (20.18 or newer) on PATH, and its packages: install Node.js, then run `npm ci` in tests/clients")
	}
	if _, err := os.Stat(sdkPackage); err != nil {
		return errors.New("the TypeScript SDK benchmark needs tests/clients/node_modules (no @modelcontextprotocol/sdk there): run `npm ci` in tests/clients")
	}
	return nil
}

// sdkDriver is one running bench-sdk.mjs: one SDK client, one user.
type sdkDriver struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan []byte // answers, one JSON line each
	exited chan struct{}
	err    error // why the process exited (after exited is closed)
	log    *os.File
	dead   error // set once a call failed for good: later calls fail at once
}

// sdkAnswer is one line of bench-sdk.mjs.
type sdkAnswer struct {
	Ready bool   `json:"ready"`
	Tools int    `json:"tools"`
	NS    int64  `json:"ns"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// startSDK starts bench-sdk.mjs (stderr into dir/name.log) and connects its
// client to url as user.
func startSDK(dir, name, url, user, pass string) (*sdkDriver, error) {
	if err := sdkReady(); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	s := &sdkDriver{lines: make(chan []byte, 1), exited: make(chan struct{}), log: logFile}
	s.cmd = exec.Command("node", sdkScript)
	s.cmd.Stderr = logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		logFile.Close()
		return nil, err
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("node %s: %w", sdkScript, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			s.lines <- bytes.Clone(sc.Bytes())
		}
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	a, err := s.exchange(map[string]any{"url": url, "headers": map[string]string{"x-imap-user": user, "x-imap-pass": pass}}, 60*time.Second)
	if err == nil && !a.Ready {
		err = fmt.Errorf("did not connect: %s", a.Error)
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("TypeScript SDK client (node %s): %w%s", sdkScript, err, s.stderrTail())
	}
	return s, nil
}

// exchange writes one line and reads one answer.
func (s *sdkDriver) exchange(req any, timeout time.Duration) (sdkAnswer, error) {
	var a sdkAnswer
	line, err := json.Marshal(req)
	if err != nil {
		return a, err
	}
	if _, err := s.in.Write(append(line, '\n')); err != nil {
		return a, fmt.Errorf("writing to node: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l := <-s.lines:
		if err := json.Unmarshal(l, &a); err != nil {
			return a, fmt.Errorf("node answered %q: %w", l, err)
		}
		return a, nil
	case <-s.exited:
		return a, fmt.Errorf("node exited (%v)", s.err)
	case <-t.C:
		return a, fmt.Errorf("no answer from node in %s", timeout)
	}
}

// call makes one tool call through the SDK and returns its latency as Node
// measured it around client.callTool. check is what bench-sdk.mjs verifies
// in the answer (see there); a wrong answer is an error with a latency.
func (s *sdkDriver) call(name string, args, check map[string]any) (time.Duration, error) {
	if s.dead != nil {
		return 0, s.dead
	}
	a, err := s.exchange(map[string]any{"name": name, "arguments": args, "check": check}, sdkCallMax)
	if err != nil {
		s.dead = fmt.Errorf("TypeScript SDK client: %w%s", err, s.stderrTail())
		return 0, s.dead
	}
	d := time.Duration(a.NS)
	if !a.OK {
		if a.Error == "" {
			a.Error = "neither ok nor an error"
		}
		return d, fmt.Errorf("TypeScript SDK: %s", a.Error)
	}
	return d, nil
}

// close asks the script to close its client and exit, and kills it if it
// does not within 10 s.
func (s *sdkDriver) close() {
	if line, err := json.Marshal(map[string]bool{"quit": true}); err == nil {
		s.in.Write(append(line, '\n'))
	}
	s.in.Close()
	kill := time.After(10 * time.Second)
	for {
		select {
		case <-s.lines: // an answer nobody waited for
		case <-s.exited:
			s.log.Close()
			return
		case <-kill:
			s.cmd.Process.Kill()
		}
	}
}

// stderrTail is the end of the script's stderr, for an error message.
func (s *sdkDriver) stderrTail() string {
	b, err := os.ReadFile(s.log.Name())
	if err != nil || len(b) == 0 {
		return ""
	}
	t := strings.TrimSpace(string(b[max(0, len(b)-2000):]))
	return "\nstderr of node " + sdkScript + ":\n" + t
}

// fetchEnvelopes is the bare list: FETCH n-19:* (UID FLAGS ENVELOPE
// RFC822.SIZE INTERNALDATE), read to the end; no STATUS, no body, no body
// structure.
func (d *direct) fetchEnvelopes() error {
	var set imap.SeqSet
	set.AddRange(uint32(max(1, int64(d.n)-19)), 0)
	n, err := drainSummaries(d.c.Fetch(set, &imap.FetchOptions{UID: true, Flags: true, Envelope: true, RFC822Size: true, InternalDate: true}))
	if err == nil && n != min(20, int(d.n)) {
		err = fmt.Errorf("bare fetch: %d envelopes, want %d", n, min(20, int(d.n)))
	}
	return err
}

// fetchWhole is the bare read: UID FETCH uid (BODY.PEEK[]), the whole
// message read to the end.
func (d *direct) fetchWhole(uid imap.UID) error {
	cmd := d.c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{{Peek: true}}})
	got := int64(0)
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		for item := msg.Next(); item != nil; item = msg.Next() {
			if sec, ok := item.(imapclient.FetchItemDataBodySection); ok && sec.Literal != nil {
				k, _ := io.Copy(io.Discard, sec.Literal)
				got += k
			}
		}
	}
	if err := cmd.Close(); err != nil {
		return err
	}
	if got == 0 {
		return fmt.Errorf("bare fetch: UID %d has no body", uid)
	}
	return nil
}

// measureSDK measures, at concurrency 1 on the size-n user, imap_list_emails
// and imap_read_email through the TypeScript SDK, alternating call by call
// with the bare IMAP command on d (a warm connection, INBOX examined): the
// 20 newest envelopes, and the whole typical message mcp-go's read reads.
func (b *bench) measureSDK(ctx context.Context, gw *gateway, n int, d *direct) error {
	o := b.o
	user := b.sizeUser[n]
	s, err := startSDK(b.dir, fmt.Sprintf("sdk-%d", n), gw.url, user, b.stack.Users[user])
	if err != nil {
		return err
	}
	defer s.close()
	uid := b.typical[user]
	for _, c := range []struct {
		tool        string
		args, check map[string]any
		bare        func() error
	}{
		{toolList, map[string]any{"folder": "INBOX", "limit": 20}, map[string]any{"messages": min(20, n), "min_total": n}, d.fetchEnvelopes},
		{toolRead, map[string]any{"uid": uid}, map[string]any{"uid": uid}, func() error { return d.fetchWhole(imap.UID(uid)) }},
	} {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		g := func() (time.Duration, error) { return s.call(c.tool, c.args, c.check) }
		x := timed(c.bare)
		runPairLat(budget{5, o.cellMax}, g, x) // warm up
		logf("c=1 TypeScript SDK %s on %d messages", c.tool, n)
		cpu0, node0 := gw.cpu(), procCPU(s.cmd.Process.Pid)
		rg, rd := runPairLat(budget{o.n1, o.cellMax}, g, x)
		rg.CPU, rg.ClientCPU = gw.cpu()-cpu0, procCPU(s.cmd.Process.Pid)-node0
		b.rep.add(sdkTool(c.tool), n, 1, sideGateway, rg)
		b.rep.add(sdkTool(c.tool), n, 1, sideDirect, rd)
	}
	return nil
}
