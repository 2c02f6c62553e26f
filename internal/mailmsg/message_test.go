package mailmsg

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// crlf turns the \n line breaks of a test message into CRLF.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

const mixedMessage = `From: Alice <alice@example.com>
To: Bob <bob@example.com>
Subject: =?UTF-8?Q?Gr=C3=BC=C3=9Fe?=
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

This is the preamble; it is ignored.
--outer
Content-Type: multipart/alternative; boundary="inner"

--inner
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

Hallo Bob,

sch=C3=B6ne Gr=C3=BC=C3=9Fe!
--inner
Content-Type: text/html; charset=utf-8

<p>Hallo Bob,</p><p>sch&ouml;ne Gr&uuml;&szlig;e!</p>
--inner--
--outer
Content-Type: text/plain; charset=utf-8
Content-Disposition: attachment; filename*=UTF-8''Gr%C3%BC%C3%9Fe.txt
Content-Transfer-Encoding: base64

R3LDvMOfZQ==
--outer
Content-Type: application/pdf; name="broken.pdf"
Content-Disposition: attachment; filename="broken.pdf"
Content-Transfer-Encoding: base64

JVBERi0x!!!not*base64***LjQK
--outer
Content-Type: image/png; name="=?UTF-8?B?QmlsZCDwn5iALnBuZw==?="
Content-Disposition: inline
Content-Transfer-Encoding: base64

iVBORw0KGgo=
--outer--
This is the epilogue; it is ignored.
`

