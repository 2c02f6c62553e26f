package agents

// The format of a message between agents. One message is composed per
// send and the same bytes are APPENDed to every recipient's folder, so
// every copy has the same Message-ID (history deduplicates on it):
//
//	From: "backend" <login@example.org>
//	To: "frontend" <login@example.org>, "db" <login@example.org>
//	Subject, Date, Message-ID, In-Reply-To/References (in a conversation)
//	X-Mailbox-Tags: review, urgent              (as the sending tools write them)
//	X-Mailbox-Agent-From: backend
//	X-Mailbox-Agent-To: frontend, db
//	X-Mailbox-Conversation: conv-...            (conversation messages only)
//	X-Mailbox-Conversation-Name: release 1.4
//	X-Mailbox-Participants: backend, db, frontend
//	X-Mailbox-Conversation-Left: db             (a leave notice only)
//
// The address is the login's own (agents share one mailbox); a login that
// is not an address gets LOGIN@agents.invalid (RFC 2606's reserved name:
// never deliverable). The display name is the agent's name, so a mail app
// shows who wrote what.

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// The header fields of agent messages.
const (
	HeaderFrom             = "X-Mailbox-Agent-From"
	HeaderTo               = "X-Mailbox-Agent-To"
	HeaderConversation     = "X-Mailbox-Conversation"
	HeaderConversationName = "X-Mailbox-Conversation-Name"
	HeaderParticipants     = "X-Mailbox-Participants"
	HeaderLeft             = "X-Mailbox-Conversation-Left"
)

// outgoing is one message to deliver, checked.
type outgoing struct {
	from       string
	recipients []string // agents whose folders get a copy, the sender's own included when it keeps one
	to         []string // agents named in To and X-Mailbox-Agent-To
	subject    string
	text       string
	tags       []string
	conv       *convHeaders // nil outside a conversation
	inReplyTo  string
	references []string
	messageID  string // "" generates one
}

// convHeaders are the conversation fields of a message.
type convHeaders struct {
	id, name     string
	participants []string
	left         string
}

// agentAddress is the address every agent of the mailbox writes from.
func agentAddress(creds credentials.Credentials) string {
	user := strings.TrimSpace(creds.User)
	if a, err := mailmsg.ParseAddress("login", user); err == nil {
		return a.Email
	}
	local := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_+", r) {
			return r
		}
		return -1
	}, user)
	if local == "" {
		local = "mailbox"
	}
	return local + "@agents.invalid"
}

// compose renders m.
func (m outgoing) compose(creds credentials.Credentials, date time.Time) ([]byte, string, error) {
	addr := agentAddress(creds)
	d := mailmsg.Draft{
		From:    mailmsg.Address{Name: m.from, Email: addr},
		Subject: m.subject, Text: m.text, Tags: m.tags, Date: date,
		InReplyTo: m.inReplyTo, References: m.references, MessageID: m.messageID,
	}
	for _, n := range m.to {
		d.To = append(d.To, mailmsg.Address{Name: n, Email: addr})
	}
	fields := []mailmsg.Field{{Name: HeaderFrom, Value: m.from}}
	if len(m.to) > 0 {
		fields = append(fields, mailmsg.Field{Name: HeaderTo, Value: strings.Join(m.to, ", ")})
	}
	if c := m.conv; c != nil {
		fields = append(fields,
			mailmsg.Field{Name: HeaderConversation, Value: c.id},
			mailmsg.Field{Name: HeaderConversationName, Value: c.name},
			mailmsg.Field{Name: HeaderParticipants, Value: strings.Join(c.participants, ", ")})
		if c.left != "" {
			fields = append(fields, mailmsg.Field{Name: HeaderLeft, Value: c.left})
		}
	}
	return mailmsg.ComposeWith(d, fields)
}

