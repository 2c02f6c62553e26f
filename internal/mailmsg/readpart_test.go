package mailmsg

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// sized is a reader that knows its size, as IMAP literals do.
type sized struct {
	*strings.Reader
	n int64
}

func (s sized) Size() int64 { return s.n }

func TestReadPartAllocatesOnceForASizedReader(t *testing.T) {
	body := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	for _, tc := range []struct {
		name string
		r    io.Reader
		max  int // most capacity allowed
	}{
		{"sized", sized{strings.NewReader(body), int64(len(body))}, len(body) + bytes.MinRead},
		{"sized behind a LimitReader", io.LimitReader(sized{strings.NewReader(body), int64(len(body))}, int64(len(body))+1), len(body) + bytes.MinRead},
		{"size understated", sized{strings.NewReader(body), 10}, 4 * len(body)},
		{"unsized", strings.NewReader(body), 4 * len(body)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readPart(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != body {
				t.Fatalf("read %d bytes, want the %d of the body", len(got), len(body))
			}
			if cap(got) > tc.max {
				t.Errorf("capacity %d, want at most %d", cap(got), tc.max)
			}
		})
	}
	// The MaxPartBytes cap holds with a size hint too.
	big := sized{strings.NewReader(strings.Repeat("a", MaxPartBytes+10)), MaxPartBytes + 10}
	got, err := readPart(big)
	if err != nil || len(got) != MaxPartBytes+1 {
		t.Fatalf("read %d bytes (err %v), want MaxPartBytes+1 = %d", len(got), err, MaxPartBytes+1)
	}
}
