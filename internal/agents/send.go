package agents

import (
	"context"
	"slices"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Everyone, alone in Message.To, sends to every agent of the mailbox but
// the sender.
const Everyone = "*"

// Message is a message from one agent to others of the same mailbox.
type Message struct {
	From    string   // the sending agent (the caller)
	To      []string // agent names, or just Everyone; empty with Conversation
	Subject string
	Text    string
	Tags    []string
	// Conversation, when set, continues that conversation: the message
	// goes to its current participants, threaded.
	Conversation string
}

// Send delivers m by APPEND into each recipient's folder (no SMTP),
// creating folders that do not exist yet. Everything is checked before
// the first APPEND: a bad name, tag or subject changes nothing.
func (s *Service) Send(ctx context.Context, creds credentials.Credentials, m Message) (*Sent, error) {
	out, err := s.prepare(ctx, creds, m)
	if err != nil {
		return nil, err
	}
	return s.deliver(ctx, creds, out)
}

func (s *Service) prepare(ctx context.Context, creds credentials.Credentials, m Message) (outgoing, error) {
	var out outgoing
	if err := checkCaller(m.From); err != nil {
		return out, err
	}
	tags, err := mailmsg.CheckTags(m.Tags)
	if err != nil {
		return out, err
	}
	if strings.TrimSpace(m.Text) == "" {
		return out, mailerr.New(mailerr.BadInput, "text is required: the message's body")
	}
	if err := mailmsg.CheckHeaderValue("subject", m.Subject); err != nil {
		return out, err
	}
	out = outgoing{from: m.From, subject: strings.TrimSpace(m.Subject), text: m.Text, tags: tags}
	if m.Conversation != "" {
		if len(m.To) > 0 {
			return out, mailerr.New(mailerr.BadInput, "give either to or conversation, not both: a conversation's message goes to all its participants")
		}
		st, err := s.conversation(ctx, creds, m.From, m.Conversation)
		if err != nil {
			return out, err
		}
		if out.subject == "" {
			out.subject = mailmsg.ReplySubject(st.name)
		}
		st.address(&out)
		return out, nil
	}
	switch {
	case len(m.To) == 0:
		return out, mailerr.New(mailerr.BadInput, "to: name at least one agent, or \"*\" for every agent of the mailbox")
	case slices.Contains(m.To, Everyone):
		if len(m.To) > 1 {
			return out, mailerr.New(mailerr.BadInput, "to: \"*\" (every agent) must be alone")
		}
		all, err := s.Names(ctx, creds)
		if err != nil {
			return out, err
		}
		out.to = slices.DeleteFunc(all, func(n string) bool { return n == m.From })
		if len(out.to) == 0 {
			return out, mailerr.New(mailerr.NotFound, "there is no other agent in this mailbox yet (none has a folder): name the recipient, and its folder is created for it")
		}
	default:
		if out.to, err = checkNames("to", m.To); err != nil {
			return out, err
		}
	}
	out.recipients = out.to
	return out, nil
}

// Names lists the agents of the mailbox: those with a folder under the
// root, in name order. The gateway's own folders (a leading '.') are not
// agents.
func (s *Service) Names(ctx context.Context, creds credentials.Credentials) ([]string, error) {
	ns, err := s.mb.Namespace(ctx, creds)
	if err != nil {
		return nil, err
	}
	folders, err := s.mb.FolderNames(ctx, creds, s.pattern(ns))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range folders {
		if n, ok := s.NameOf(ns, f); ok && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// pattern is the LIST pattern of the agents' folders: the root's direct
// children.
func (s *Service) pattern(ns mailbox.Namespace) string {
	return strings.TrimSuffix(s.FolderOf(ns, "x"), "x") + "%"
}