// Delivered is one copy of a message.
type Delivered struct {
	Agent   string `json:"agent" desc:"the agent whose folder got the copy"`
	Folder  string `json:"folder" desc:"its folder"`
	UID     uint32 `json:"uid,omitempty" desc:"the copy's UID in that folder, when the server says"`
	Created bool   `json:"created,omitempty" desc:"true: the folder did not exist and was created for this message (the agent gets it when it first comes)"`
	Own     bool   `json:"own,omitempty" desc:"true: the sender's own copy (a conversation's messages go to every participant), stored as read"`
}

// Sent is what a delivery did.
type Sent struct {
	MessageID    string      `json:"message_id" desc:"the Message-ID (without angle brackets), the same in every copy"`
	Conversation string      `json:"conversation,omitempty" desc:"the conversation the message belongs to"`
	Delivered    []Delivered `json:"delivered" desc:"every copy made: agent, folder, UID, and whether the folder was created for it"`
}

// deliver composes m once and APPENDs it to each recipient's folder
// (created when missing); the sender's own copy is \Seen. Everything about
// m has been checked before: a failure here is the server's.
func (s *Service) deliver(ctx context.Context, creds credentials.Credentials, m outgoing) (*Sent, error) {
	date := time.Now()
	raw, id, err := m.compose(creds, date)
	if err != nil {
		return nil, err
	}
	out := &Sent{MessageID: id, Delivered: make([]Delivered, 0, len(m.recipients))}
	if m.conv != nil {
		out.Conversation = m.conv.id
	}
	var to []mailbox.Delivery
	for _, name := range m.recipients {
		folder, created, err := s.Folder(ctx, creds, name)
		if err != nil {
			return nil, err
		}
		own := name == m.from
		out.Delivered = append(out.Delivered, Delivered{Agent: name, Folder: folder, Created: created, Own: own})
		to = append(to, mailbox.Delivery{Folder: folder, Seen: own})
	}
	uids, err := s.mb.AppendEach(ctx, creds, raw, date, to)
	for i, u := range uids {
		out.Delivered[i].UID = u
	}
	if err != nil {
		if len(uids) == 0 {
			return nil, err
		}
		done := make([]string, len(uids))
		for i := range uids {
			done[i] = out.Delivered[i].Agent
		}
		return nil, mailerr.Wrap(mailerr.KindOf(err), err, fmt.Sprintf("%s; the message (Message-ID <%s>) was delivered to %s only", mailerr.Message(err), id, strings.Join(done, ", ")))
	}
	return out, nil
}

// checkNames checks every name of arg ("to", "participants") and returns
// them sorted without repeats; the sentence names the argument and the
// position, never the value.
func checkNames(arg string, names []string) ([]string, error) {
	var out []string
	for i, n := range names {
		if err := CheckName(n); err != nil {
			return nil, mailerr.New(mailerr.BadInput, fmt.Sprintf("%s[%d] is not an agent name: %s", arg, i, mailerr.Message(err)))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// checkCaller refuses a call without the caller's agent name.
func checkCaller(caller string) error {
	if caller == "" {
		return mailerr.New(mailerr.BadInput, "this needs the caller's agent name: send the x-mailbox-agent header, add ?agent=NAME to the MCP URL, or use a credentials token made with an agent")
	}
	return CheckName(caller)
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newConversationID draws a conversation id: "conv-" and 16 characters
// from 80 random bits.
func newConversationID() string {
	b := make([]byte, 10)
	if _, err := rand.Read(b); err != nil {
		panic("agents: no randomness for a conversation id: " + err.Error())
	}
	return "conv-" + idEncoding.EncodeToString(b)
}

// checkConversationID refuses what cannot be a conversation id (it goes
// into a header and a search).
func checkConversationID(id string) error {
	if id == "" || len(id) > 64 {
		return mailerr.New(mailerr.BadInput, "conversation must be the id a conversation was created with (e.g. conv-abcdefgh23456789)")
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return mailerr.New(mailerr.BadInput, "conversation must be the id a conversation was created with (e.g. conv-abcdefgh23456789)")
		}
	}
	return nil
}

// splitNames reads a comma-separated header list of agent names, keeping
// only valid ones.
func splitNames(v string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		if CheckName(f) == nil && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}
