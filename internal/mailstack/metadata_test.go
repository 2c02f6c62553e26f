package mailstack_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// TestMetadataSwitch: Options.Metadata turns IMAP METADATA on (a 64 KiB
// value on a folder and at the server level round-trips); the default
// stack has none.
func TestMetadataSwitch(t *testing.T) {
	off := login(t, mailtest.Shared(t), mailstack.Alice)
	if off.Caps().Has(imap.CapMetadata) {
		t.Fatal("the default stack advertises METADATA")
	}

	st := mailtest.StartT(t, mailtest.Options{Metadata: true})
	c := login(t, st, mailstack.Alice)
	if !c.Caps().Has(imap.CapMetadata) {
		t.Fatalf("Metadata: true but no METADATA capability: %v", c.Caps())
	}
	if c.Caps().Has(imap.CapMetadataServer) {
		t.Log("Dovecot advertises METADATA-SERVER too")
	}
	big := []byte(strings.Repeat("x", 64<<10))
	for _, mbox := range []string{"INBOX", ""} {
		entry := "/private/vendor/mailbox-mcp/test"
		if err := within(t, c, 20*time.Second, "SETMETADATA", func() error {
			return c.SetMetadata(mbox, map[string]*[]byte{entry: &big}).Wait()
		}); err != nil {
			t.Fatalf("SETMETADATA %q 64 KiB: %v", mbox, err)
		}
		var got []byte
		if err := within(t, c, 20*time.Second, "GETMETADATA", func() error {
			d, err := c.GetMetadata(mbox, []string{entry}, nil).Wait()
			if err == nil && d.Entries[entry] != nil {
				got = *d.Entries[entry]
			}
			return err
		}); err != nil {
			t.Fatalf("GETMETADATA %q: %v", mbox, err)
		}
		if !bytes.Equal(got, big) {
			t.Fatalf("GETMETADATA %q: got %d bytes, want %d", mbox, len(got), len(big))
		}
	}
}
