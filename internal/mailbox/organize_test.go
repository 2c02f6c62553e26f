package mailbox

import (
	"context"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

func TestCheckKeyword(t *testing.T) {
	for _, ok := range []string{"$Label1", "project-x", "Work/2026", "a.b_c", "$MDNSent", strings.Repeat("k", 64), "x}"} {
		if err := CheckKeyword(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, tc := range []struct{ kw, says string }{
		{"", "must not be empty"},
		{strings.Repeat("k", 65), "longer than 64"},
		{"two words", "space"},
		{"tab\there", "control"},
		{"nul\x00", "control"},
		{"del\x7f", "outside ASCII"},
		{"café", "outside ASCII"},
		{"a(b", `'('`},
		{"a)b", `')'`},
		{"a{3}", `'{'`},
		{"50%", `'%'`},
		{"star*", `'*'`},
		{`q"uote`, `'"'`},
		{`back\slash`, `'\\'`},
		{"a]", `']'`},
	} {
		err := CheckKeyword(tc.kw)
		if err == nil {
			t.Errorf("%q accepted", tc.kw)
			continue
		}
		msg := mailerr.Message(err)
		if mailerr.KindOf(err) != mailerr.BadInput || !strings.Contains(msg, tc.says) || !strings.Contains(msg, "nothing was changed") {
			t.Errorf("%q: %v %q, want bad input saying %q", tc.kw, mailerr.KindOf(err), msg, tc.says)
		}
	}
}

func TestParseFlagChange(t *testing.T) {
	add, remove, err := parseFlagChange([]string{"seen", `\Flagged`, "ANSWERED", "$Work", "$work"}, []string{"Later"})
	if err != nil {
		t.Fatal(err)
	}
	want := []imap.Flag{imap.FlagSeen, imap.FlagFlagged, imap.FlagAnswered, "$Work"}
	if len(add) != len(want) {
		t.Fatalf("add = %q, want %q", add, want)
	}
	for i := range want {
		if add[i] != want[i] {
			t.Errorf("add[%d] = %q, want %q", i, add[i], want[i])
		}
	}
	if len(remove) != 1 || remove[0] != "Later" {
		t.Errorf("remove = %q", remove)
	}
	for _, tc := range []struct {
		add, remove []string
		says        string
	}{
		{nil, nil, "at least one flag"},
		{[]string{"seen"}, []string{`\SEEN`}, "seen is both in add and in remove"},
		{[]string{"$a"}, []string{"$A"}, `"$a" is both`},
		{[]string{"deleted"}, nil, "deleting messages is a separate operation"},
		{nil, []string{`\Deleted`}, "deleting messages is a separate operation"},
		{[]string{`\Draft`}, nil, "cannot be set or cleared"},
		{[]string{`\Custom`}, nil, "cannot start with a backslash"},
		{[]string{"ok", "not ok"}, nil, `keyword "not ok"`},
	} {
		_, _, err := parseFlagChange(tc.add, tc.remove)
		if err == nil || mailerr.KindOf(err) != mailerr.BadInput || !strings.Contains(mailerr.Message(err), tc.says) {
			t.Errorf("add %q remove %q: %v, want bad input saying %q", tc.add, tc.remove, err, tc.says)
		}
	}
}

func TestCheckUIDs(t *testing.T) {
	got, err := checkUIDs([]uint32{9, 3, 9, 1})
	if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 3 || got[2] != 9 {
		t.Errorf("checkUIDs = %v, %v; want [1 3 9]", got, err)
	}
	many := make([]uint32, MaxUIDs+1)
	for i := range many {
		many[i] = uint32(i + 1)
	}
	for _, tc := range []struct {
		uids []uint32
		says string
	}{
		{nil, "at least one"},
		{[]uint32{4, 0}, "positive"},
		{many, "at most 500"},
	} {
		if _, err := checkUIDs(tc.uids); err == nil || !strings.Contains(mailerr.Message(err), tc.says) {
			t.Errorf("%d uids: %v, want %q", len(tc.uids), err, tc.says)
		}
	}
	if _, err := checkUIDs(many[:MaxUIDs]); err != nil {
		t.Errorf("%d uids refused: %v", MaxUIDs, err)
	}
}

func TestUIDList(t *testing.T) {
	var many []imap.UID
	for i := 1; i <= 22; i++ {
		many = append(many, imap.UID(i))
	}
	for _, tc := range []struct {
		uids []imap.UID
		want string
	}{
		{[]imap.UID{7}, "UID 7"},
		{[]imap.UID{7, 9}, "UIDs 7 and 9"},
		{[]imap.UID{7, 9, 12}, "UIDs 7, 9 and 12"},
		{many, "UIDs 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20 and 2 more"},
	} {
		if got := uidList(tc.uids); got != tc.want {
			t.Errorf("uidList(%v) = %q, want %q", tc.uids, got, tc.want)
		}
	}
}

func TestPairUIDs(t *testing.T) {
	set := func(rs ...imap.UIDRange) imap.NumSet { return imap.UIDSet(rs) }
	got := pairUIDs(set(imap.UIDRange{Start: 3, Stop: 3}, imap.UIDRange{Start: 5, Stop: 6}), set(imap.UIDRange{Start: 101, Stop: 103}))
	if len(got) != 3 || got[3] != 101 || got[5] != 102 || got[6] != 103 {
		t.Errorf("pairs = %v", got)
	}
	for _, tc := range []struct{ src, dst imap.NumSet }{
		{nil, nil},
		{set(imap.UIDRange{Start: 1, Stop: 3}), set(imap.UIDRange{Start: 5, Stop: 6})},
		{imap.SeqSetNum(1), set(imap.UIDRange{Start: 5, Stop: 5})},
	} {
		if got := pairUIDs(tc.src, tc.dst); got != nil {
			t.Errorf("pairUIDs(%v, %v) = %v, want nil", tc.src, tc.dst, got)
		}
	}
}

func TestNewKeyword(t *testing.T) {
	add := []imap.Flag{imap.FlagSeen, "$Work"}
	if kw := newKeyword(nil, add); kw != "" {
		t.Errorf("no PERMANENTFLAGS: %q refused", kw)
	}
	if kw := newKeyword([]imap.Flag{imap.FlagSeen, imap.FlagWildcard}, add); kw != "" {
		t.Errorf(`with \*: %q refused`, kw)
	}
	if kw := newKeyword([]imap.Flag{imap.FlagSeen, "$work"}, add); kw != "" {
		t.Errorf("listed keyword %q refused", kw)
	}
	if kw := newKeyword([]imap.Flag{imap.FlagSeen}, add); kw != "$Work" {
		t.Errorf("unlisted keyword: %q, want $Work", kw)
	}
}

func TestCheckNewName(t *testing.T) {
	for _, ok := range []string{"Reçus/2026 ✓", "Projects", "日本語", "A & B", strings.Repeat("é", 200)} {
		if err := checkNewName("name", ok, '/'); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, tc := range []struct {
		name  string
		delim rune
		says  string
	}{
		{"", '/', "must not be empty"},
		{strings.Repeat("x", 201), '/', "at most 200 characters"},
		{"a\x01b", '/', "control character"},
		{"line\nbreak", '/', "control character"},
		{"bad\xffutf8", '/', "valid UTF-8"},
		{"all*", '/', "wildcard"},
		{"100%", '/', "wildcard"},
		{"/top", '/', "starts or ends"},
		{"Reçus/", '/', "starts or ends"},
		{"a//b", '/', "empty level"},
		{".hidden", '.', "starts or ends"},
	} {
		err := checkNewName("name", tc.name, tc.delim)
		if err == nil || mailerr.KindOf(err) != mailerr.BadInput || !strings.Contains(mailerr.Message(err), tc.says) {
			t.Errorf("%q: %v, want bad input saying %q", tc.name, err, tc.says)
		}
	}
	// Before the delimiter is known only the rest is checked.
	if err := checkNewName("name", "/top", 0); err != nil {
		t.Errorf("delimiter checked without one: %v", err)
	}
}

// A server with neither MOVE nor UIDPLUS (the in-process server of
// wait_test.go advertises only IMAP4rev1 and IDLE) is refused before
// anything is sent that changes the folder: no COPY, no \Deleted, and
// certainly no bare EXPUNGE. Permanent deletion likewise.
func TestMoveAndDeleteRefusedWithoutUIDPlus(t *testing.T) {
	c, creds, add := memServer(t)
	add("From: a@example.org\nSubject: one\n\nbody\n")
	add("From: a@example.org\nSubject: two\n\nbody\n")
	ctx := context.Background()
	if _, err := c.CreateFolder(ctx, creds, "Elsewhere"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetFlags(ctx, creds, "INBOX", []uint32{1}, []string{"$Keep"}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := c.Move(ctx, creds, "INBOX", []uint32{1}, "Elsewhere")
	if err == nil || !strings.Contains(mailerr.Message(err), "neither MOVE nor UIDPLUS") {
		t.Errorf("move: %v", err)
	}
	_, err = c.Trash(ctx, creds, "INBOX", []uint32{2}, true, nil)
	if err == nil || !strings.Contains(mailerr.Message(err), "does not offer UIDPLUS") {
		t.Errorf("permanent trash: %v", err)
	}
	// Nothing changed: both messages, flags as before, Elsewhere empty.
	res, err := c.SetFlags(ctx, creds, "INBOX", []uint32{1, 2}, nil, []string{"$Never"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 2 || res.Messages[0].Flags.Deleted || res.Messages[1].Flags.Deleted ||
		len(res.Messages[0].Flags.Keywords) != 1 || len(res.Messages[1].Flags.Keywords) != 0 {
		t.Errorf("after the refusals: %+v", res.Messages)
	}
	page, err := c.ListEmails(ctx, creds, ListOptions{Folder: "Elsewhere"})
	if err != nil || page.Total != 0 {
		t.Errorf("Elsewhere: %v, %v", page, err)
	}
}

// A missing UID makes SetFlags change nothing, and names the UID.
func TestSetFlagsMissingUIDChangesNothing(t *testing.T) {
	c, creds, add := memServer(t)
	add("From: a@example.org\nSubject: one\n\nbody\n")
	ctx := context.Background()
	_, err := c.SetFlags(ctx, creds, "INBOX", []uint32{1, 42, 77}, []string{"flagged"}, nil)
	if mailerr.KindOf(err) != mailerr.NotFound || !strings.Contains(mailerr.Message(err), "UIDs 42 and 77") {
		t.Fatalf("err = %v", err)
	}
	res, err := c.SetFlags(ctx, creds, "INBOX", []uint32{1}, nil, []string{"$unused"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages[0].Flags.Flagged {
		t.Error("UID 1 was flagged although the call failed")
	}
}
