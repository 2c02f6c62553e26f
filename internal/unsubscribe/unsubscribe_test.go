package unsubscribe

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/egress"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

func TestParse(t *testing.T) {
	o := Parse("<mailto:leave@lists.example.org?subject=unsubscribe%20me>,\r\n <https://example.org/u?id=1&x=2>, <http://example.org/plain>, <https://user:pw@example.org/x>, <ftp://x>",
		" List-Unsubscribe=One-Click ", "Weekly <weekly.example.org>")
	if len(o.HTTPS) != 1 || o.HTTPS[0] != "https://example.org/u?id=1&x=2" {
		t.Errorf("https = %q", o.HTTPS)
	}
	if len(o.Mailto) != 1 || len(o.Ignored) != 3 || o.List != "Weekly <weekly.example.org>" {
		t.Errorf("mailto %q ignored %q list %q", o.Mailto, o.Ignored, o.List)
	}
	if o.OneClick || !strings.Contains(o.Note, "no DKIM signature") {
		t.Errorf("one-click without a signature: %v %q", o.OneClick, o.Note)
	}
	o.Decide("example.org", "mx.example.test")
	if !o.OneClick || o.Choose().Kind != OneClickPost || o.Choose().URL != o.HTTPS[0] {
		t.Errorf("signed: %+v %+v", o, o.Choose())
	}
	// Without List-Unsubscribe-Post: the mailto, its subject as given.
	o = Parse("<https://example.org/u>, <mailto:leave@lists.example.org?subject=unsubscribe%20me>", "", "")
	o.Decide("example.org", "mx.example.test")
	if a := o.Choose(); o.OneClick || a.Kind != SendMail || a.Mailto.To[0] != "leave@lists.example.org" || a.Mailto.Subject != "unsubscribe me" || a.Mailto.Body != "unsubscribe" {
		t.Errorf("mailto: %+v", a)
	}
	// Only a web link: it is handed to the person, never fetched.
	if a := Parse("<https://example.org/u>", "", "").Choose(); a.Kind != OpenLink {
		t.Errorf("link: %+v", a)
	}
	if Parse("", "List-Unsubscribe=One-Click", "") != nil {
		t.Error("options without List-Unsubscribe")
	}
	if a := Parse("no brackets https://example.org/u", "", "").Choose(); a.Kind != "" {
		t.Errorf("a URI outside angle brackets was taken: %+v", a)
	}
}

// testCert is one self-signed certificate for 127.0.0.1 and 127.0.0.2,
// shared by every test server, and the pool that trusts it.
var testCert = sync.OnceValues(func() (tls.Certificate, *x509.CertPool) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("127.0.0.2")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
})

// tlsServer runs an HTTPS server on addr (127.0.0.1:0, 127.0.0.2:0) with
// testCert, counting the requests it gets.
func tlsServer(t *testing.T, addr string, h http.HandlerFunc) (*httptest.Server, *x509.CertPool, *atomic.Int32) {
	t.Helper()
	cert, pool := testCert()
	var hits atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h(w, r)
	}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("cannot listen on %s: %v", addr, err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, pool, &hits
}

func TestOneClickPostsOnce(t *testing.T) {
	var got string
	srv, pool, hits := tlsServer(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = fmt.Sprintf("%s %s %s cookie=%q", r.Method, r.Header.Get("Content-Type"), b, r.Header.Get("Cookie"))
		http.SetCookie(w, &http.Cookie{Name: "track", Value: "1"})
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(strings.Repeat("x", 1<<20))) // an answer too long to read whole
	})
	p := NewPoster(Config{AllowPrivate: true, RootCAs: pool})
	res, err := p.OneClick(context.Background(), srv.URL+"/unsubscribe?u=1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != http.StatusAccepted || hits.Load() != 1 {
		t.Errorf("status %d, %d requests", res.Status, hits.Load())
	}
	if got != `POST application/x-www-form-urlencoded List-Unsubscribe=One-Click cookie=""` {
		t.Errorf("request: %s", got)
	}
}

// Without AllowPrivate the loopback address is refused before anything
// is sent.
func TestOneClickRefusesLoopback(t *testing.T) {
	srv, pool, hits := tlsServer(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {})
	_, err := NewPoster(Config{RootCAs: pool}).OneClick(context.Background(), srv.URL+"/u")
	if mailerr.KindOf(err) != mailerr.Forbidden || !strings.Contains(mailerr.Message(err), "may not connect") || hits.Load() != 0 {
		t.Errorf("err %v, %d requests", err, hits.Load())
	}
}

// A redirect is followed only after its target passes the same check:
// here 127.0.0.2 stands for a public address and 127.0.0.1 is refused, as
// loopback is in production.
func TestOneClickRedirects(t *testing.T) {
	inner, pool, innerHits := tlsServer(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	check := func(network, address string) error {
		ap, err := netip.ParseAddrPort(address)
		if err == nil && ap.Addr() == netip.MustParseAddr("127.0.0.2") {
			return nil
		}
		return fmt.Errorf("%w: %s", egress.ErrNotPublic, address)
	}
	for _, c := range []struct {
		name   string
		status int
		to     string
		want   string
		kind   mailerr.Kind
	}{
		{"to loopback", http.StatusTemporaryRedirect, inner.URL + "/x", "may not connect", mailerr.Forbidden},
		{"to http", http.StatusPermanentRedirect, "http://127.0.0.2/x", "only https", mailerr.Forbidden},
		{"with credentials", http.StatusFound, "https://u:p@127.0.0.2/x", "credentials", mailerr.Forbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			outer, _, outerHits := tlsServer(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, c.to, c.status)
			})
			before := innerHits.Load()
			_, err := NewPoster(Config{RootCAs: pool, Check: check}).OneClick(context.Background(), outer.URL+"/u")
			if mailerr.KindOf(err) != c.kind || !strings.Contains(mailerr.Message(err), c.want) {
				t.Errorf("err = %v, want %s", err, c.want)
			}
			if outerHits.Load() != 1 || innerHits.Load() != before {
				t.Errorf("requests: outer %d, inner %d", outerHits.Load(), innerHits.Load()-before)
			}
		})
	}
	t.Run("followed when allowed", func(t *testing.T) {
		outer, _, _ := tlsServer(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, inner.URL+"/final", http.StatusTemporaryRedirect)
		})
		before := innerHits.Load()
		res, err := NewPoster(Config{RootCAs: pool, AllowPrivate: true}).OneClick(context.Background(), outer.URL+"/u")
		if err != nil || res.Redirects != 1 || innerHits.Load() != before+1 {
			t.Errorf("res %+v err %v", res, err)
		}
	})
	t.Run("loop", func(t *testing.T) {
		var self string
		loop, loopPool, hits := tlsServer(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, self, http.StatusTemporaryRedirect)
		})
		self = loop.URL + "/again"
		_, err := NewPoster(Config{RootCAs: loopPool, Check: check}).OneClick(context.Background(), loop.URL)
		if err == nil || !strings.Contains(mailerr.Message(err), "more than 5") || hits.Load() != 6 {
			t.Errorf("err %v, %d requests", err, hits.Load())
		}
	})
}
