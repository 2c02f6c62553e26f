package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// The hidden-text defence (mailmsg) against real HTML mail nobody here
// wrote: tests/clients/mailcorpus/corpus.mjs renders the templates of npm
// packages (Foundation for Emails in two renditions, mailgen's themes, the
// React Email starters, MJML) and gives, for each, what headless Chromium
// shows at 1000 px (document.body.innerText) and the text it does not
// paint. Each message is APPENDed to Dovecot and read through the gateway
// (imap_read_email over MCP); then:
//
//   - at most 1% of the words Chromium shows are missing from the text,
//   - every number of 3 or more digits Chromium shows is there,
//   - no word of the text Chromium does not paint (preheaders) is there,
//     unless Chromium also shows that word elsewhere.
//
// Link URLs the gateway adds ("text (url)") are left out before the
// hidden-word check. Each template's figures are in its subtest's name; the
// table in docs/testing.md is the log of one run (-v, or CORPUS_TABLE=file
// writes it).
func TestRealMailCorpus(t *testing.T) {
	node, dir, chromium := corpusTools(t)
	var corpus []struct {
		Name, HTML, Text, Hidden string
	}
	runCorpusNode(t, node, dir, "corpus.mjs", map[string]any{"chromium": chromium, "workDir": t.TempDir()}, &corpus)
	// 11 Foundation templates × 2, 4 mailgen themes × 3, 4 React Email
	// starters, 3 MJML messages.
	if len(corpus) < 41 {
		t.Fatalf("corpus.mjs rendered %d templates, want 41", len(corpus))
	}

	const user, pass = "corpus@example.test", "corpus-pw"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: pass}})
	d := direct(t, s, user)
	uids := make([]imap.UID, len(corpus))
	for i, m := range corpus {
		uids[i] = appendUID(t, d, "INBOX", htmlMessage("Newsletter <news@example.org>", user, "corpus "+m.Name, m.HTML), nil, time.Time{})
	}

	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": user, "x-imap-pass": pass}, "")
	var table strings.Builder
	table.WriteString("| template | words | missing | numbers (3+ digits) | hidden words |\n|---|---|---|---|---|\n")
	for i, m := range corpus {
		var msg struct {
			Text string `json:"text"`
		}
		mailtest.Decode(t, mailtest.Call(t, c, "imap_read_email", map[string]any{"uid": uids[i], "max_chars": 1000000}), &msg)
		r := compareWithBrowser(m.Text, m.Hidden, msg.Text)
		numbers, hidden := "all there", "none shown"
		if len(r.missingNumbers) > 0 {
			numbers = fmt.Sprintf("missing %v", r.missingNumbers)
		}
		if len(r.hiddenShown) > 0 {
			hidden = fmt.Sprintf("shown: %v", r.hiddenShown)
		} else if r.hiddenWords == 0 {
			hidden = "(none hidden)"
		}
		fmt.Fprintf(&table, "| %s | %d | %.2f %% | %s | %s |\n", m.Name, r.words, r.missingPct, numbers, hidden)
		name := fmt.Sprintf("%s_%d_words_%.2f%%_missing_%d_hidden_words_absent", strings.ReplaceAll(m.Name, "/", "-"), r.words, r.missingPct, r.hiddenWords)
		t.Run(name, func(t *testing.T) {
			if r.missingPct > 1 {
				t.Errorf("%.2f %% of the words Chromium shows are missing: %q\ngateway text:\n%s", r.missingPct, r.missing, msg.Text)
			}
			if len(r.missingNumbers) > 0 {
				t.Errorf("numbers Chromium shows are missing: %q\ngateway text:\n%s", r.missingNumbers, msg.Text)
			}
			if len(r.hiddenShown) > 0 {
				t.Errorf("words Chromium does not paint are shown: %q\ngateway text:\n%s", r.hiddenShown, msg.Text)
			}
		})
	}
	t.Logf("\n%s", table.String())
	if f := os.Getenv("CORPUS_TABLE"); f != "" {
		if err := os.WriteFile(f, []byte(table.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// corpusTools finds what the corpus scripts need: Node 22, the npm
// packages of tests/clients/mailcorpus and Chromium.
func corpusTools(t *testing.T) (node, dir, chromium string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("clients", "mailcorpus"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "foundation-emails", "package.json")); err != nil {
		skipOrFail(t, "tests/clients/mailcorpus has no node_modules: run `npm ci` there (scripts/test.sh does)")
	}
	node, err = filepath.Abs(filepath.Join("clients", "node22", "node_modules", ".bin", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(node); err != nil {
		skipOrFail(t, "no Node 22 in tests/clients/node22 (juice needs it): run `npm ci` there (scripts/test.sh does on Linux x86-64)")
	}
	chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		skipOrFail(t, "no /usr/bin/chromium: apt-get install -y --no-install-recommends chromium (scripts/test.sh does)")
	}
	return node, dir, chromium
}

// browserComparison is how the gateway's text of one message compares with
// what Chromium shows.
type browserComparison struct {
	words          int      // words Chromium shows
	missing        []string // of them, not in the gateway's text (as many times as missing)
	missingPct     float64
	missingNumbers []string // numbers of 3+ digits Chromium shows that the text lacks
	hiddenWords    int      // words only in text Chromium does not paint
	hiddenShown    []string // of them, in the gateway's text
}

var linkURL = regexp.MustCompile(`\((?:https?|mailto|tel):[^)\s]*\)`)

func corpusWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// compareWithBrowser compares words case-insensitively (Chromium's
// innerText applies text-transform), counting repeats.
func compareWithBrowser(shown, hidden, got string) browserComparison {
	var r browserComparison
	have := map[string]int{}
	for _, w := range corpusWords(got) {
		have[w]++
	}
	ref := corpusWords(shown)
	inRef := map[string]bool{}
	for _, w := range ref {
		inRef[w] = true
	}
	left := map[string]int{}
	for w, n := range have {
		left[w] = n
	}
	for _, w := range ref {
		if left[w] > 0 {
			left[w]--
			continue
		}
		r.missing = append(r.missing, w)
		if len(w) >= 3 && strings.Trim(w, "0123456789") == "" {
			r.missingNumbers = append(r.missingNumbers, w)
		}
	}
	r.words = len(ref)
	if r.words > 0 {
		r.missingPct = 100 * float64(len(r.missing)) / float64(r.words)
	}
	outside := map[string]bool{}
	for _, w := range corpusWords(linkURL.ReplaceAllString(got, " ")) {
		outside[w] = true
	}
	seen := map[string]bool{}
	for _, w := range corpusWords(hidden) {
		if inRef[w] || seen[w] {
			continue
		}
		seen[w] = true
		r.hiddenWords++
		if outside[w] {
			r.hiddenShown = append(r.hiddenShown, w)
		}
	}
	return r
}

// runCorpusNode runs script (corpus.mjs, hiding.mjs) with node (Node 22),
// input as JSON on stdin, and decodes its JSON output.
func runCorpusNode(t *testing.T, node, dir, script string, input, out any) {
	t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(os.Environ(), "HOME="+home, "TMPDIR="+home, "NO_UPDATE_NOTIFIER=1")
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstderr:\n%s", script, err, tail(stderr.String(), 6000))
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("%s printed no JSON result (%v): %s\nstderr:\n%s", script, err, tail(stdout.String(), 2000), tail(stderr.String(), 4000))
	}
	t.Logf("node %s took %v", script, time.Since(start).Round(time.Millisecond))
}

// htmlMessage is a message whose one part is html, base64 in lines of 76,
// as a mail program sends a newsletter.
func htmlMessage(from, to, subject, html string) []byte {
	return []byte("From: " + from + "\r\nTo: " + to + "\r\nSubject: " + subject +
		"\r\nDate: " + time.Now().Format(time.RFC1123Z) + "\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		strings.ReplaceAll(wrap76(base64.StdEncoding.EncodeToString([]byte(html))), "\n", "\r\n") + "\r\n")
}
