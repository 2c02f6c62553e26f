package mailbox

import (
	"slices"
	"testing"

	"github.com/emersion/go-imap/v2"
)

// tapOf feeds a transcript to an armed tap, in chunks that cut lines
// anywhere, with the STORE command written in between as go-imap does.
func tapOf(t *testing.T, chunk int, lines ...string) storeAnswer {
	t.Helper()
	var tap modifiedTap
	tap.Write([]byte("T1 LOGIN \"u\" \"secret\"\r\n* 1 FETCH (UID 11 FLAGS (\\Seen))\r\n")) // disarmed: ignored
	tap.arm()
	tap.Write([]byte("T4 UID STORE 11:13 (UNCHANGEDSINCE 201) +FLAGS.SILENT (\\Seen)\r\n"))
	var all []byte
	for _, l := range lines {
		all = append(all, l+"\r\n"...)
	}
	for len(all) > 0 {
		n := min(chunk, len(all))
		tap.Write(all[:n])
		all = all[n:]
	}
	return tap.disarm()
}

var claimUIDs = []imap.UID{11, 12, 13}

// The answers Dovecot 2.3 gave to concurrent conditional stores (recorded
// in tests/coord_mailbox_test.go runs), Cyrus 3.6's (which reports FLAGS
// for its own .SILENT store), and what each STORE claimed. The candidates
// were unseen without other flags before the STORE.
func TestStoreAnswerWon(t *testing.T) {
	prior := map[uint32][]string{11: {}, 12: {}, 13: {}}
	for _, tc := range []struct {
		name   string
		mode   flagsInStore
		keyed  bool // the STORE also set a key's keyword
		lines  []string
		won    []imap.UID
		unsure []imap.UID
		exact  bool
	}{
		{"Dovecot: all changed by this store", flagsFromOthers, false, []string{
			"* 11 FETCH (UID 11 MODSEQ (203))", "* 12 FETCH (UID 12 MODSEQ (203))", "* 13 FETCH (UID 13 MODSEQ (203))",
			"T4 OK Store completed (0.001 + 0.000 secs).",
		}, claimUIDs, nil, true},
		{"Dovecot: another session set \\Seen first; still OK without MODIFIED, and this STORE changed nothing", flagsFromOthers, false, []string{
			"* 11 FETCH (UID 11 MODSEQ (203) FLAGS (\\Seen))", "* 12 FETCH (UID 12 MODSEQ (203) FLAGS (\\Seen))", "* 13 FETCH (UID 13 MODSEQ (203) FLAGS (\\Seen))",
			"T4 OK Store completed (0.002 + 0.000 + 0.002 secs).",
		}, nil, nil, true},
		{"Dovecot: some modified, reported with FLAGS", flagsFromOthers, false, []string{
			"* 11 FETCH (UID 11 MODSEQ (7) FLAGS (\\Seen \\Recent))", "* 12 FETCH (UID 12 MODSEQ (9))", "* 13 FETCH (UID 13 MODSEQ (9))",
			"T4 OK [MODIFIED 11] Conditional store failed (0.001 + 0.000 secs).",
		}, []imap.UID{12, 13}, nil, true},
		{"Dovecot: own change after another flag's change: FLAGS with this store's MODSEQ", flagsFromOthers, false, []string{
			"* 11 FETCH (UID 11 MODSEQ (9) FLAGS (\\Seen \\Flagged))", "* 12 FETCH (UID 12 MODSEQ (9))", "* 13 FETCH (UID 13 MODSEQ (8) FLAGS (\\Seen))",
			"T4 OK Store completed.",
		}, []imap.UID{11, 12}, nil, true},
		{"Dovecot: another flag changed and no own MODSEQ to compare: returned at least once, never dropped", flagsFromOthers, false, []string{
			"* 11 FETCH (UID 11 MODSEQ (12) FLAGS (\\Seen \\Flagged))", "* 12 FETCH (UID 12 MODSEQ (12) FLAGS (\\Seen))",
			"T4 OK [MODIFIED 13] Conditional store failed.",
		}, []imap.UID{11}, []imap.UID{11}, false},
		{"Dovecot, keyed: another session set \\Seen first and this STORE added its keyword (its own MODSEQ): at least once, never exactly", flagsFromOthers, true, []string{
			"* 11 FETCH (UID 11 MODSEQ (9) FLAGS (\\Seen $MbxClaim07 $MbxClaim03))", "* 12 FETCH (UID 12 MODSEQ (9))", "* 13 FETCH (UID 13 MODSEQ (9) FLAGS (\\Seen $MbxClaim07))",
			"T4 OK Store completed.",
		}, []imap.UID{11, 12, 13}, []imap.UID{11, 13}, false},
		{"Dovecot, keyed: flags before plus \\Seen alone: this STORE did not apply there", flagsFromOthers, true, []string{
			"* 11 FETCH (UID 11 MODSEQ (9) FLAGS (\\Seen))", "* 12 FETCH (UID 12 MODSEQ (9))", "* 13 FETCH (UID 13 MODSEQ (9))",
			"T4 OK Store completed.",
		}, []imap.UID{12, 13}, nil, true},
		{"all modified", flagsFromOthers, false, []string{
			"T4 OK [MODIFIED 11:13] Conditional store failed (0.002 + 0.000 + 0.001 secs).",
		}, nil, nil, true},
		{"a server that reports nothing: MODIFIED only, not exact", flagsFromOthers, false, []string{
			"T4 OK [MODIFIED 12] Conditional store failed.",
		}, []imap.UID{11, 13}, nil, false},
		{"Cyrus: its own change with FLAGS, one MODSEQ per message", flagsEchoed, false, []string{
			"* 1 FETCH (FLAGS (\\Recent \\Seen) UID 11 MODSEQ (5))", "* 2 FETCH (FLAGS (\\Recent \\Seen) UID 12 MODSEQ (6))", "* 3 FETCH (FLAGS (\\Recent \\Seen) UID 13 MODSEQ (7))",
			"T4 OK Completed",
		}, claimUIDs, nil, true},
		{"Cyrus: some modified", flagsEchoed, false, []string{
			"* 1 FETCH (FLAGS (\\Seen) UID 11 MODSEQ (8))",
			"T4 OK [MODIFIED 12:13] Completed",
		}, []imap.UID{11}, nil, true},
		{"unknown server: FLAGS cannot be told apart: returned at least once", flagsUnknown, false, []string{
			"* 1 FETCH (FLAGS (\\Seen) UID 11 MODSEQ (5))", "* 2 FETCH (UID 12 MODSEQ (6))",
			"T4 OK [MODIFIED 13] Completed",
		}, []imap.UID{11, 12}, []imap.UID{11}, false},
	} {
		for _, chunk := range []int{1, 7, 4096} {
			ans := tapOf(t, chunk, tc.lines...)
			if !ans.answered {
				t.Fatalf("%s (chunk %d): no tagged answer seen", tc.name, chunk)
			}
			won, unsure, exact := ans.won(claimUIDs, prior, tc.mode, tc.keyed)
			if !slices.Equal(won, tc.won) || !slices.Equal(unsure, tc.unsure) || exact != tc.exact {
				t.Errorf("%s (chunk %d): won %v unsure %v exact %v, want %v %v %v", tc.name, chunk, won, unsure, exact, tc.won, tc.unsure, tc.exact)
			}
		}
	}
}

