package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

type pfx struct {
	p string
	w io.Writer
}

func (p pfx) Write(b []byte) (int, error) {
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if l != "" {
			fmt.Fprintf(p.w, "%s %s", p.p, l)
		}
	}
	return len(b), nil
}

func dial(name string, debug bool) *imapclient.Client {
	pem, _ := os.ReadFile(os.Getenv("CA"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	o := &imapclient.Options{TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"},
		UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			Fetch: func(m *imapclient.FetchMessageData) {
				b, _ := m.Collect()
				fmt.Printf("%s UNILATERAL FETCH seq=%d uid=%d flags=%v modseq=%d\n", name, m.SeqNum, b.UID, b.Flags, b.ModSeq)
			},
		}}
	if debug {
		o.DebugWriter = pfx{name, os.Stdout}
	}
	c, err := imapclient.DialTLS("127.0.0.1:"+os.Getenv("PORT"), o)
	if err != nil {
		panic(err)
	}
	if err := c.Login(os.Getenv("U"), os.Getenv("P")).Wait(); err != nil {
		panic(err)
	}
	return c
}

func main() {
	a := dial("A", true)
	b := dial("B", true)
	folder := "exp" + os.Getenv("N")
	a.Create(folder, nil).Wait()
	for i := 0; i < 5; i++ {
		raw := fmt.Sprintf("From: x@example.org\r\nSubject: m%d\r\n\r\nbody\r\n", i)
		cmd := a.Append(folder, int64(len(raw)), nil)
		cmd.Write([]byte(raw))
		cmd.Close()
		cmd.Wait()
	}
	sd, err := a.Select(folder, &imap.SelectOptions{CondStore: true}).Wait()
	fmt.Println("select", sd.HighestModSeq, err)
	sr, err := a.UIDSearch(&imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}, ModSeq: &imap.SearchCriteriaModSeq{ModSeq: 1}}, nil).Wait()
	fmt.Println("search", sr.AllUIDs(), "modseq", sr.ModSeq, err)
	sr2, err := a.UIDSearch(&imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}, ModSeq: &imap.SearchCriteriaModSeq{ModSeq: 1}}, &imap.SearchOptions{ReturnAll: true, ReturnCount: true}).Wait()
	fmt.Println("esearch", sr2.AllUIDs(), "modseq", sr2.ModSeq, err)
	if _, err := b.Select(folder, nil).Wait(); err != nil {
		panic(err)
	}
	b.Store(imap.UIDSetNum(2), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close()
	b.Store(imap.UIDSetNum(3), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagFlagged}}, nil).Close()
	cmd := a.Store(imap.UIDSetNum(1, 2, 3, 4, 5), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, &imap.StoreOptions{UnchangedSince: sr.ModSeq})
	bufs, err := cmd.Collect()
	for _, m := range bufs {
		fmt.Printf("STORE result uid=%d flags=%v modseq=%d\n", m.UID, m.Flags, m.ModSeq)
	}
	fmt.Println("store err", err)
	a.Noop().Wait()
}
