package mailbox

// Tags on the reading side. A sender puts short labels in an X-Mailbox-Tags
// header (mailmsg checks and writes them); wait, peek and consume filter on
// them. IMAP's SEARCH HEADER matches a substring, case-insensitively, so
// "urgent" also finds "not-urgent": the server's answer only narrows the
// candidates, and the exact tag list of each candidate, read from its
// header, decides.

import (
	"slices"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// TagsHeader is the header that carries a message's tags.
const TagsHeader = mailmsg.TagsHeader

// CheckTag refuses what is not a tag: 1 to 32 lower-case letters, digits,
// '.', '_' or '-'.
func CheckTag(tag string) error { return mailmsg.CheckTag(tag) }

// tagCriterion narrows a search to messages whose tags header contains tag
// (a substring match: filterTagged makes it exact).
func tagCriterion(tag string) imap.SearchCriteriaHeaderField {
	return imap.SearchCriteriaHeaderField{Key: TagsHeader, Value: tag}
}

// tagHeaderSection is the tags header alone, a few bytes a message.
var tagHeaderSection = &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{TagsHeader}, Peek: true}

// tagScanChunk is how many candidates one FETCH of the tags header covers.
const tagScanChunk = 500

// filterTagged keeps the uids (ascending) whose tags header lists tag
// exactly, in order, reading only that header. It stops once it has kept
// want of them (0: no limit) and found one more, and then says more.
func filterTagged(cl *imapclient.Client, uids []imap.UID, tag string, want int) (kept []imap.UID, more bool, err error) {
	for start := 0; start < len(uids); start += tagScanChunk {
		chunk := uids[start:min(start+tagScanChunk, len(uids))]
		tags, err := fetchTags(cl, chunk)
		if err != nil {
			return nil, false, err
		}
		for _, u := range chunk {
			if !slices.Contains(tags[u], tag) {
				continue
			}
			if want > 0 && len(kept) == want {
				return kept, true, nil
			}
			kept = append(kept, u)
		}
	}
	return kept, false, nil
}

// fetchTags reads the tags of uids, streaming.
func fetchTags(cl *imapclient.Client, uids []imap.UID) (map[imap.UID][]string, error) {
	out := make(map[imap.UID][]string, len(uids))
	if len(uids) == 0 {
		return out, nil
	}
	cmd := cl.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{tagHeaderSection}})
	defer cmd.Close()
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		var uid imap.UID
		var tags []string
		for item := msg.Next(); item != nil; item = msg.Next() {
			switch it := item.(type) {
			case imapclient.FetchItemDataUID:
				uid = it.UID
			case imapclient.FetchItemDataBodySection:
				if it.Literal != nil {
					tags = headerTags(readAtMost(it.Literal, 4096))
				}
			}
		}
		if uid != 0 {
			out[uid] = tags
		}
	}
	if err := cmd.Close(); err != nil {
		return nil, imapError(err, "")
	}
	return out, nil
}
