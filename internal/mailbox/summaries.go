package mailbox

import (
	"context"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// Summaries returns the summaries of the messages uids (at most MaxUIDs)
// of folder that exist, newest first, without changing anything: what a
// person is shown before approving what will happen to them.
func (c *Client) Summaries(ctx context.Context, creds credentials.Credentials, folder string, uids []uint32) ([]Summary, error) {
	folder, err := c.folderArg(ctx, creds, folder)
	if err != nil {
		return nil, err
	}
	set, err := checkUIDs(uids)
	if err != nil {
		return nil, err
	}
	var out []Summary
	err = c.doIn(ctx, creds, folder, "reading the messages", func(ctx context.Context, conn *Conn) error {
		if _, err := conn.examine(folder); err != nil {
			return err
		}
		msgs, err := fetchSummaries(conn.client(), imap.UIDSetNum(set...))
		out = newestFirst(msgs, len(msgs))
		return err
	})
	return out, err
}
