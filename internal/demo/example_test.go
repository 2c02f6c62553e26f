package demo_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
)

// Start the demo server, log in as alice over plain IMAP on loopback and
// list her folders with their special-use attributes and message counts.
func ExampleStart() {
	srv, err := demo.Start(context.Background(), demo.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	for _, u := range srv.Users {
		fmt.Println(u.Address, u.Password)
	}

	c, err := imapclient.DialInsecure(srv.IMAPAddr, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(demo.AliceAddress, demo.AlicePassword).Wait(); err != nil {
		log.Fatal(err)
	}
	folders, err := c.List("", "*", &imap.ListOptions{
		ReturnStatus: &imap.StatusOptions{NumMessages: true},
	}).Collect()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range folders {
		var special []string
		for _, a := range f.Attrs {
			if a != imap.MailboxAttrHasChildren && a != imap.MailboxAttrHasNoChildren {
				special = append(special, string(a))
			}
		}
		n := int(*f.Status.NumMessages)
		fmt.Printf("%-20s %-9s seeded=%v\n", f.Mailbox, strings.Join(special, " "), n == srv.Seeded(demo.AliceAddress, f.Mailbox))
	}
	// Output:
	// alice@demo.test demo-alice
	// bob@demo.test demo-bob
	// INBOX                          seeded=true
	// Archive              \Archive  seeded=true
	// Drafts               \Drafts   seeded=true
	// Projekte                       seeded=true
	// Projekte/Übersicht             seeded=true
	// Rechnungen & Belege            seeded=true
	// Sent                 \Sent     seeded=true
	// Trash                \Trash    seeded=true
}
