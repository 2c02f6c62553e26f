package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
)

func main() {
	s, err := mailstack.Start(mailstack.Options{Users: map[string]string{"carol@example.test": "carolpw", "dave@example.test": "davepw"}})
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Printf("DIR=%s IMAPS=%d IMAP=%d MX=%d LMTP=%d CA=%s\n", s.Dir, s.IMAPSPort, s.IMAPPort, s.MXPort, s.LMTPPort, s.CAFile)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	<-ch
	s.Stop()
}
