package mailbox

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

func TestParseSenderHeader(t *testing.T) {
	for _, tc := range []struct {
		block       string
		email, name string
		tags        []string
	}{
		{"From: Ann Lee <ann@example.org>\r\nX-Mailbox-Tags: Review, ops\r\n\r\n", "ann@example.org", "Ann Lee", []string{"review", "ops"}},
		{"X-Mailbox-Tags: a\r\nFrom: =?utf-8?q?J=C3=BCrgen?= <j@example.org>\r\nX-Mailbox-Tags: b\r\n\r\n", "j@example.org", "Jürgen", []string{"a", "b"}},
		{"From: not an address\r\n\r\n", "not an address", "", nil},
		{"\r\n", "", "", nil},
	} {
		a, tags := parseSenderHeader([]byte(tc.block))
		email, name := "", ""
		if a != nil {
			email, name = a.Email, a.Name
		}
		if email != tc.email || name != tc.name || !slices.Equal(tags, tc.tags) {
			t.Errorf("%q: %q %q %q", tc.block, email, name, tags)
		}
	}
}

func TestSenderCounterTop(t *testing.T) {
	s := senderCounter{}
	for _, a := range []*Address{{Email: "b@x"}, {Email: "A@x", Name: "Ann"}, {Email: "a@x"}, {Email: "c@x"}, {Email: "b@x", Name: "Bo"}, nil} {
		s.add(a)
	}
	got := fmt.Sprint(s.top(3))
	if want := "[{A@x Ann 2} {b@x Bo 2} {  1}]"; got != want {
		t.Errorf("top: %s, want %s", got, want)
	}
}

// Peek, consume (at least once: this server has no CONDSTORE) and thread
// against the in-process server.
func TestPeekConsumeThreadInProcess(t *testing.T) {
	c, creds, add := memServer(t)
	ctx := context.Background()
	add("From: Ann <ann@example.org>\nSubject: Plan\nMessage-ID: <p1@x>\nX-Mailbox-Tags: job\n\nfirst\n")
	add("From: Bo <bo@example.org>\nSubject: Re: Plan\nMessage-ID: <p2@x>\nIn-Reply-To: <p1@x>\nReferences: <p1@x>\nX-Mailbox-Tags: job-old\n\nsecond\n")
	add("From: Ann <ann@example.org>\nSubject: Re: Plan\nMessage-ID: <p3@x>\nIn-Reply-To: <p2@x>\nReferences: <p1@x> <p2@x>\n\nthird\n")
	add("From: Cy <cy@example.org>\nSubject: Re: Plan\nMessage-ID: <other@x>\n\nnot in the thread\n")

	p, err := c.Peek(ctx, creds, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 4 || p.Unread != 4 || p.NextSinceUID != 4 || len(p.BySender) != 3 || p.BySender[0].From != "ann@example.org" || p.BySender[0].Unread != 2 {
		t.Fatalf("peek: %+v", p)
	}
	if p, err = c.Peek(ctx, creds, "INBOX", "job"); err != nil || p.Total != 1 || p.Unread != 1 {
		t.Fatalf("peek by tag: %+v %v", p, err)
	}

	got, err := c.Consume(ctx, creds, ConsumeOptions{Tag: "job"})
	if err != nil {
		t.Fatal(err)
	}
	if got.ExactlyOnce || len(got.Messages) != 1 || got.Messages[0].UID != 1 || got.Messages[0].Text != "first" {
		t.Fatalf("consume: %+v", got)
	}
	if p, _ = c.Peek(ctx, creds, "", ""); p.Unread != 3 {
		t.Fatalf("after consume: %+v", p)
	}

	th, err := c.Thread(ctx, creds, "INBOX", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uids []uint32
	for _, m := range th.Messages {
		uids = append(uids, m.UID)
	}
	if !slices.Equal(uids, []uint32{1, 2, 3}) || th.Messages[2].Snippet != "third" || th.Messages[1].InReplyTo != "p1@x" {
		t.Fatalf("thread: %v %+v", uids, th)
	}
}
