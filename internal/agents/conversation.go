package agents

// Group conversations. A conversation is a mail thread whose every
// message goes to every participant's folder, the sender's own included
// (as read), so any participant's folder holds the whole of it from the
// time it joined. Its state lives in the messages themselves: the id and
// name in every message, and the participants as the newest message lists
// them (X-Mailbox-Participants): leaving is a message whose list no
// longer has the leaver. Nothing is kept anywhere else.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// MaxConversationName is the longest conversation name, in characters.
const MaxConversationName = 200

// History limits.
const (
	DefaultHistory = 50
	MaxHistory     = 200
	// historyTextChars is how much of each message's text history shows.
	historyTextChars = 2000
)

// convFields are the header fields a conversation's state is read from.
var convFields = []string{"Message-ID", "Subject", HeaderConversationName, HeaderParticipants, HeaderFrom, HeaderLeft}

// convState is a conversation as one folder's messages show it.
type convState struct {
	id, name       string
	participants   []string
	rootID, lastID string
	messages       int
	unread         int
	last           time.Time
}

// address makes out a message of the conversation: to every participant
// (the sender's own copy read), threaded after its newest message.
func (st convState) address(out *outgoing) {
	out.recipients = st.participants
	out.to = slices.DeleteFunc(slices.Clone(st.participants), func(n string) bool { return n == out.from })
	out.conv = &convHeaders{id: st.id, name: st.name, participants: st.participants}
	out.inReplyTo = st.lastID
	if st.rootID != "" {
		out.references = []string{st.rootID}
	}
}

// stateOf reads a conversation's state from its messages in one folder,
// oldest first.
func stateOf(id string, msgs []mailbox.HeaderMessage) convState {
	st := convState{id: id}
	seen := map[string]bool{}
	for _, m := range msgs {
		mid := strings.Trim(m.Header["message-id"], "<> ")
		if mid != "" && seen[mid] {
			continue
		}
		seen[mid] = true
		st.messages++
		if !m.Seen {
			st.unread++
		}
		if st.rootID == "" {
			st.rootID = mid
		}
		if mid != "" {
			st.lastID = mid
		}
		if n := m.Header[strings.ToLower(HeaderConversationName)]; n != "" && st.name == "" {
			st.name = n
		}
		if p, ok := m.Header[strings.ToLower(HeaderParticipants)]; ok {
			st.participants = splitNames(p)
		}
		if m.Date.After(st.last) {
			st.last = m.Date
		}
	}
	slices.Sort(st.participants)
	return st
}

// folderOf is agent name's folder, without creating it.
func (s *Service) folderOf(ctx context.Context, creds credentials.Credentials, name string) (string, error) {
	ns, err := s.mb.Namespace(ctx, creds)
	if err != nil {
		return "", err
	}
	return s.FolderOf(ns, name), nil
}

// convMessages are the messages of conversation id in folder (id "": of
// every conversation), oldest first; a folder that does not exist has none.
func (s *Service) convMessages(ctx context.Context, creds credentials.Credentials, folder, id string, textChars int) ([]mailbox.HeaderMessage, error) {
	msgs, err := s.mb.FindByHeader(ctx, creds, folder, mailbox.HeaderMatch{Name: HeaderConversation, Value: id}, convFields, textChars)
	if mailerr.KindOf(err) == mailerr.NotFound {
		return nil, nil
	}
	return msgs, err
}

// conversation is conversation id as caller's folder shows it; caller must
// be one of its participants.
func (s *Service) conversation(ctx context.Context, creds credentials.Credentials, caller, id string) (convState, error) {
	if err := checkConversationID(id); err != nil {
		return convState{}, err
	}
	folder, err := s.folderOf(ctx, creds, caller)
	if err != nil {
		return convState{}, err
	}
	msgs, err := s.convMessages(ctx, creds, folder, id, 0)
	if err != nil {
		return convState{}, err
	}
	if len(msgs) == 0 {
		return convState{}, noConversation(id)
	}
	st := stateOf(id, msgs)
	if !slices.Contains(st.participants, caller) {
		return convState{}, mailerr.Newf(mailerr.BadInput, "the caller is not a participant of conversation %s (it left, or was never in it); nothing was sent", id)
	}
	return st, nil
}

