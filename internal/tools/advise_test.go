package tools

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Retry advice is added in one place (advise), once, and never where the
// message may already have gone out: a send without an idempotency_key
// sent again could be delivered twice.
func TestAdviceToTryAgainIsTrueAndSaidOnce(t *testing.T) {
	d := &Deps{Log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		name string
		err  error
		want string // the whole sentence the caller gets
	}{
		{"broken before the dot", mailerr.New(mailerr.Unavailable, "the connection to the mail server broke; nothing was sent"),
			"the connection to the mail server broke; nothing was sent; try again later"},
		{"server's temporary refusal", mailerr.New(mailerr.Temporary, "temporary failure (451 4.3.0 queue full); nothing was sent"),
			"temporary failure (451 4.3.0 queue full); nothing was sent; try again later"},
		{"lost answer after the dot", mailerr.New(mailerr.Unavailable, "the connection to the mail server broke before it confirmed the message; the whole message had been transmitted, so it may have been sent; its copy is UID 7 in Sent, flagged for checking (Message-ID <x@y>). Sending it again may deliver it twice: check with the recipients first (a send with an idempotency_key can be retried safely)"),
			"the connection to the mail server broke before it confirmed the message; the whole message had been transmitted, so it may have been sent; its copy is UID 7 in Sent, flagged for checking (Message-ID <x@y>). Sending it again may deliver it twice: check with the recipients first (a send with an idempotency_key can be retried safely)"},
		{"timeout after the dot", mailerr.New(mailerr.Timeout, "the mail server did not answer in time while waiting for the SMTP server to confirm the message; the whole message had been transmitted, so it may have been sent"),
			"the mail server did not answer in time while waiting for the SMTP server to confirm the message; the whole message had been transmitted, so it may have been sent"},
		{"the layer below says when", mailerr.New(mailerr.Temporary, "the mail server refused: the mailbox is in use; try again shortly"),
			"the mail server refused: the mailbox is in use; try again shortly"},
		{"busy pool", mailerr.New(mailerr.Busy, "the gateway is busy (all mail connections are in use); retry in a few seconds"),
			"the gateway is busy (all mail connections are in use); retry in a few seconds"},
		{"a send under way", mailerr.New(mailerr.Temporary, "a send with this idempotency_key is under way in another request on this gateway; this call sent nothing. Call again with the same idempotency_key to learn whether it went out"),
			"a send with this idempotency_key is under way in another request on this gateway; this call sent nothing. Call again with the same idempotency_key to learn whether it went out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.fail(context.Background(), tc.err).Text; got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// When the call's own limit ends a send, the sentence names that limit and
// keeps what the layers below said after their first clause: whether the
// message went out and where its copy is.
func TestCallLimitKeepsWhatWasSent(t *testing.T) {
	d := &Deps{Log: slog.New(slog.DiscardHandler), CallTimeout: 5 * time.Second}
	ctx, cancel := context.WithTimeoutCause(context.WithValue(context.Background(), limitKey{}, callLimit{5 * time.Second, "TOOL_TIMEOUT"}), time.Nanosecond, errCallTimeout)
	defer cancel()
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), errCallTimeout) {
		t.Fatal("the context's cause is not the call's limit")
	}
	err := mailerr.TimedOut(ctx, "waiting for the SMTP server to confirm the message")
	err.Msg += "; the whole message had been transmitted, so it may have been sent; its copy is UID 9 in Sent, flagged for checking"
	got := d.fail(ctx, err).Text
	want := "the call did not finish within the gateway's limit of 5s for one call (TOOL_TIMEOUT); it ran out while waiting for the SMTP server to confirm the message; the whole message had been transmitted, so it may have been sent; its copy is UID 9 in Sent, flagged for checking"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if strings.Contains(got, "try again") {
		t.Errorf("advice to try again after a send that may have gone out: %q", got)
	}
}
