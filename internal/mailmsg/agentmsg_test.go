package mailmsg

import (
	"bytes"
	"strings"
	"testing"

	"github.com/emersion/go-message/mail"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

func TestComposeWith(t *testing.T) {
	long := strings.TrimSuffix(strings.Repeat("agent-name, ", 40), ", ")
	raw, id, err := ComposeWith(Draft{From: Address{Name: "backend", Email: "u@example.test"}, Subject: "s", Text: "hi"},
		[]Field{{"X-Mailbox-Agent-To", long}, {"X-Mailbox-Conversation-Name", "Größe ändern"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\r\n") {
		if len(l) > 78 {
			t.Errorf("line of %d: %q", len(l), l)
		}
	}
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := mr.Header.MessageID()
	name, _ := mr.Header.Text("X-Mailbox-Conversation-Name")
	if got != id || mr.Header.Get("X-Mailbox-Agent-To") != long || name != "Größe ändern" {
		t.Fatalf("header %v", mr.Header.Map())
	}
	if _, _, err := ComposeWith(Draft{From: Address{Email: "u@example.test"}}, []Field{{"X-A", "a\r\nBcc: x@y"}}); mailerr.KindOf(err) != mailerr.BadInput {
		t.Fatalf("injection: %v", err)
	}
}

func TestCheckTags(t *testing.T) {
	if got, err := CheckTags([]string{"a", "b", "a"}); err != nil || strings.Join(got, ",") != "a,b" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := CheckTags(make([]string, MaxTags+1)); err == nil {
		t.Fatal("too many tags accepted")
	}
	if _, err := CheckTags([]string{"Bad Tag"}); err == nil {
		t.Fatal("bad tag accepted")
	}
}
