package credentials

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// Seeds besides these live in testdata/fuzz/<target>/.

var (
	fuzzCurrent  = bytes.Repeat([]byte{1}, KeyLength)
	fuzzPrevious = bytes.Repeat([]byte{2}, KeyLength)
)

// FuzzOpen feeds arbitrary text to Open: it never panics, fails only with
// one of the documented errors (whose text is safe to show), and whatever
// it opens is valid credentials. Tokens of the current and the previous key
// are among the seeds, so mutations reach the AEAD and JSON steps.
func FuzzOpen(f *testing.F) {
	s, err := NewSealer(fuzzCurrent, fuzzPrevious)
	if err != nil {
		f.Fatal(err)
	}
	old, _ := NewSealer(fuzzPrevious)
	tok, _ := s.Seal(New("alice@example.test", "pw"))
	oldTok, _ := old.Seal(New("bob@example.test", "p\u00e4ss:word\x7f"))
	f.Add(tok)
	f.Add(oldTok)
	f.Add(tok[:len(tok)-1])
	f.Add("mbx2." + tok[5:])
	f.Add("mbx1.")
	f.Add("  " + tok + "\n")
	f.Add(strings.Repeat("A", 9000))
	f.Fuzz(func(t *testing.T, token string) {
		c, err := s.Open(token)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrForeignKey) && !errors.Is(err, ErrTampered) && !errors.Is(err, ErrNUL) {
				t.Fatalf("undocumented error %v", err)
			}
			if c.Valid() {
				t.Fatalf("credentials %v returned with error %v", c, err)
			}
			return
		}
		if !c.Valid() || strings.ContainsRune(c.User+c.Password(), 0) {
			t.Fatalf("opened invalid credentials from %q", token)
		}
		if strings.ContainsAny(strings.Trim(token, " \t\r\n"), " \t\r\n=+/") {
			t.Fatalf("opened %q, which has a character outside the token alphabet", token)
		}
	})
}

// FuzzSealOpen: whatever user and password are sealed open unchanged, with
// the current key and after a rotation (as the previous key); a third key
// refuses the token as foreign.
func FuzzSealOpen(f *testing.F) {
	f.Add("alice@example.test", "pw")
	f.Add("\u00fcser@b\u00fccher.example", "\xff\xfe invalid utf-8")
	f.Add("a", strings.Repeat("p", 2000))
	cur, _ := NewSealer(fuzzCurrent)
	rotated, _ := NewSealer(bytes.Repeat([]byte{3}, KeyLength), fuzzCurrent)
	third, _ := NewSealer(bytes.Repeat([]byte{4}, KeyLength))
	f.Fuzz(func(t *testing.T, user, password string) {
		tok, err := cur.Seal(New(user, password))
		if user == "" || password == "" || !utf8.ValidString(user) || !utf8.ValidString(password) || strings.ContainsRune(user+password, 0) {
			if err == nil {
				t.Fatalf("sealed %q/%q, which cannot round-trip", user, password)
			}
			return
		}
		if errors.Is(err, ErrTooLong) {
			// At most six payload bytes per input byte: 1,000 bytes always fit.
			if len(user)+len(password) <= 1000 {
				t.Fatalf("%d+%d bytes refused as too long", len(user), len(password))
			}
			if _, err := cur.Open(prefixV1 + strings.Repeat("A", maxToken)); err == nil {
				t.Fatal("Open accepted an over-long token")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(tok, password) && len(password) > 3 {
			t.Fatalf("token %q shows the password", tok)
		}
		for _, s := range []*Sealer{cur, rotated} {
			c, err := s.Open(tok)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if c.User != user || c.Password() != password {
				t.Fatalf("round trip changed %q/%q into %q/%q", user, password, c.User, c.Password())
			}
		}
		if _, err := third.Open(tok); !errors.Is(err, ErrForeignKey) {
			t.Fatalf("a third key opened or misreported the token: %v", err)
		}
	})
}

// Found by FuzzSealOpen: a password with invalid UTF-8 (raw Latin-1 bytes
// from a header) was sealed, and JSON turned its bytes into U+FFFD, so the
// token opened as another password. Sealing now refuses it.
func TestSealRefusesInvalidUTF8(t *testing.T) {
	s, _ := NewSealer(fuzzCurrent)
	for _, c := range []Credentials{New("bob", "caf\xe9"), New("b\xf6b", "pw")} {
		if _, err := s.Seal(c); !errors.Is(err, ErrNotUTF8) {
			t.Fatalf("Seal(%q): %v, want ErrNotUTF8", c.User, err)
		}
	}
}
