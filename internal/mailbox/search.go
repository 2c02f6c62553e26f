package mailbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Query is a search; every criterion set must match (AND).
type Query struct {
	Text, From, To, Cc, Subject, Body string
	Since, Before                     time.Time // dates; only the day counts (IMAP semantics)
	Seen, Flagged, Answered           *bool
	Larger, Smaller                   int64
	// Tag matches messages carrying this tag in X-Mailbox-Tags. The server
	// searches a substring of the header; results are then filtered on
	// the exact tag list, so "urgent" does not match "not-urgent".
	Tag string
}

func (q Query) empty() bool {
	return q.Text == "" && q.From == "" && q.To == "" && q.Cc == "" && q.Subject == "" && q.Body == "" &&
		q.Since.IsZero() && q.Before.IsZero() && q.Seen == nil && q.Flagged == nil && q.Answered == nil &&
		q.Larger == 0 && q.Smaller == 0 && q.Tag == ""
}

// key identifies the query for binding cursors to it.
func (q Query) key() string {
	tri := func(b *bool) string {
		if b == nil {
			return "-"
		}
		return fmt.Sprint(*b)
	}
	return queryKey(fmt.Sprintf("%q", []string{q.Text, q.From, q.To, q.Cc, q.Subject, q.Body,
		q.Since.Format(time.DateOnly), q.Before.Format(time.DateOnly), tri(q.Seen), tri(q.Flagged), tri(q.Answered),
		fmt.Sprint(q.Larger), fmt.Sprint(q.Smaller), q.Tag}))
}

func (q Query) criteria() *imap.SearchCriteria {
	c := &imap.SearchCriteria{Since: q.Since, Before: q.Before, Larger: q.Larger, Smaller: q.Smaller}
	if q.Text != "" {
		c.Text = []string{q.Text}
	}
	if q.Body != "" {
		c.Body = []string{q.Body}
	}
	for _, h := range []struct{ k, v string }{{"From", q.From}, {"To", q.To}, {"Cc", q.Cc}, {"Subject", q.Subject}} {
		if h.v != "" {
			c.Header = append(c.Header, imap.SearchCriteriaHeaderField{Key: h.k, Value: h.v})
		}
	}
	if q.Tag != "" {
		c.Header = append(c.Header, tagCriterion(q.Tag))
	}
	for _, f := range []struct {
		v    *bool
		flag imap.Flag
	}{{q.Seen, imap.FlagSeen}, {q.Flagged, imap.FlagFlagged}, {q.Answered, imap.FlagAnswered}} {
		switch {
		case f.v == nil:
		case *f.v:
			c.Flag = append(c.Flag, f.flag)
		default:
			c.NotFlag = append(c.NotFlag, f.flag)
		}
	}
	return c
}

func (q Query) check() error {
	if q.empty() {
		return mailerr.New(mailerr.BadInput, "the search is empty: give at least one criterion (text, from, to, cc, subject, body, since, before, seen, flagged, answered, larger, smaller or tag)")
	}
	if q.Tag != "" {
		if err := CheckTag(q.Tag); err != nil {
			return err
		}
	}
	for _, t := range []struct{ name, v string }{{"text", q.Text}, {"from", q.From}, {"to", q.To}, {"cc", q.Cc}, {"subject", q.Subject}, {"body", q.Body}} {
		if err := checkTerm(t.name, t.v); err != nil {
			return err
		}
	}
	if q.Larger < 0 || q.Smaller < 0 {
		return mailerr.New(mailerr.BadInput, "larger and smaller must not be negative")
	}
	if !q.Since.IsZero() && !q.Before.IsZero() && !q.Since.Before(q.Before) {
		return mailerr.New(mailerr.BadInput, "since must be earlier than before")
	}
	return nil
}

