package submission_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net"
	"strconv"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
	"github.com/mailbox-mcp/mailbox-mcp/internal/submission"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// Compose a message with mailmsg and send it as alice through the demo
// server, which speaks plain SMTP on loopback (hence AllowPlaintextAuth; a
// real server would use transport.StartTLS or transport.TLS). One
// recipient does not exist: the others still get the message.
func ExampleClient_Send() {
	srv, err := demo.Start(context.Background(), demo.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	host, portStr, _ := net.SplitHostPort(srv.SMTPAddr)
	port, _ := strconv.Atoi(portStr)

	c := submission.New(submission.Config{
		Host:               host,
		Port:               port,
		Security:           transport.Plain,
		AllowPlaintextAuth: true,
	}, nil)

	draft := mailmsg.Draft{
		From:    mailmsg.Address{Name: "Alice", Email: demo.AliceAddress},
		To:      []mailmsg.Address{{Name: "Bob", Email: demo.BobAddress}},
		Bcc:     []mailmsg.Address{{Email: "nobody@demo.test"}},
		Subject: "Grüße",
		Text:    "Hello Bob!",
	}
	raw, _, err := mailmsg.Compose(draft)
	if err != nil {
		log.Fatal(err)
	}
	creds := credentials.New(demo.AliceAddress, demo.AlicePassword)
	res, err := c.Send(context.Background(), creds, draft.From.Email, draft.Recipients(), bytes.NewReader(raw))
	if err != nil {
		fmt.Println(mailerr.KindOf(err), mailerr.Message(err))
		return
	}
	fmt.Println("accepted:", res.Accepted)
	for _, r := range res.Rejected {
		fmt.Println("rejected:", r.Address, r.Code, r.Message)
	}

	// The wrong password is an Auth error with a message for the user.
	_, err = c.Send(context.Background(), credentials.New(demo.AliceAddress, "wrong"), draft.From.Email, draft.Recipients(), bytes.NewReader(raw))
	fmt.Println(mailerr.KindOf(err), mailerr.Message(err))
	// Output:
	// accepted: [bob@demo.test]
	// rejected: nobody@demo.test 550 5.1.1 No such user here
	// auth_failed authentication failed: the mail server rejected the user name or password
}
