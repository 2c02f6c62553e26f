package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseRTTs(t *testing.T) {
	got, err := parseRTTs("0, 20,40")
	if err != nil || len(got) != 3 || got[1] != 20*time.Millisecond || got[2] != 40*time.Millisecond {
		t.Fatalf("parseRTTs: %v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "-1", "20,,40", "5000"} {
		if _, err := parseRTTs(bad); err == nil {
			t.Errorf("parseRTTs(%q): no error", bad)
		}
	}
}

func TestRTTToolsOf(t *testing.T) {
	all, err := rttToolsOf(nil)
	if err != nil || !slices.Equal(all, rttTools) {
		t.Fatalf("no -tools: %v, %v", all, err)
	}
	got, err := rttToolsOf(map[string]bool{toolAttachment: true, toolList: true})
	if want := []string{toolList, toolAttachment}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("-tools %v: %v, %v; want %v (rttTools' order)", want, got, err, want)
	}
	if _, err := rttToolsOf(map[string]bool{"imap_no_such_tool": true}); err == nil {
		t.Fatal("an unknown tool: no error")
	}
}

func TestFmtRT(t *testing.T) {
	for _, c := range []struct {
		rts  []int
		want string
	}{
		{nil, "–"},
		{[]int{4, 4, 4}, "4"},
		{[]int{6, 4, 4, 5}, "4 (4–6)"}, // median of an even count: the lower middle
		{[]int{7, 5, 6}, "6 (5–7)"},
	} {
		if got := fmtRT(c.rts); got != c.want {
			t.Errorf("fmtRT(%v) = %q, want %q", c.rts, got, c.want)
		}
	}
}

func cellOf(rts []int, lat ...time.Duration) rttCell {
	var c rttCell
	for i, d := range lat {
		c.add(d, rts[i], nil)
	}
	return c
}

// The table the run writes is the table the smoke's guard reads.
func TestRTTTableRoundTrip(t *testing.T) {
	ms := time.Millisecond
	rows := []*rttRow{
		{tool: toolList, warmGW: cellOf([]int{1, 2, 1}, 3*ms, 4*ms, 5*ms), warmDirect: cellOf([]int{1}, 2*ms), warmLean: cellOf([]int{1}, 3*ms),
			coldGW: cellOf([]int{4, 4}, 30*ms, 31*ms), coldDirect: cellOf([]int{5}, 40*ms)},
		{tool: toolThread, warmGW: cellOf([]int{9}, 200*ms), warmDirect: cellOf([]int{2}, 40*ms),
			coldGW: cellOf([]int{12, 13}, 250*ms, 260*ms), coldDirect: cellOf([]int{6}, 120*ms)},
	}
	table := rttTable(0, rows)
	if !strings.Contains(table, "| imap_list_emails | 4.00 / 5.00 | 2.00 / 2.00 | 2.00 × | 3.00, 1.50 × | 1 (1–2) / 1 | 30.0 / 31.0 | 40.0 / 40.0 | 0.75 × | 4 / 5 |") {
		t.Fatalf("table:\n%s", table)
	}
	md := "intro\n" + rttBeginMarker + "\n" + table + "\n" + rttTable(20*ms, rows) + "\n" + rttEndMarker + "\n## CI\n"
	got, err := parseRTTCommitted(md)
	if err != nil {
		t.Fatal(err)
	}
	if got[toolList] != (rtGuardFigures{1, 4}) || got[toolThread] != (rtGuardFigures{9, 12}) || len(got) != 2 {
		t.Fatalf("parseRTTCommitted: %v", got)
	}
	if _, err := parseRTTCommitted("no section"); err == nil {
		t.Error("parseRTTCommitted without markers: no error")
	}
	if _, err := parseRTTCommitted(rttBeginMarker + "\n" + strings.Replace(table, colWarmRT, "warm", 1) + rttEndMarker); err == nil {
		t.Error("parseRTTCommitted without the warm column: no error")
	}
}

func TestRTGuard(t *testing.T) {
	committed := map[string]rtGuardFigures{toolList: {1, 4}, toolThread: {9, 12}}
	// The smoke's figure is the fewest of its samples.
	smoke := rtGuardSmoke([]*rttRow{
		{tool: toolList, warmGW: cellOf([]int{2, 1}, time.Millisecond, time.Millisecond), coldGW: cellOf([]int{4}, time.Millisecond)},
		{tool: toolThread, warmGW: cellOf([]int{8}, time.Millisecond), coldGW: cellOf([]int{12}, time.Millisecond)},
	})
	if _, err := rtGuardVerdict(committed, smoke); err != nil {
		t.Fatalf("equal or fewer round trips failed: %v", err)
	}
	smoke[toolThread] = rtGuardFigures{9, 13}
	table, err := rtGuardVerdict(committed, smoke)
	if err == nil || !strings.Contains(err.Error(), "imap_get_thread: warm 9 (committed 9), cold 13 (committed 12)") || !strings.Contains(table, "| FAIL |") {
		t.Fatalf("a rise passed: %v\n%s", err, table)
	}
	delete(smoke, toolThread)
	if _, err := rtGuardVerdict(committed, smoke); err == nil {
		t.Error("a tool the smoke did not measure passed")
	}
}

func TestRTTTargetsFresh(t *testing.T) {
	tg := &rttTargets{next: map[string]uint32{}}
	seen := map[uint32]bool{}
	for range 5 {
		for _, tool := range []string{toolFlags, toolMove} {
			uid := tg.take("a", tool)
			if seen[uid] {
				t.Fatalf("UID %d handed out twice", uid)
			}
			seen[uid] = true
		}
	}
	if tg.take("b", toolFlags) != 1 || tg.take("b", toolMove) != rttSeed {
		t.Error("a second user does not start afresh")
	}
}
