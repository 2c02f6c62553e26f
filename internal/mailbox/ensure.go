package mailbox

import (
	"context"
	"errors"
	"strings"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// Delimiter returns the server's hierarchy delimiter (0 for a flat
// namespace). It is asked once and remembered: a gateway talks to one mail
// server, whose personal namespace has one delimiter for every user.
func (c *Client) Delimiter(ctx context.Context, creds credentials.Credentials) (rune, error) {
	ns, err := c.Namespace(ctx, creds)
	return ns.Delim, err
}

// EnsureFolder creates folder (and subscribes to it, so that mail apps
// showing only subscribed folders show it) when it does not exist yet,
// and reports whether it did. Missing parents are created by the server.
// A folder created by someone else in the meantime is not an error.
func (c *Client) EnsureFolder(ctx context.Context, creds credentials.Credentials, folder string) (created bool, err error) {
	err = c.do(ctx, creds, "creating the folder", false, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		if d, err := listOne(cl, folder); err != nil {
			return err
		} else if d != nil && selectable(d) {
			return nil
		}
		if err := cl.Create(folder, nil).Wait(); err != nil {
			var ie *imap.Error
			if errors.As(err, &ie) && (ie.Code == imap.ResponseCodeAlreadyExists || strings.Contains(strings.ToLower(ie.Text), "already exists")) {
				return nil
			}
			return folderOpError(err, folder, "create")
		}
		_ = cl.Subscribe(folder).Wait()
		created = true
		return nil
	})
	return created, err
}
