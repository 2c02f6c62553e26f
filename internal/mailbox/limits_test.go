package mailbox

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestTextPartCap(t *testing.T) {
	for _, tc := range []struct {
		offset, maxChars int
		want             uint32
	}{
		{0, DefaultMaxChars, minTextPartBytes},       // 400 KB asked: the 1 MB floor
		{0, MaxMaxChars, 4_000_000},                  // 4 bytes a character
		{200_000, 100_000, 1_200_000},                // a window further in
		{3_000_000, 1000, maxTextPartBytes},          // beyond the cap: the cap
		{1 << 40 / 8, MaxMaxChars, maxTextPartBytes}, // no overflow
	} {
		if got := textPartCap(tc.offset, tc.maxChars); got != tc.want {
			t.Errorf("textPartCap(%d, %d) = %d, want %d", tc.offset, tc.maxChars, got, tc.want)
		}
	}
}

// literal is a literal of a given announced size.
type literal struct {
	io.Reader
	size int64
}

func (l literal) Size() int64 { return l.size }

func TestReadAtMost(t *testing.T) {
	body := strings.Repeat("x", 1000)
	if got := readAtMost(literal{iotest.OneByteReader(strings.NewReader(body)), 1000}, 600); string(got) != body[:600] {
		t.Errorf("one byte at a time: got %d bytes, want 600", len(got))
	}
	got := readAtMost(strings.NewReader("short"), 600)
	if string(got) != "short" {
		t.Errorf("short body: got %q", got)
	}
	if cap(got) != len("short") {
		t.Errorf("short body: a buffer of %d bytes for 5", cap(got))
	}
	if got := readAtMost(literal{iotest.ErrReader(iotest.ErrTimeout), 1000}, 600); len(got) != 0 {
		t.Errorf("failing reader: got %d bytes", len(got))
	}
	// A literal that ends before its announced size gives what it had.
	if got := readAtMost(literal{strings.NewReader("cut"), 1000}, 600); string(got) != "cut" {
		t.Errorf("cut literal: got %q", got)
	}
}
