// Shopify's toxiproxy for the fault suite: its server built by
// scripts/toxiproxy.sh and run on loopback, driven with its client package.

package mailtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

var toxiBuild struct {
	once sync.Once
	bin  string
	err  error
}

// toxiproxyBinary builds the server once per test binary (nothing when
// the cached one is current) and returns its path.
func toxiproxyBinary() (string, error) {
	toxiBuild.once.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			toxiBuild.err = err
			return
		}
		var script string
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "scripts", "toxiproxy.sh")); err == nil {
				script = filepath.Join(d, "scripts", "toxiproxy.sh")
				break
			}
			if filepath.Dir(d) == d {
				toxiBuild.err = fmt.Errorf("no scripts/toxiproxy.sh above %s", wd)
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, script, "build")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			toxiBuild.err = fmt.Errorf("scripts/toxiproxy.sh build: %v\n%s", err, strings.TrimSpace(stderr.String()))
			return
		}
		toxiBuild.bin = strings.TrimSpace(stdout.String())
	})
	return toxiBuild.bin, toxiBuild.err
}

// StartToxiproxy starts a toxiproxy server on a loopback port for this
// test (stopped when it ends) and returns its client. Where it cannot be
// built (no Go toolchain or module proxy) the test is skipped, or fails
// when CI=true.
func StartToxiproxy(t testing.TB) *toxiproxy.Client {
	t.Helper()
	bin, err := toxiproxyBinary()
	if err != nil {
		if inCI() {
			t.Fatalf("mailtest: toxiproxy: %v", err)
		}
		t.Skipf("mailtest: toxiproxy unavailable: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var out bytes.Buffer
	cmd := exec.Command(bin, "-host", "127.0.0.1", "-port", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("mailtest: starting toxiproxy: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("toxiproxy's log (last 3 KB):\n%s", tail(out.String(), 3000))
		}
	})
	c := toxiproxy.NewClient("127.0.0.1:" + strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := c.Proxies(); err == nil {
			return c
		} else if time.Now().After(deadline) {
			t.Fatalf("mailtest: toxiproxy did not answer on port %d: %v", port, err)
		}
	}
}
