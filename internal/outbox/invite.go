package outbox

// Answering a meeting invitation (iMIP, RFC 6047): an iTIP REPLY to the
// organizer, threaded to the invitation, filed in Sent, and the
// invitation flagged \Answered, exactly as a reply is.

import (
	"cmp"
	"context"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/invite"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// InviteAnswer answers the invitation in message UID of Folder.
type InviteAnswer struct {
	Folder string
	UID    uint32
	// Response is invite.Accepted, invite.Declined or invite.Tentative.
	Response string
	// Comment, when set, goes to the organizer with the answer (COMMENT).
	Comment string
	// IdempotencyKey as for Message.
	IdempotencyKey string
}

// RespondInvite sends a's answer: to the invitation's organizer, as the
// login's own address (the attendee the invitation lists), a text saying
// who answered what and the iTIP REPLY beside it; then files the Sent
// copy and flags the invitation \Answered.
func (o *Outbox) RespondInvite(ctx context.Context, creds credentials.Credentials, a InviteAnswer) (*Result, error) {
	if res, err := o.prior(ctx, creds, a.IdempotencyKey); res != nil || err != nil {
		return res, err
	}
	p, err := o.PlanInvite(ctx, creds, a)
	if err != nil {
		return nil, err
	}
	return o.sendAnswer(ctx, creds, p, a.IdempotencyKey)
}

// PlanInvite composes a's answer exactly as RespondInvite would send it
// (reading the invitation without changing it), without sending.
func (o *Outbox) PlanInvite(ctx context.Context, creds credentials.Credentials, a InviteAnswer) (*Planned, error) {
	from, err := o.sender(creds, "")
	if err != nil {
		return nil, err
	}
	src, err := o.mailbox.Invitation(ctx, creds, a.Folder, a.UID)
	if err != nil {
		return nil, err
	}
	inv := src.Invite
	if err := inv.Answerable(from.Email); err != nil {
		return nil, err
	}
	ics, err := inv.Reply(from.Email, a.Response, a.Comment, time.Now())
	if err != nil {
		return nil, err
	}
	org, err := mailmsg.ParseAddress("organizer", mailmsg.Address{Name: inv.Organizer.Name, Email: inv.Organizer.Email}.String())
	if err != nil {
		return nil, mailerr.Wrap(mailerr.BadInput, err, "the invitation's organizer address cannot be written to: "+mailerr.Message(err))
	}
	inv.MarkReader(from.Email)
	name := from.Email
	if inv.You != nil {
		name = cmp.Or(from.Name, inv.You.Name, from.Email)
	}
	d := mailmsg.Draft{
		From: from, To: []mailmsg.Address{org},
		Subject:   invite.SubjectPrefix(a.Response) + ": " + cmp.Or(inv.Summary, strings.TrimSpace(src.Subject), "meeting"),
		Text:      inv.ReplyText(name, a.Response, a.Comment),
		Calendar:  &mailmsg.Calendar{Method: "REPLY", Data: ics},
		InReplyTo: src.MessageID, References: replyReferences(src.Original),
	}
	p, err := o.planned(d, nil)
	if p != nil {
		p.original = src.Original
	}
	return p, err
}