func noConversation(id string) error {
	return mailerr.Newf(mailerr.NotFound, "no conversation %s in the caller's folder (it was never in it, or its messages were pruned); nothing was sent", id)
}

// CreateConversation starts a conversation called name among participants
// and creator: a first message (subject: the name) to every participant's
// folder. The result's Conversation is its id.
func (s *Service) CreateConversation(ctx context.Context, creds credentials.Credentials, creator, name string, participants []string) (*Sent, error) {
	if err := checkCaller(creator); err != nil {
		return nil, err
	}
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return nil, mailerr.New(mailerr.BadInput, "name is required: what the conversation is about, shown as its subject")
	case len([]rune(name)) > MaxConversationName:
		return nil, mailerr.Newf(mailerr.BadInput, "name is longer than %d characters", MaxConversationName)
	}
	if err := mailmsg.CheckHeaderValue("name", name); err != nil {
		return nil, err
	}
	names, err := checkNames("participants", participants)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(names, creator) {
		names = append(names, creator)
		slices.Sort(names)
	}
	if len(names) < 2 {
		return nil, mailerr.New(mailerr.BadInput, "participants: name at least one agent besides the caller")
	}
	out := outgoing{from: creator, subject: name,
		text: fmt.Sprintf("%s started the conversation %q with %s.", creator, name, strings.Join(names, ", "))}
	convState{id: newConversationID(), name: name, participants: names}.address(&out)
	return s.deliver(ctx, creds, out)
}

// LeaveConversation takes caller out of conversation id: a notice to every
// participant (the caller's own copy read) listing the others only, after
// which messages to the conversation no longer reach the caller.
func (s *Service) LeaveConversation(ctx context.Context, creds credentials.Credentials, caller, id string) (*Sent, error) {
	if err := checkCaller(caller); err != nil {
		return nil, err
	}
	st, err := s.conversation(ctx, creds, caller, id)
	if err != nil {
		return nil, err
	}
	out := outgoing{from: caller, subject: mailmsg.ReplySubject(st.name), text: fmt.Sprintf("%s left the conversation.", caller)}
	st.address(&out)
	remaining := slices.DeleteFunc(slices.Clone(st.participants), func(n string) bool { return n == caller })
	out.conv.participants, out.conv.left = remaining, caller
	return s.deliver(ctx, creds, out)
}

// Conversation is one conversation as the caller's folder shows it.
type Conversation struct {
	ID           string    `json:"id" desc:"the conversation id"`
	Name         string    `json:"name" desc:"its name"`
	Participants []string  `json:"participants" desc:"its current participants"`
	Messages     int       `json:"messages" desc:"how many of its messages are in the caller's folder"`
	Unread       int       `json:"unread" desc:"how many of those are unread"`
	LastActivity time.Time `json:"last_activity" desc:"when its newest message arrived"`
}

// Conversations lists the conversations caller is in, newest activity
// first, from its own folder.
func (s *Service) Conversations(ctx context.Context, creds credentials.Credentials, caller string) ([]Conversation, error) {
	if err := checkCaller(caller); err != nil {
		return nil, err
	}
	folder, err := s.folderOf(ctx, creds, caller)
	if err != nil {
		return nil, err
	}
	msgs, err := s.convMessages(ctx, creds, folder, "", 0)
	if err != nil {
		return nil, err
	}
	byID := map[string][]mailbox.HeaderMessage{}
	for _, m := range msgs {
		id := m.Header[strings.ToLower(HeaderConversation)]
		if checkConversationID(id) == nil {
			byID[id] = append(byID[id], m)
		}
	}
	out := []Conversation{}
	for id, ms := range byID {
		st := stateOf(id, ms)
		if !slices.Contains(st.participants, caller) {
			continue
		}
		out = append(out, Conversation{ID: id, Name: st.name, Participants: st.participants, Messages: st.messages, Unread: st.unread, LastActivity: st.last})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastActivity.After(out[j].LastActivity) })
	return out, nil
}

