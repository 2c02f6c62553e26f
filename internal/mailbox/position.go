package mailbox

// Where a watcher of a folder stands: a wait's or peek's cursor.
//
// A cursor is never ambiguous: it names the folder, its UIDVALIDITY and
// the next UID not looked at yet, so that an empty folder (next UID 1)
// and "no cursor" (from now) cannot be told apart wrongly, and a cursor
// never applies to another folder or a rebuilt one. The older form,
// since_uid (every UID up to it looked at), still works: 0 is the start
// of the folder, not "from now", so a since_uid of 0 handed out for an
// empty folder misses nothing.

import (
	"encoding/base64"
	"encoding/json"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// position is a cursor's content.
type position struct {
	V      int    `json:"v"`
	Folder string `json:"f"`
	UV     uint32 `json:"uv"`
	Next   uint32 `json:"n"` // the first UID not looked at yet (at least 1)
}

// positionAfter is the cursor of folder (UIDVALIDITY uv) once every UID up
// to last has been looked at; "" when uv is not known.
func positionAfter(folder string, uv, last uint32) string {
	if uv == 0 {
		return ""
	}
	b, _ := json.Marshal(position{V: 1, Folder: folder, UV: uv, Next: last + 1})
	return base64.RawURLEncoding.EncodeToString(b)
}

// parsePosition reads a cursor made by positionAfter for folder.
func parsePosition(s, folder string) (position, error) {
	var p position
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &p) != nil || p.V != 1 || p.Next == 0 || p.UV == 0 {
		return p, mailerr.New(mailerr.BadInput, "invalid cursor: it is not a next_cursor value of a wait or peek this gateway made").About(mailerr.SubjectCursor)
	}
	if p.Folder != folder {
		return p, mailerr.Newf(mailerr.BadInput, "this cursor belongs to folder %s, not %s", quote(p.Folder), quote(folder)).About(mailerr.SubjectCursor)
	}
	return p, nil
}
