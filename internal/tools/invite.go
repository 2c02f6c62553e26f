package tools

import (
	"context"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/invite"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
)

type respondInviteArgs struct {
	Folder         string `json:"folder" max:"1000" desc:"Folder of the invitation (default INBOX)."`
	UID            uint32 `json:"uid" required:"true" min:"1" desc:"UID of the message carrying the invitation (imap_read_email shows it as invite)."`
	Response       string `json:"response" required:"true" enum:"accept,decline,tentative" desc:"The answer: accept, decline or tentative."`
	Comment        string `json:"comment" max:"2000" desc:"Optional note to the organizer, sent with the answer (\"I'll be ten minutes late\")."`
	IdempotencyKey string `json:"idempotency_key" max:"200" desc:"Optional key that makes the answer go out at most once (as for smtp_send_email)."`
}

var partstats = map[string]string{"accept": invite.Accepted, "decline": invite.Declined, "tentative": invite.Tentative}

func (a respondInviteArgs) answer() (outbox.InviteAnswer, error) {
	ps, ok := partstats[strings.ToLower(strings.TrimSpace(a.Response))]
	if !ok {
		return outbox.InviteAnswer{}, badArg("response must be accept, decline or tentative (got %q)", line(a.Response))
	}
	return outbox.InviteAnswer{Folder: a.Folder, UID: a.UID, Response: ps, Comment: a.Comment, IdempotencyKey: a.IdempotencyKey}, nil
}

var respondInvite = Def[respondInviteArgs, SendResult]{
	Name:  "smtp_respond_invite",
	Title: "Answer meeting invitation",
	Describe: func(d *Deps) string {
		return "Answer a meeting invitation (a message whose imap_read_email result has invite with method REQUEST): accept, decline or tentative. " +
			"The answer goes to the organizer as calendar apps send it (iMIP: a short text and an iCalendar REPLY with the meeting's UID and sequence and only your own attendee entry with your answer and comment), so the organizer's calendar records it. " +
			"It is threaded to the invitation, a copy is saved in the Sent folder, and the invitation gets the Answered flag. " +
			"A message without an invitation, a cancelled meeting, or an invitation that does not list your address as an attendee is refused with a sentence; nothing is sent. " + idempotencyDescription
	},
	OpenWorld: true, Sends: true,
	Run: func(ctx context.Context, c *Call, a respondInviteArgs) (SendResult, error) {
		ans, err := a.answer()
		if err != nil {
			return SendResult{}, err
		}
		res, err := c.Outbox.RespondInvite(ctx, c.Creds, ans)
		return valueOf(res), err
	},
	Approve: sending("Send this answer?", func(ctx context.Context, c *Call, a respondInviteArgs) (*outbox.Planned, error) {
		ans, err := a.answer()
		if err != nil {
			return nil, err
		}
		return c.Outbox.PlanInvite(ctx, c.Creds, ans)
	}, false, func(a respondInviteArgs) string { return a.IdempotencyKey }),
	Text:    sendText,
	Example: map[string]any{"folder": "INBOX", "uid": 0, "response": "accept", "comment": "Looking forward to it."},
}
