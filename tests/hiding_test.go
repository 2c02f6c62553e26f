package tests

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// The hiding corpus: every way of hiding text from a mail's reader that
// the project knows (tests/clients/mailcorpus/hiding-cases.mjs: the 26
// known before issue 36, those it found, and look-alikes that stay
// visible), each alone and combined as senders combine them (inline, in a
// <style> rule, with !important, inside @media for a desktop screen, in a
// table cell). Nothing in the corpus says what is hidden: hiding.mjs
// renders each message in headless Chromium as a mail client does
// (scripting off, nothing loaded from the network, 1000 px wide) and
// judges every text run by its pixels: the message is painted, then
// painted again with the run made transparent, and a run that changes no
// pixel a person can tell apart is hidden (judge.mjs).
//
// Each message is APPENDed to Dovecot and read through the gateway
// (imap_read_email with include_hidden). For every run:
//   - a run Chromium paints: all its words are in text;
//   - a run Chromium does not paint: none of its words are in text
//     (link URLs aside, and words some painted run of the message has
//     too), and all of them are in hidden_text.
//
// Subtests are named after the technique with the count of runs shown and
// hidden; HIDING_ONLY=substring runs some of them.
func TestHidingCorpus(t *testing.T) {
	t.Parallel() // a mail stack of its own; mostly waits for Chromium
	node, dir, chromium := corpusTools(t)
	var corpus []struct {
		Name string
		HTML string
		Runs []struct {
			Text    string
			Visible bool
			Pixels  int
			How     string
		}
	}
	start := time.Now()
	runCorpusNode(t, node, dir, "hiding.mjs", map[string]any{"chromium": chromium, "workDir": t.TempDir(), "only": os.Getenv("HIDING_ONLY")}, &corpus)
	judged := time.Since(start)
	if len(corpus) == 0 {
		t.Fatal("hiding.mjs judged no message")
	}

	const user, pass = "hiding@example.test", "hiding-pw"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: pass}})
	d := direct(t, s, user)
	uids := make([]imap.UID, len(corpus))
	for i, m := range corpus {
		uids[i] = appendUID(t, d, "INBOX", htmlMessage("Sender <sender@example.org>", user, "hiding "+m.Name, m.HTML), nil, time.Time{})
	}

	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": user, "x-imap-pass": pass}, "")
	shownRuns, hiddenRuns := 0, 0
	for i, m := range corpus {
		var msg struct {
			Text       string `json:"text"`
			HiddenText string `json:"hidden_text"`
		}
		mailtest.Decode(t, mailtest.Call(t, c, "imap_read_email", map[string]any{"uid": uids[i], "max_chars": 1000000, "include_hidden": true}), &msg)
		text := map[string]bool{}
		for _, w := range corpusWords(linkURL.ReplaceAllString(msg.Text, " ")) {
			text[w] = true
		}
		hidden := map[string]bool{}
		for _, w := range corpusWords(msg.HiddenText) {
			hidden[w] = true
		}
		painted := map[string]bool{}
		shown, notShown := 0, 0
		for _, r := range m.Runs {
			if r.Visible {
				shown++
				for _, w := range corpusWords(r.Text) {
					painted[w] = true
				}
			} else {
				notShown++
			}
		}
		shownRuns += shown
		hiddenRuns += notShown
		name := fmt.Sprintf("%s_%d_runs_shown_%d_hidden", strings.ReplaceAll(m.Name, "/", "-"), shown, notShown)
		t.Run(name, func(t *testing.T) {
			for _, r := range m.Runs {
				words := corpusWords(r.Text)
				if r.Visible {
					var missing []string
					for _, w := range words {
						if !text[w] {
							missing = append(missing, w)
						}
					}
					if len(missing) > 0 {
						t.Errorf("Chromium paints %q (%d pixels change), but the text lacks %q\ntext:\n%s", r.Text, r.Pixels, missing, msg.Text)
					}
					continue
				}
				var leaked, lost []string
				for _, w := range words {
					if text[w] && !painted[w] {
						leaked = append(leaked, w)
					}
					if !hidden[w] && !painted[w] {
						lost = append(lost, w)
					}
				}
				if len(leaked) > 0 {
					t.Errorf("Chromium does not paint %q, but the text shows %q\ntext:\n%s", r.Text, leaked, msg.Text)
				}
				if len(lost) > 0 && !slices.Equal(lost, leaked) {
					t.Errorf("Chromium does not paint %q, and hidden_text lacks %q\nhidden_text:\n%s", r.Text, lost, msg.HiddenText)
				}
			}
		})
	}
	t.Logf("%d messages, %d runs painted and %d not, judged by Chromium in %v", len(corpus), shownRuns, hiddenRuns, judged.Round(time.Millisecond))
}