func TestParseMessage(t *testing.T) {
	tests := []struct {
		name             string
		input            string
		wantText         string
		wantHTML         bool
		wantAttachments  []Attachment
		wantWarnings     []string
		wantNoAttachment bool
	}{
		{
			name:     "mixed with nested alternative, rfc 2231 name and broken base64",
			input:    crlf(mixedMessage),
			wantText: "Hallo Bob,\n\nschöne Grüße!",
			wantAttachments: []Attachment{
				{PartID: "2", Filename: "Grüße.txt", ContentType: "text/plain", Size: 7},
				{PartID: "3", Filename: "broken.pdf", ContentType: "application/pdf", Size: 15},
				{PartID: "4", Filename: "Bild 😀.png", ContentType: "image/png", Size: 8, Inline: true},
			},
			wantWarnings: []string{"Part 3 has invalid base64"},
		},
		{
			name:     "lf line endings",
			input:    mixedMessage,
			wantText: "Hallo Bob,\n\nschöne Grüße!",
			wantAttachments: []Attachment{
				{PartID: "2", Filename: "Grüße.txt", ContentType: "text/plain", Size: 7},
				{PartID: "3", Filename: "broken.pdf", ContentType: "application/pdf", Size: 15},
				{PartID: "4", Filename: "Bild 😀.png", ContentType: "image/png", Size: 8, Inline: true},
			},
			wantWarnings: []string{"Part 3 has invalid base64"},
		},
		{
			name: "single part",
			input: crlf(`Subject: hi
Content-Type: text/plain; charset=iso-8859-1
Content-Transfer-Encoding: quoted-printable

Caf=E9 at 5?
`),
			wantText: "Café at 5?",
		},
		{
			name: "single non-text part is part 1",
			input: crlf(`Content-Type: application/pdf; name="invoice.pdf"
Content-Transfer-Encoding: base64

JVBERi0xLjQK
`),
			wantAttachments: []Attachment{
				{PartID: "1", Filename: "invoice.pdf", ContentType: "application/pdf", Size: 9},
			},
		},
		{
			name:     "no mime headers at all",
			input:    "Subject: hi\n\nJust text.\n",
			wantText: "Just text.",
		},
		{
			name: "html only",
			input: crlf(`Content-Type: text/html; charset=utf-8

<html><head><style>p{}</style></head><body><p>Click <a href="https://example.com/a">here</a></p><table><tr><td>x</td><td>y</td></tr></table></body></html>
`),
			wantText: "Click here (https://example.com/a)\n\nx | y",
			wantHTML: true,
		},
		{
			name: "alternative prefers plain even when html is first",
			input: crlf(`Content-Type: multipart/alternative; boundary=b

--b
Content-Type: text/html

<b>html</b>
--b
Content-Type: text/plain

plain
--b--
`),
			wantText: "plain",
		},
		{
			name: "deep part numbers",
			input: crlf(`Content-Type: multipart/mixed; boundary=m

--m
Content-Type: multipart/alternative; boundary=a

--a
Content-Type: text/plain

plain body
--a
Content-Type: multipart/related; boundary=r; type="text/html"

--r
Content-Type: text/html

<p>html body <img src="cid:logo@x"></p>
--r
Content-Type: image/gif
Content-ID: <logo@x>
Content-Transfer-Encoding: base64

R0lGODlh
--r--
--a--
--m
Content-Type: application/zip
Content-Disposition: attachment; filename="../../etc/a.zip"

PK
--m--
`),
			wantText: "plain body",
			wantAttachments: []Attachment{
				{PartID: "1.2.2", ContentType: "image/gif", Size: 6, Inline: true},
				{PartID: "2", Filename: "a.zip", ContentType: "application/zip", Size: 2},
			},
		},
		{
			name: "text parts of a mixed message are joined",
			input: crlf(`Content-Type: multipart/mixed; boundary=m

--m
Content-Type: text/plain

First part.
--m
Content-Type: image/jpeg
Content-Disposition: inline; filename=photo.jpg

xx
--m
Content-Type: text/html

<p>Mailing list footer</p>
--m--
`),
			wantText: "First part.\n\nMailing list footer",
			wantHTML: true,
			wantAttachments: []Attachment{
				{PartID: "2", Filename: "photo.jpg", ContentType: "image/jpeg", Size: 2, Inline: true},
			},
		},
		{
			name: "attached message",
			input: crlf(`Content-Type: multipart/mixed; boundary=m

--m
Content-Type: text/plain

See attached.
--m
Content-Type: message/rfc822

Subject: =?UTF-8?Q?Fw=3A_Rechnung_f=C3=BCr_M=C3=A4rz?=
Content-Type: multipart/mixed; boundary=inner

--inner
Content-Type: text/plain

inner text
--inner
Content-Type: application/pdf; name=inner.pdf

%PDF
--inner--
--m--
`),
			wantText: "See attached.",
			wantAttachments: []Attachment{
				{PartID: "2", Filename: "Fw: Rechnung für März.eml", ContentType: "message/rfc822", Size: 227},
			},
		},
		{
			name: "filename continuation and latin-1 rfc 2231",
			input: crlf(`Content-Type: multipart/mixed; boundary=m

--m
Content-Type: application/octet-stream
Content-Disposition: attachment;
 filename*0*=UTF-8''%E6%97%A5;
 filename*1*=%E6%9C%AC.txt

x
--m
Content-Type: application/octet-stream
Content-Disposition: attachment; filename*=iso-8859-1'fr'caf%E9.txt

y
--m
Content-Type: application/octet-stream; name="report` + "\u202E" + `gnp.exe"

z
--m--
`),
			wantAttachments: []Attachment{
				{PartID: "1", Filename: "日本.txt", ContentType: "application/octet-stream", Size: 1},
				{PartID: "2", Filename: "café.txt", ContentType: "application/octet-stream", Size: 1},
				{PartID: "3", Filename: "reportgnp.exe", ContentType: "application/octet-stream", Size: 1},
			},
		},
		{
			name: "malformed part header is skipped, the rest decoded",
			input: crlf(`Content-Type: multipart/mixed; boundary=m

--m
this part has no header at all
and no blank line
--m
Content-Type: text/plain
Broken header line without colon

still readable
--m
Content-Type: text/plain; charset=x-unknown-charset

caf` + "\xe9" + `
--m--
`),
			wantText: "still readable\n\ncafé",
			wantWarnings: []string{
				"Part 1 has no readable header; it was skipped.",
				"Part 2 has 1 malformed header line(s)",
				`Part 3: The charset "x-unknown-charset" is unknown`,
			},
		},
		{
			name: "multipart without boundary",
			input: crlf(`Content-Type: multipart/mixed

--x
Content-Type: text/plain

hidden
--x--
`),
			wantWarnings: []string{"The message is a multipart without a boundary"},
		},
		{
			name: "missing closing delimiter",
			input: crlf(`Content-Type: multipart/mixed; boundary=m

--m
Content-Type: text/plain

cut short
`),
			wantText: "cut short",
		},
		{
			name: "boundary prefix in body is not a delimiter",
			input: crlf(`Content-Type: multipart/mixed; boundary=m

--m
Content-Type: text/plain

--mm is not a delimiter
--m --
--m--
`),
			wantText: "--mm is not a delimiter\n--m --",
		},
		{
			name: "encrypted",
			input: crlf(`Content-Type: multipart/encrypted; protocol="application/pgp-encrypted"; boundary=e

--e
Content-Type: application/pgp-encrypted

Version: 1
--e
Content-Type: application/octet-stream

-----BEGIN PGP MESSAGE-----
--e--
`),
			wantWarnings: []string{"is encrypted"},
			wantAttachments: []Attachment{
				{PartID: "1", ContentType: "application/pgp-encrypted", Size: 10},
				{PartID: "2", ContentType: "application/octet-stream", Size: 27},
			},
		},
		{
			name:     "mbox from line",
			input:    "From alice@example.com Mon Jan  1 00:00:00 2024\nSubject: x\n\nbody\n",
			wantText: "body",
		},
		{
			name:     "empty message",
			input:    "",
			wantText: "",
		},
		{
			name:     "malformed top header line is ignored",
			input:    "Subject: x\nnot a header\n\nbody",
			wantText: "body",
			wantWarnings: []string{
				"The message header has 1 malformed line(s)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMessage(strings.NewReader(tt.input), 1<<20)
			if err != nil {
				t.Fatalf("ParseMessage: %v", err)
			}
			if got.Text != tt.wantText {
				t.Errorf("Text = %q, want %q", got.Text, tt.wantText)
			}
			if got.HTMLConverted != tt.wantHTML {
				t.Errorf("HTMLConverted = %v, want %v", got.HTMLConverted, tt.wantHTML)
			}
			if !reflect.DeepEqual(got.Attachments, tt.wantAttachments) {
				t.Errorf("Attachments =\n%+v\nwant\n%+v", got.Attachments, tt.wantAttachments)
			}
			checkWarnings(t, got.Warnings, tt.wantWarnings)
			checkParsed(t, got)
		})
	}
}

