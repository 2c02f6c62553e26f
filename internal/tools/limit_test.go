package tools

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// A call that runs out of its deadline says which one: TOOL_TIMEOUT, or
// the tool's own (a wait's timeout_s plus 10 s), never one it was not.
func TestAdviseNamesTheCallsOwnLimit(t *testing.T) {
	d := &Deps{CallTimeout: time.Minute}
	for _, tc := range []struct {
		limit    callLimit
		want     string
		wantNone string
	}{
		{callLimit{time.Minute, "TOOL_TIMEOUT"}, "the call did not finish within the gateway's limit of 1m0s for one call (TOOL_TIMEOUT); it ran out while waiting for new mail", ""},
		{callLimit{waitForEmail.Timeout(d, waitArgs{TimeoutS: 8}), waitForEmail.TimeoutName},
			"the call did not finish within its limit of 18s (timeout_s plus 10 s); it ran out while waiting for new mail", "TOOL_TIMEOUT"},
	} {
		ctx, cancel := context.WithTimeoutCause(context.WithValue(context.Background(), limitKey{}, tc.limit), 0, errCallTimeout)
		<-ctx.Done()
		got := d.advise(ctx, mailerr.TimedOut(ctx, "waiting for new mail"))
		cancel()
		if got != tc.want || tc.wantNone != "" && strings.Contains(got, tc.wantNone) {
			t.Errorf("%+v: %q, want %q", tc.limit, got, tc.want)
		}
	}
}