// HistoryEntry is one message of a conversation.
type HistoryEntry struct {
	From      string    `json:"from" desc:"the agent that wrote it"`
	Date      time.Time `json:"date" desc:"when it arrived"`
	Subject   string    `json:"subject" desc:"its subject"`
	Text      string    `json:"text" desc:"the start of its text"`
	MessageID string    `json:"message_id" desc:"its Message-ID"`
	Left      string    `json:"left,omitempty" desc:"set on a notice that this agent left the conversation"`
	Unread    bool      `json:"unread" desc:"true: not read yet in the folder it was read from"`
	UID       uint32    `json:"uid" desc:"its UID in that folder"`
}

// History is a conversation's messages.
type History struct {
	Conversation string         `json:"conversation" desc:"the conversation id"`
	Name         string         `json:"name" desc:"its name"`
	Participants []string       `json:"participants" desc:"its current participants"`
	Folder       string         `json:"folder" desc:"the folder the history was read from"`
	Messages     []HistoryEntry `json:"messages" desc:"its messages, oldest first (the newest ones when there are more than the limit)"`
	Earlier      int            `json:"earlier,omitempty" desc:"how many older messages were left out by the limit"`
}

// History returns the last limit messages of conversation id, oldest
// first, one per Message-ID, read from caller's folder; without a caller
// name, from the first agent folder (in name order) that has it.
// Reading changes nothing.
func (s *Service) History(ctx context.Context, creds credentials.Credentials, caller, id string, limit int) (*History, error) {
	switch {
	case limit == 0:
		limit = DefaultHistory
	case limit < 1 || limit > MaxHistory:
		return nil, mailerr.Newf(mailerr.BadInput, "limit must be between 1 and %d", MaxHistory)
	}
	if err := checkConversationID(id); err != nil {
		return nil, err
	}
	candidates := []string{caller}
	if caller == "" {
		var err error
		if candidates, err = s.Names(ctx, creds); err != nil {
			return nil, err
		}
	} else if err := CheckName(caller); err != nil {
		return nil, err
	}
	for _, name := range candidates {
		folder, err := s.folderOf(ctx, creds, name)
		if err != nil {
			return nil, err
		}
		msgs, err := s.convMessages(ctx, creds, folder, id, historyTextChars)
		if err != nil {
			return nil, err
		}
		if len(msgs) == 0 {
			continue
		}
		return historyOf(id, folder, msgs, limit), nil
	}
	return nil, mailerr.Newf(mailerr.NotFound, "no conversation %s in the agents' folders", id)
}

func historyOf(id, folder string, msgs []mailbox.HeaderMessage, limit int) *History {
	st := stateOf(id, msgs)
	h := &History{Conversation: id, Name: st.name, Participants: st.participants, Folder: folder, Messages: []HistoryEntry{}}
	seen := map[string]bool{}
	for _, m := range msgs {
		mid := strings.Trim(m.Header["message-id"], "<> ")
		if mid != "" && seen[mid] {
			continue
		}
		seen[mid] = true
		h.Messages = append(h.Messages, HistoryEntry{
			From: m.Header[strings.ToLower(HeaderFrom)], Date: m.Date, Subject: m.Header["subject"],
			Text: m.Text, MessageID: mid, Left: m.Header[strings.ToLower(HeaderLeft)], Unread: !m.Seen, UID: m.UID,
		})
	}
	if n := len(h.Messages); n > limit {
		h.Earlier = n - limit
		h.Messages = h.Messages[n-limit:]
	}
	return h
}
