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
	if c.delimKnown.Load() {
		return rune(c.delim.Load()), nil
	}
	var d rune
	err := c.do(ctx, creds, "asking the folder delimiter", true, func(ctx context.Context, conn *Conn) error {
		var err error
		d, err = delimiter(conn.client())
		return err
	})
	if err != nil {
		return 0, err
	}
	c.delim.Store(int32(d))
	c.delimKnown.Store(true)
	return d, nil
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
