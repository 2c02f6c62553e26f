package mailtest

import (
	"net"
	"strconv"
	"sync/atomic"
	"testing"
)

// CountingListener listens on a loopback port, closes every connection at
// once and counts them: whether anything was dialled there. It stops when
// the test ends.
func CountingListener(t testing.TB) (port string, hits *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	hits = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Close()
		}
	}()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), hits
}