// checkParsed checks the promises every ParseMessage result keeps.
func checkParsed(t *testing.T, p *Parsed) {
	t.Helper()
	checkClean(t, "Text", p.Text)
	for _, a := range p.Attachments {
		checkClean(t, "Filename", a.Filename)
		checkClean(t, "ContentType", a.ContentType)
		if strings.ContainsAny(a.Filename, "/\\\n\t") {
			t.Errorf("filename %q has a path separator or line break", a.Filename)
		}
		if !validPartID(a.PartID) {
			t.Errorf("bad part id %q", a.PartID)
		}
		if a.Size < 0 {
			t.Errorf("negative size %d", a.Size)
		}
	}
	for _, w := range p.Warnings {
		checkClean(t, "warning", w)
	}
}

func validPartID(id string) bool {
	if id == "" {
		return false
	}
	for _, n := range strings.Split(id, ".") {
		if n == "" || n[0] == '0' || strings.Trim(n, "0123456789") != "" {
			return false
		}
	}
	return true
}

func TestParseMessageErrors(t *testing.T) {
	readErr := errors.New("connection reset")
	tests := []struct {
		name    string
		input   io.Reader
		wantErr error
	}{
		{"unreadable top header", strings.NewReader("this is not a header\nnor this\n\nbody"), ErrNoHeader},
		{"binary garbage", strings.NewReader("\x00\x01\x02\xff\xfe"), ErrNoHeader},
		{"read error", iotest.ErrReader(readErr), readErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMessage(tt.input, 1<<20)
			if !errors.Is(err, tt.wantErr) || got != nil {
				t.Errorf("ParseMessage = %v, %v; want error %v", got, err, tt.wantErr)
			}
		})
	}
}

func TestParseMessageLimit(t *testing.T) {
	msg := crlf(mixedMessage)
	got, err := ParseMessage(strings.NewReader(msg), 900)
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "Hallo Bob,\n\nschöne Grüße!" {
		t.Errorf("Text = %q", got.Text)
	}
	checkWarnings(t, got.Warnings, []string{"larger than 900 bytes"})
	if len(got.Attachments) >= 3 {
		t.Errorf("attachments after the limit were listed: %+v", got.Attachments)
	}
	checkParsed(t, got)
}

func TestParseMessageHostileStructure(t *testing.T) {
	deep := "Content-Type: multipart/mixed; boundary=b0\r\n\r\n"
	for i := 1; i < 100; i++ {
		deep += fmt.Sprintf("--b%d\r\nContent-Type: multipart/mixed; boundary=b%d\r\n\r\n", i-1, i)
	}
	many := "Content-Type: multipart/mixed; boundary=b\r\n\r\n" + strings.Repeat("--b\r\nContent-Type: application/x\r\n\r\nx\r\n", 2000)
	tests := []struct {
		name         string
		input        string
		wantWarnings []string
	}{
		{"deep nesting", deep, []string{"nested too deeply"}},
		{"many parts", many, []string{"more than 500 parts"}},
		{"many near-boundaries", "Content-Type: multipart/mixed; boundary=" + strings.Repeat("-", 60) + "\r\n\r\n" + strings.Repeat("-", 1<<20), []string{"multipart with no parts"}},
		{"long continuation header", "Content-Type: text/plain;\r\n" + strings.Repeat(" x\r\n", 1<<18) + "\r\nbody", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			got, err := ParseMessage(strings.NewReader(tt.input), 1<<24)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 60*time.Second {
				t.Errorf("took %v", d)
			}
			checkWarnings(t, got.Warnings, tt.wantWarnings)
			checkParsed(t, got)
			if len(got.Attachments) > maxParts {
				t.Errorf("%d attachments, more than %d", len(got.Attachments), maxParts)
			}
		})
	}
}

func TestSplitMultipart(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{"basic", "--b\r\nA\r\n--b\r\nB\r\n--b--\r\n", []string{"A", "B"}},
		{"preamble and epilogue", "pre\r\n--b\r\nA\r\n--b--\r\nepi", []string{"A"}},
		{"transport padding", "--b  \r\nA\r\n--b-- \t\r\n", []string{"A"}},
		{"empty part", "--b\r\n--b--", []string{""}},
		{"no close", "--b\nA\n--b\nB", []string{"A", "B"}},
		{"no delimiter", "just text", nil},
		{"prefix is not a delimiter", "--b\r\n--bb\r\n--b--", []string{"--bb"}},
		{"delimiter not at line start", "--b\r\nx --b\r\n--b--", []string{"x --b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range splitMultipart([]byte(tt.input), "b") {
				got = append(got, string(p))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("splitMultipart(%q) = %q, want %q", tt.input, got, tt.want)
			}
		})
	}
}
