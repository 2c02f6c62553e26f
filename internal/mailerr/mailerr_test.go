package mailerr

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

func TestTimedOutNamesTheStep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	e := TimedOut(ctx, "logging in to the mail server")
	if e.Kind != Timeout || e.Step != "logging in to the mail server" ||
		e.Msg != "the mail server did not answer in time while logging in to the mail server" {
		t.Fatalf("%+v", e)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if e := TimedOut(ctx, "searching"); e.Msg != "the request was cancelled while searching" || StepOf(e) != "searching" {
		t.Fatalf("%+v", e)
	}
}

func TestCauseClasses(t *testing.T) {
	recorded := Wrap(Unavailable, errors.New("x509"), "tls problem")
	recorded.Cause = "tls"
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{recorded, "tls"},
		{Wrap(Internal, recorded, "outer"), "tls"},
		{New(Auth, "authentication failed"), "auth"},
		{context.DeadlineExceeded, "timeout"},
		{Wrap(Unavailable, io.EOF, "closed"), "closed"},
		{errors.New("something else"), ""},
	} {
		if got := Cause(tc.err); got != tc.want {
			t.Errorf("Cause(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestMessageHidesUnclassifiedErrors(t *testing.T) {
	if got := Message(errors.New("server said: password hunter2 rejected")); got != "internal error; the gateway's log has the details" {
		t.Fatalf("%q", got)
	}
	if got := Message(New(NotFound, "folder \"X\" does not exist").About(SubjectFolder)); got != "folder \"X\" does not exist" {
		t.Fatalf("%q", got)
	}
}
