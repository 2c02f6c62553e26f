package mailbox

import (
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// idCriteria ORs three header searches per id, in a balanced tree, each
// with the id in angle brackets.
func TestIDCriteria(t *testing.T) {
	ids := []string{"a@x", "b@x", "c@x", "d@x", "e@x"}
	var leaves []string
	var depth func(c imap.SearchCriteria, d int) int
	depth = func(c imap.SearchCriteria, d int) int {
		if len(c.Or) == 0 {
			for _, h := range c.Header {
				leaves = append(leaves, h.Key+" "+h.Value)
			}
			return d
		}
		return max(depth(c.Or[0][0], d+1), depth(c.Or[0][1], d+1))
	}
	if d := depth(*idCriteria(ids), 0); d > 4 {
		t.Errorf("depth %d for 15 terms", d)
	}
	if len(leaves) != 15 || leaves[0] != "Message-ID <a@x>" || leaves[14] != "In-Reply-To <e@x>" {
		t.Errorf("%d leaves: %s", len(leaves), strings.Join(leaves, "; "))
	}
}

func TestThreadUIDs(t *testing.T) {
	d := imapclient.ThreadData{Chain: []uint32{1, 2}, SubThreads: []imapclient.ThreadData{{Chain: []uint32{3}}, {Chain: []uint32{4}}}}
	if got := threadUIDs(d); len(got) != 4 || got[0] != 1 || got[3] != 4 {
		t.Errorf("%v", got)
	}
}