// Search runs q on the server (UID SEARCH; ESEARCH when offered) and returns
// a page of the matches, newest first.
func (c *Client) Search(ctx context.Context, creds credentials.Credentials, q Query, o ListOptions) (*Page, error) {
	folder, err := c.folderArg(ctx, creds, o.Folder)
	if err != nil {
		return nil, err
	}
	limit, err := checkLimit(o.Limit)
	if err != nil {
		return nil, err
	}
	if err := q.check(); err != nil {
		return nil, err
	}
	qk := q.key()
	cur, err := decodeCursor(o.Cursor, folder, qk)
	if err != nil {
		return nil, err
	}
	var page *Page
	crit := q.criteria()
	if cur != nil {
		crit.UID = []imap.UIDSet{{imap.UIDRange{Start: 1, Stop: imap.UID(cur.Before - 1)}}}
	}
	// STATUS and the search go with the EXAMINE (behind the LOGIN on a
	// new connection); on a connection that has the folder open, behind
	// a NOOP, asked again if the server reported a change meanwhile.
	var status *imapclient.StatusCommand
	var search *imapclient.SearchCommand
	send := func(conn *Conn, caps imap.CapSet) {
		cl := conn.client()
		status = cl.Status(folder, pageStatus)
		var opts *imap.SearchOptions
		if caps.Has(imap.CapESearch) || caps.Has(imap.CapIMAP4rev2) {
			opts = &imap.SearchOptions{ReturnAll: true, ReturnCount: true}
		}
		search = cl.UIDSearch(crit, opts)
	}
	open := &opening{folder: folder, fresh: true, fetchless: true, send: send}
	err = c.doOpen(ctx, creds, open, "searching", true, func(ctx context.Context, conn *Conn) error {
		_, err := conn.examine(folder)
		res, serr := search.Wait()
		if err != nil {
			status.Wait()
			return err
		}
		cl := conn.client()
		if conn.stale() || serr != nil && esearchRefused(serr, cl) {
			status.Wait()
			send(conn, cl.Caps())
			res, serr = search.Wait()
		}
		if serr != nil {
			status.Wait()
			return searchError(serr, folder)
		}
		uids := res.AllUIDs()
		matched := uint32(len(uids))
		if res.Count > matched {
			matched = res.Count
		}
		slices.Sort(uids)
		if len(uids) > limit {
			uids = uids[len(uids)-limit:]
		}
		var msgs []Summary
		if len(uids) > 0 {
			msgs, err = fetchSummaries(cl, imap.UIDSetNum(uids...))
			if err != nil {
				status.Wait()
				return err
			}
		}
		// The page continues below the lowest UID examined, whether or not
		// the exact tag filter kept it.
		lowest := uint32(0)
		if len(uids) > 0 {
			lowest = uint32(uids[0])
		}
		if q.Tag != "" {
			msgs = slices.DeleteFunc(msgs, func(m Summary) bool { return !slices.Contains(m.Tags, q.Tag) })
		}
		if page, err = conn.newPage(folder, status, cur, msgs, limit); err != nil {
			return err
		}
		page.Matched = &matched
		if matched > uint32(len(uids)) && lowest > 1 {
			page.NextCursor = cursor{V: 1, Folder: folder, UV: page.UIDValidity, Before: lowest, Query: qk}.encode()
		}
		return nil
	})
	return page, err
}

// searchError: a BAD answer to SEARCH is almost always a term the server
// cannot handle (e.g. a charset), which the user can change.
func searchError(err error, folder string) error {
	var ie *imap.Error
	if asIMAP(err, &ie) && ie.Type == imap.StatusResponseTypeBad {
		return mailerr.Wrap(mailerr.BadInput, err, "the mail server could not run this search: it refused the terms")
	}
	if asIMAP(err, &ie) && ie.Code == imap.ResponseCodeBadCharset {
		return mailerr.Wrap(mailerr.BadInput, err, "the mail server does not support searching for non-ASCII text")
	}
	return imapError(err, folder)
}