// Which servers' names say what FLAGS in a STORE's answer mean.
func TestStoreFlagsOf(t *testing.T) {
	for name, want := range map[string]flagsInStore{
		"Dovecot": flagsFromOthers, "Cyrus IMAPD": flagsEchoed, "Courier-IMAP": flagsUnknown, "": flagsUnknown, "Gimap": flagsUnknown,
	} {
		if got := storeFlagsOf(name); got != want {
			t.Errorf("%q: %v, want %v", name, got, want)
		}
	}
}

// A line too long to keep is skipped whole, and the tap keeps nothing
// once disarmed.
func TestModifiedTapBounds(t *testing.T) {
	var tap modifiedTap
	tap.arm()
	long := make([]byte, maxTapLine+10)
	for i := range long {
		long[i] = 'x'
	}
	tap.Write(append([]byte("* 1 FETCH (UID 11 MODSEQ (5) "), long...))
	tap.Write([]byte(")\r\nT4 OK [MODIFIED 13] done\r\n"))
	ans := tap.disarm()
	if _, ok := ans.fetched[11]; ok || !ans.answered || !ans.modified.has(13) || ans.modified.has(12) {
		t.Fatalf("%+v", ans)
	}
	tap.Write([]byte("T9 OK [MODIFIED 1:5] late\r\n"))
	if tap.line != nil || tap.ans.modified.has(3) {
		t.Fatalf("disarmed tap kept %q %+v", tap.line, tap.ans)
	}
}

func TestParseUIDRanges(t *testing.T) {
	r := parseUIDRanges("2:3,7,12:10,40:*")
	for u, want := range map[imap.UID]bool{1: false, 2: true, 3: true, 4: false, 7: true, 9: false, 10: true, 11: true, 12: true, 13: false, 40: true, 1 << 30: true} {
		if r.has(u) != want {
			t.Errorf("has(%d) = %v", u, !want)
		}
	}
}

// The tap's watch counts what the server reports unasked about the folder
// as it arrives (changes), and of that what may have made a message unread
// (gains): new mail, flags without \Seen; not another consumer's \Seen or
// an EXPUNGE, and never the flight's own answers.
func TestTapWatchCountsChanges(t *testing.T) {
	var tap modifiedTap
	feed := func(s string) {
		// In pieces, as the wire brings it.
		for len(s) > 0 {
			n := min(len(s), 7)
			tap.Write([]byte(s[:n]))
			s = s[n:]
		}
	}
	check := func(what string, wantChanges, wantGains int) {
		t.Helper()
		if c, g := tap.unwatch(); c != wantChanges || g != wantGains {
			t.Errorf("%s: %d changes, %d gains; want %d, %d", what, c, g, wantChanges, wantGains)
		}
	}
	tap.watch()
	feed("* STATUS INBOX (MESSAGES 9 UNSEEN 2)\r\n* ESEARCH (TAG \"T5\") UID ALL 2:9 MODSEQ 12\r\nT4 OK NOOP completed.\r\nT5 OK Search completed.\r\n")
	check("the flight's own answers", 0, 0)
	tap.watch()
	feed("* 4 FETCH (MODSEQ (16) FLAGS (\\Seen))\r\n* 3 EXPUNGE\r\nT4 OK NOOP completed.\r\n")
	check("another consumer's \\Seen and an EXPUNGE", 2, 0)
	feed("* 5 FETCH (UID 5 FLAGS ())\r\n") // not watching: not counted
	tap.watch()
	feed("* 5 FETCH (MODSEQ (16) FLAGS (\\Flagged))\r\n* 9 EXISTS\r\n* 6 FETCH (MODSEQ (17))\r\nT7 OK done\r\n")
	check("flags without \\Seen, new mail, a report without flags", 3, 3)
	// A command the gateway writes while an answer's line is half read
	// does not break that line.
	tap.watch()
	tap.Write([]byte("* 7 FETCH (MODSEQ (18) FL"))
	tap.Write([]byte("T8 UID SEARCH RETURN (ALL) UNSEEN MODSEQ 1\r\n"))
	tap.Write([]byte("AGS ())\r\n"))
	check("a report split by a command", 1, 1)
}
