package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"slices"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message/charset"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
)

// The direct side: a bare go-imap client sending the same IMAP commands the
// gateway sends for each tool. On a warm connection (logged in, INBOX
// already examined) this is the physical limit the gateway is measured
// against; cold, it pays TLS, LOGIN and EXAMINE on every call as a gateway
// without a pool would.

// The items the gateway fetches for one list entry (internal/mailbox/list.go:
// summaryFetch): the first 2 KB of part 1 for the preview and the tags
// header.
var summaryFetch = &imap.FetchOptions{
	UID: true, Flags: true, Envelope: true, RFC822Size: true, InternalDate: true,
	BodyStructure: &imap.FetchItemBodyStructure{Extended: true},
	BodySection: []*imap.FetchItemBodySection{
		{Part: []int{1}, Peek: true, Partial: &imap.SectionPartial{Offset: 0, Size: 2048}},
		{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{mailbox.TagsHeader}, Peek: true},
	},
}

var statusOpts = &imap.StatusOptions{NumMessages: true, NumUnseen: true, UIDValidity: true}

func dialDirect(addr string, tc *tls.Config, user, pass string) (*imapclient.Client, error) {
	c, err := imapclient.DialTLS(addr, &imapclient.Options{
		TLSConfig:   tc,
		WordDecoder: &mime.WordDecoder{CharsetReader: charset.Reader},
	})
	if err != nil {
		return nil, err
	}
	if err := c.Login(user, pass).Wait(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// direct is one warm connection with INBOX examined.
type direct struct {
	c *imapclient.Client
	n uint32 // messages in INBOX
}

func openDirect(addr string, tc *tls.Config, user, pass string) (*direct, error) {
	c, err := dialDirect(addr, tc, user, pass)
	if err != nil {
		return nil, err
	}
	d, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		c.Close()
		return nil, err
	}
	return &direct{c: c, n: d.NumMessages}, nil
}

func (d *direct) close() {
	d.c.Logout().Wait()
	d.c.Close()
}

// drainSummaries reads a summary FETCH to the end and counts the messages.
func drainSummaries(cmd *imapclient.FetchCommand) (int, error) {
	n := 0
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		for item := msg.Next(); item != nil; item = msg.Next() {
			if sec, ok := item.(imapclient.FetchItemDataBodySection); ok && sec.Literal != nil {
				io.Copy(io.Discard, sec.Literal)
			}
		}
		n++
	}
	return n, cmd.Close()
}

// list: STATUS (pipelined) and the newest 20 by sequence number.
func (d *direct) list() error {
	st := d.c.Status("INBOX", statusOpts)
	var set imap.SeqSet
	set.AddRange(uint32(max(1, int64(d.n)-19)), 0)
	n, err := drainSummaries(d.c.Fetch(set, summaryFetch))
	if _, serr := st.Wait(); err == nil {
		err = serr
	}
	if err == nil && n != min(20, int(d.n)) {
		err = fmt.Errorf("direct list: %d messages, want %d", n, min(20, int(d.n)))
	}
	return err
}

// search: STATUS, UID SEARCH (ESEARCH RETURN ALL COUNT) FROM, then the
// summaries of the newest 20 matches.
func (d *direct) search(from string) error {
	st := d.c.Status("INBOX", statusOpts)
	crit := &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "From", Value: from}}}
	res, err := d.c.UIDSearch(crit, &imap.SearchOptions{ReturnAll: true, ReturnCount: true}).Wait()
	if err != nil {
		st.Wait()
		return err
	}
	uids := res.AllUIDs()
	slices.Sort(uids)
	if len(uids) > 20 {
		uids = uids[len(uids)-20:]
	}
	if len(uids) == 0 {
		st.Wait()
		return errors.New("direct search: no match")
	}
	if _, err := drainSummaries(d.c.Fetch(imap.UIDSetNum(uids...), summaryFetch)); err != nil {
		st.Wait()
		return err
	}
	_, err = st.Wait()
	return err
}

// read: header fields, envelope, structure and the first 64 KB of part 1
// in one FETCH, as the gateway's imap_read_email does for a message whose
// text is part 1 (a single-part message).
func (d *direct) read(uid imap.UID) error {
	refs := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"References"}, Peek: true}
	part1 := &imap.FetchItemBodySection{Part: []int{1}, Peek: true, Partial: &imap.SectionPartial{Offset: 0, Size: 64 << 10}}
	bufs, err := d.c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{
		UID: true, Flags: true, Envelope: true, RFC822Size: true, InternalDate: true,
		BodyStructure: &imap.FetchItemBodyStructure{Extended: true}, BodySection: []*imap.FetchItemBodySection{refs, part1},
	}).Collect()
	if err != nil {
		return err
	}
	if len(bufs) != 1 || bufs[0].BodyStructure == nil {
		return fmt.Errorf("direct read: no structure for UID %d", uid)
	}
	if len(bufs[0].FindBodySection(part1)) == 0 {
		return errors.New("direct read: empty body")
	}
	return nil
}

// folders: one LIST-STATUS with special-use, as the gateway sends it.
func (d *direct) folders() error {
	data, err := d.c.List("", "*", &imap.ListOptions{ReturnSpecialUse: true,
		ReturnStatus: &imap.StatusOptions{NumMessages: true, NumUnseen: true}}).Collect()
	if err == nil && len(data) == 0 {
		err = errors.New("direct folders: none")
	}
	return err
}
