package outbox

import (
	"slices"
	"strconv"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

func TestReplyRecipients(t *testing.T) {
	self := map[string]bool{"me@example.test": true}
	a := func(s ...string) []mailbox.Address {
		var out []mailbox.Address
		for _, x := range s {
			out = append(out, mailbox.Address{Email: x})
		}
		return out
	}
	emails := func(as []mailmsg.Address) []string {
		var out []string
		for _, x := range as {
			out = append(out, x.Email)
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		o          mailbox.Original
		all        bool
		extra      []mailmsg.Address
		wantTo     []string
		wantCc     []string
		wantWarned bool
	}{
		{name: "from", o: mailbox.Original{From: a("x@example.test"), To: a("me@example.test", "y@example.test")},
			wantTo: []string{"x@example.test"}},
		{name: "reply-to wins", o: mailbox.Original{From: a("x@example.test"), ReplyTo: a("list@example.test")},
			wantTo: []string{"list@example.test"}},
		{name: "all, minus self, no duplicates", all: true, o: mailbox.Original{From: a("X@example.test"),
			To: a("ME@example.test", "y@example.test", "x@EXAMPLE.test"), Cc: a("Y@example.test", "z@example.test")},
			wantTo: []string{"X@example.test"}, wantCc: []string{"y@example.test", "z@example.test"}},
		{name: "extra cc deduplicated", all: true, o: mailbox.Original{From: a("x@example.test"), Cc: a("z@example.test")},
			extra:  []mailmsg.Address{{Email: "Z@example.test"}, {Email: "w@example.test"}},
			wantTo: []string{"x@example.test"}, wantCc: []string{"z@example.test", "w@example.test"}},
		{name: "own message answers its recipients", all: true, o: mailbox.Original{From: a("me@example.test"),
			To: a("y@example.test"), Cc: a("z@example.test", "me@example.test")},
			wantTo: []string{"y@example.test"}, wantCc: []string{"z@example.test"}},
		{name: "invalid address skipped", all: true, o: mailbox.Original{From: a("x@example.test"), Cc: a("bad address@")},
			wantTo: []string{"x@example.test"}, wantWarned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to, cc, warn := replyRecipients(&tc.o, self, tc.all, tc.extra)
			if !slices.Equal(emails(to), tc.wantTo) || !slices.Equal(emails(cc), tc.wantCc) || (len(warn) > 0) != tc.wantWarned {
				t.Fatalf("to %v cc %v warnings %v; want %v %v", emails(to), emails(cc), warn, tc.wantTo, tc.wantCc)
			}
		})
	}
}

func TestReplyReferences(t *testing.T) {
	if got := replyReferences(&mailbox.Original{MessageID: "c@x", References: []string{"a@x", "b@x"}}); !slices.Equal(got, []string{"a@x", "b@x", "c@x"}) {
		t.Errorf("got %v", got)
	}
	if got := replyReferences(&mailbox.Original{MessageID: "c@x", InReplyTo: []string{"b@x"}}); !slices.Equal(got, []string{"b@x", "c@x"}) {
		t.Errorf("from In-Reply-To: %v", got)
	}
	var long []string
	for i := range 30 {
		long = append(long, strconv.Itoa(i)+"@x")
	}
	got := replyReferences(&mailbox.Original{MessageID: "last@x", References: long})
	if len(got) != maxReferences || got[0] != "0@x" || got[len(got)-1] != "last@x" || got[len(got)-2] != "29@x" {
		t.Errorf("trimmed: %v", got)
	}
}
