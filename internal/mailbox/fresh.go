package mailbox

// A message newer than the connection's view of its folder.
//
// Dovecot brings a session's view of its selected folder up to date at the
// end of a command (NOTES.md): a pooled connection that has had the folder
// open since before a message arrived answers a UID FETCH of it with
// nothing, as if there were no such message. So an operation that finds
// no message with a UID at or above the UIDNEXT its select reported asks
// once more after a NOOP, before it says "no message".

import (
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// mayNotSeeYet says whether err, from looking up uid in the selected
// folder, is "no such message" for a UID the connection's view may not
// hold yet: at or above the folder's UIDNEXT when it was selected.
func (conn *Conn) mayNotSeeYet(err error, uid uint32) bool {
	return err != nil && mailerr.KindOf(err) == mailerr.NotFound && mailerr.SubjectOf(err) == mailerr.SubjectMessage &&
		(conn.uidNext == 0 || uid >= conn.uidNext)
}

// catchUp brings the connection's view of its selected folder up to date:
// a NOOP, waited for (commands sent behind it could run before its
// refresh).
func (conn *Conn) catchUp(folder string) error {
	if err := conn.client().Noop().Wait(); err != nil {
		return imapError(err, folder)
	}
	return nil
}
