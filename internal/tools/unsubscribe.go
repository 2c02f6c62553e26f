package tools

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/approval"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/unsubscribe"
)

type unsubscribeArgs struct {
	Folder string `json:"folder" max:"1000" desc:"Folder of a message from the list (default INBOX)."`
	UID    uint32 `json:"uid" required:"true" min:"1" desc:"UID of a message from the list (imap_read_email shows its unsubscribe options)."`
}

// UnsubscribeResult is mail_unsubscribe's result.
type UnsubscribeResult struct {
	Method    string      `json:"method" desc:"one-click (an HTTPS POST, RFC 8058), mailto (an unsubscribe message was sent) or link (nothing was sent: the person must open url)"`
	Done      bool        `json:"done" desc:"true when the list was told: its server accepted the one-click request, or the unsubscribe message was sent"`
	List      string      `json:"list,omitempty" desc:"the list's identifier (List-Id)"`
	URL       string      `json:"url,omitempty" desc:"one-click: the link posted to; link: the page for the person to open (the gateway never opens it)"`
	Status    int         `json:"status,omitempty" desc:"one-click: the HTTP status of the list's answer"`
	Redirects int         `json:"redirects,omitempty" desc:"one-click: redirects followed"`
	Sent      *SendResult `json:"sent,omitempty" desc:"mailto: the message sent, as smtp_send_email describes it"`
	Note      string      `json:"note" desc:"what was done, in a sentence"`
	Untrusted Untrusted   `json:"untrusted" desc:"marks the fields written by the list's sender"`
}

var unsubscribeUntrustedFields = []string{"list", "url", "sent.to", "sent.subject"}

var mailUnsubscribe = Def[unsubscribeArgs, UnsubscribeResult]{
	Name:  "mail_unsubscribe",
	Title: "Unsubscribe from mailing list",
	Description: "Leave the mailing list a message came from, the way its List-Unsubscribe header offers: " +
		"with one-click unsubscribe (RFC 8058: the sender asks for it and a DKIM signature checked by the operator's receiving server covers the list headers) the gateway posts the one-click request to the list's https link (public addresses only, each redirect checked again, no cookies); " +
		"otherwise it sends the unsubscribe message to the list's mailto address (with the subject and body the link gives; a copy goes to Sent); " +
		"otherwise it returns the list's web link for the person to open: it never opens a link that is not one-click, since such a page may ask for more than an unsubscribe. " +
		"Unsubscribe only when the person asked to leave that list. It counts as sending mail for access and approval.",
	OpenWorld: true, Sends: true,
	Run: func(ctx context.Context, c *Call, a unsubscribeArgs) (UnsubscribeResult, error) {
		act, list, err := unsubscribeAction(ctx, c, a)
		if err != nil {
			return UnsubscribeResult{}, err
		}
		if c.Approved != nil && !sameFacts(c.Approved, factsOf(act)) {
			// What the person approved (where the request goes) is not
			// what the message offers now.
			return UnsubscribeResult{}, mailerr.New(mailerr.BadInput, "the message's unsubscribe options changed since the person approved; nothing was sent; ask again")
		}
		out := UnsubscribeResult{Method: act.Kind, List: list, Untrusted: newFence().describe(unsubscribeUntrustedFields...)}
		switch act.Kind {
		case unsubscribe.OneClickPost:
			poster := c.Unsubscribe
			if poster == nil {
				poster = unsubscribe.NewPoster(unsubscribe.Config{})
			}
			posted, err := poster.OneClick(ctx, act.URL)
			if err != nil {
				return UnsubscribeResult{}, err
			}
			out.Done, out.URL, out.Status, out.Redirects = true, posted.URL, posted.Status, posted.Redirects
			out.Note = fmt.Sprintf("Unsubscribed: the list's server accepted the one-click request (HTTP %d).", posted.Status)
		case unsubscribe.SendMail:
			res, err := c.Outbox.Send(ctx, c.Creds, unsubscribeMessage(act))
			if err != nil {
				return UnsubscribeResult{}, err
			}
			out.Done, out.Sent = true, res
			out.Note = "The unsubscribe message was sent to " + strings.Join(act.Mailto.To, ", ") + "; the list usually confirms by mail."
		case unsubscribe.OpenLink:
			out.URL = act.URL
			out.Note = "Nothing was sent: this list unsubscribes only through its web page, which the gateway does not open (it is not a one-click link). Give the person the link to open in their browser."
		}
		return out, nil
	},
	Approve: &Approve[unsubscribeArgs]{Kind: access.ApproveSend,
		Preview: func(ctx context.Context, c *Call, a unsubscribeArgs) (approval.Preview, error) {
			act, list, err := unsubscribeAction(ctx, c, a)
			if err != nil {
				return approval.Preview{}, err
			}
			p := approval.Preview{Title: "Unsubscribe from " + cmp.Or(list, "this mailing list") + "?", Facts: factsOf(act)}
			switch act.Kind {
			case unsubscribe.OneClickPost:
				p.Fields = []approval.Field{{Name: "How", Value: "a one-click unsubscribe request (HTTPS POST, RFC 8058)"}, {Name: "To", Value: act.URL}}
			case unsubscribe.SendMail:
				m := unsubscribeMessage(act)
				p.Fields = []approval.Field{{Name: "How", Value: "an unsubscribe message"}, {Name: "To", Value: strings.Join(m.To, ", ")}, {Name: "Subject", Value: m.Subject}}
				p.Text = m.Text
			case unsubscribe.OpenLink:
				p.Fields = []approval.Field{{Name: "How", Value: "nothing is sent: the list's web page is given to you to open"}, {Name: "Link", Value: act.URL}}
			}
			return p, nil
		}},
	Text: func(r UnsubscribeResult) string {
		f := fence{marker: r.Untrusted.Marker}
		var b, in strings.Builder
		fmt.Fprintf(&b, "%s\n", r.Note)
		if r.List != "" {
			fmt.Fprintf(&in, "List: %s\n", line(r.List))
		}
		if r.URL != "" {
			fmt.Fprintf(&in, "Link: %s\n", line(r.URL))
		}
		if in.Len() > 0 {
			b.WriteString(f.wrap(in.String()))
		}
		if r.Sent != nil {
			b.WriteString(sendText(*r.Sent))
		}
		return b.String()
	},
	Example: map[string]any{"folder": "INBOX", "uid": 0},
}

// unsubscribeAction reads the message's unsubscribe options and picks how
// to unsubscribe.
func unsubscribeAction(ctx context.Context, c *Call, a unsubscribeArgs) (unsubscribe.Action, string, error) {
	msg, err := c.Mailbox.Read(ctx, c.Creds, mailbox.ReadOptions{Folder: a.Folder, UID: a.UID, MaxChars: 1})
	if err != nil {
		return unsubscribe.Action{}, "", err
	}
	act := msg.Unsubscribe.Choose()
	if act.Kind == "" {
		return act, "", mailerr.New(mailerr.BadInput, "the message offers no way to unsubscribe (no usable List-Unsubscribe header); nothing was sent. If it is unwanted mail, move it to the junk folder instead")
	}
	return act, msg.Unsubscribe.List, nil
}

// unsubscribeMessage is the message a mailto: unsubscribe sends.
func unsubscribeMessage(act unsubscribe.Action) outbox.Message {
	return outbox.Message{To: act.Mailto.To, Subject: act.Mailto.Subject, Text: act.Mailto.Body}
}
