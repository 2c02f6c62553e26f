package credentials

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
)

// Token layout (version 1):
//
//	"mbx1." base64url-no-padding( keyID[4] | nonce[12] | AES-256-GCM(payload) )
//
// The additional data is "mbx1." plus the key id, so neither can be changed
// without the tag failing. The key id (a hash of the key) lets a server tell
// "another key" from "tampered" and, with a previous key configured, pick
// the right key during a rotation without trying each.
const (
	prefixV1  = "mbx1."
	keyIDLen  = 4
	nonceLen  = 12
	tagLen    = 16
	maxToken  = 8 << 10 // far above any real token; refuses huge inputs early
	KeyLength = 32
)

// Errors a token can be refused with. Their text is safe to show a user.
var (
	ErrMalformed  = errors.New("the credentials token is not a mailbox-mcp token (malformed or truncated)")
	ErrVersion    = errors.New("the credentials token has an unsupported version")
	ErrForeignKey = errors.New("the credentials token was sealed with a different key than this server's (made by another server, or the key was rotated)")
	ErrTampered   = errors.New("the credentials token has been altered or truncated and cannot be opened")
	// ErrNotUTF8 refuses to seal what the token's JSON payload could not
	// carry unchanged (it would open as a different password).
	ErrNotUTF8 = errors.New("the user name and password must be valid UTF-8 text to be sealed into a token")
	// ErrTooLong refuses to seal credentials whose token Open would refuse
	// as too long (control characters take six bytes each in the payload).
	ErrTooLong = errors.New("the user name and password are too long to be sealed into a token")
	// ErrAgentName refuses to seal an agent name that is not one.
	ErrAgentName = errors.New("the agent name cannot be sealed into a token: " + AgentNameRule)
	// ErrExpired refuses a token made from a sign-in after that sign-in's
	// access token expired.
	ErrExpired = errors.New("the credentials token has expired (it was made from a sign-in, and lasts no longer than the sign-in's access token)")
	// ErrNUL refuses credentials with a NUL byte: no mail server accepts
	// one, and in a SASL PLAIN message it separates the fields, so it
	// could change whose login is attempted.
	ErrNUL = errors.New("the user name and password must not contain a NUL character")
)

// kindOAuth marks a sealed secret that is an OAuth access token.
const kindOAuth = "oauth"

// payload is the sealed content. Version 1 has no scope and no agent; a
// scoped token, or one bound to an agent, is version 2, so that a gateway
// too old to know them refuses it (ErrVersion) instead of ignoring the
// narrowing during a rolling upgrade.
type payload struct {
	V   int    `json:"v"`
	U   string `json:"u"`
	P   string `json:"p"`
	IAT int64  `json:"iat"`
	// A is the access level the token narrows to ("read", "organize",
	// "full"); NS forbids sending. Version 2 only.
	A  string `json:"a,omitempty"`
	NS bool   `json:"ns,omitempty"`
	// Ag is the agent name the token acts as: binding, a request cannot
	// name another. Version 2 only.
	Ag string `json:"ag,omitempty"`
	// K is the kind of secret P holds: "" a password, "oauth" an OAuth
	// access token. Version 2 only.
	K string `json:"k,omitempty"`
	// Exp is when the token stops opening (Unix seconds): set when it was
	// made from credentials that expire (a sign-in grant). Version 2 only.
	Exp int64 `json:"exp,omitempty"`
	// Ap is the approval the token asks for besides the operator's
	// ("send", "destructive", "all"). Version 2 only.
	Ap string `json:"ap,omitempty"`
	// H is the mail host the login is for ("" the default); Pv the
	// provider whose sign-in issued the access token P. Version 2 only.
	H  string `json:"h,omitempty"`
	Pv string `json:"pv,omitempty"`
}

type sealKey struct {
	id   [keyIDLen]byte
	aead cipher.AEAD
}

// Sealer seals and opens tokens with the current key, and opens tokens of
// any older keys it was given.
type Sealer struct {
	current sealKey
	older   []sealKey
	// hostName, when set, is the canonical name of a login's mail host
	// (CanonicalHosts).
	hostName func(string) string
}

// CanonicalHosts makes every login this Sealer seals or opens name its
// mail host as name does (hosts.Canonical: "" for the default host
// however it is spelt), so that a token made before, or by a caller who
// spelt the host another way, keys the same account as everything else.
// Call it once, before the Sealer is used.
func (s *Sealer) CanonicalHosts(name func(string) string) { s.hostName = name }

// canonicalHost is host as CanonicalHosts names it.
func (s *Sealer) canonicalHost(host string) string {
	if s.hostName == nil || host == "" {
		return host
	}
	return s.hostName(host)
}

// NewSealer makes a Sealer for a 32-byte key, plus any previous keys still
// accepted for opening.
func NewSealer(key []byte, previous ...[]byte) (*Sealer, error) {
	cur, err := newSealKey(key)
	if err != nil {
		return nil, err
	}
	s := &Sealer{current: cur}
	for _, p := range previous {
		k, err := newSealKey(p)
		if err != nil {
			return nil, err
		}
		s.older = append(s.older, k)
	}
	return s, nil
}

func newSealKey(key []byte) (sealKey, error) {
	if len(key) != KeyLength {
		return sealKey{}, fmt.Errorf("credentials: key must be %d bytes, got %d", KeyLength, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return sealKey{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return sealKey{}, err
	}
	sum := sha256.Sum256(append([]byte("mailbox-mcp key id\x00"), key...))
	var k sealKey
	copy(k.id[:], sum[:keyIDLen])
	k.aead = aead
	return k, nil
}

// KeyID is the current key's public identifier, in hex.
func (s *Sealer) KeyID() string { return fmt.Sprintf("%x", s.current.id) }

var b64 = base64.RawURLEncoding.Strict()

// Seal returns a token for c under the current key.
func (s *Sealer) Seal(c Credentials) (string, error) {
	if !c.Valid() {
		return "", errors.New("credentials: user and password are required")
	}
	if !utf8.ValidString(c.User) || !utf8.ValidString(c.password) {
		return "", ErrNotUTF8
	}
	if strings.ContainsRune(c.User, 0) || strings.ContainsRune(c.password, 0) {
		return "", ErrNUL
	}
	if c.Agent != "" && !ValidAgentName(c.Agent) {
		return "", ErrAgentName
	}
	p := payload{V: 1, U: c.User, P: c.password, IAT: time.Now().Unix()}
	if c.Scope.Narrowed() {
		p.V, p.NS = 2, c.Scope.NoSend
		if c.Scope.Level != 0 {
			p.A = c.Scope.Level.String()
		}
		if c.Scope.Approval != 0 {
			p.Ap = c.Scope.Approval.String()
		}
	}
	if c.Agent != "" {
		p.V, p.Ag = 2, c.Agent
	}
	if c.oauth {
		p.V, p.K = 2, kindOAuth
	}
	if !c.Expires.IsZero() {
		p.V, p.Exp = 2, c.Expires.Unix()
	}
	if h := s.canonicalHost(c.Host); h != "" {
		p.V, p.H = 2, h
	}
	if c.Provider != "" {
		p.V, p.Pv = 2, c.Provider
	}
	plain, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	raw := make([]byte, keyIDLen+nonceLen, keyIDLen+nonceLen+len(plain)+tagLen)
	copy(raw, s.current.id[:])
	if _, err := rand.Read(raw[keyIDLen:]); err != nil {
		return "", err
	}
	raw = s.current.aead.Seal(raw, raw[keyIDLen:keyIDLen+nonceLen], plain, additional(s.current.id))
	clear(plain)
	token := prefixV1 + b64.EncodeToString(raw)
	if len(token) > maxToken {
		return "", ErrTooLong
	}
	return token, nil
}

// Open checks and opens a token at the current time. Its errors are the
// Err* values above.
func (s *Sealer) Open(token string) (Credentials, error) { return s.OpenAt(token, time.Now()) }

// OpenAt checks and opens a token at time now. Its errors are the Err*
// values above; expiry is checked last, so an altered token is never
// reported as merely expired.
// Blanks around the token (from copying and pasting) are ignored; inside
// it, any character outside the token's alphabet is refused, even those
// Go's base64 decoder would skip (line breaks): a token is one exact
// string.
func (s *Sealer) OpenAt(token string, now time.Time) (Credentials, error) {
	token = strings.Trim(token, " \t\r\n")
	if len(token) > maxToken {
		return Credentials{}, ErrMalformed
	}
	body, ok := strings.CutPrefix(token, prefixV1)
	if !ok {
		if v, _, found := strings.Cut(token, "."); found && strings.HasPrefix(v, "mbx") && len(v) <= 8 {
			return Credentials{}, ErrVersion
		}
		return Credentials{}, ErrMalformed
	}
	if !base64URL(body) {
		return Credentials{}, ErrMalformed
	}
	raw, err := b64.DecodeString(body)
	if err != nil || len(raw) < keyIDLen+nonceLen+tagLen {
		return Credentials{}, ErrMalformed
	}
	var id [keyIDLen]byte
	copy(id[:], raw)
	k, ok := s.keyFor(id)
	if !ok {
		return Credentials{}, ErrForeignKey
	}
	nonce := raw[keyIDLen : keyIDLen+nonceLen]
	plain, err := k.aead.Open(nil, nonce, raw[keyIDLen+nonceLen:], additional(id))
	if err != nil {
		return Credentials{}, ErrTampered
	}
	defer clear(plain)
	var p payload
	if err := json.Unmarshal(plain, &p); err != nil || (p.V != 1 && p.V != 2) || (p.V == 1 && (p.A != "" || p.NS || p.Ag != "" || p.K != "" || p.Exp != 0 || p.Ap != "" || p.H != "" || p.Pv != "")) || (p.K != "" && p.K != kindOAuth) {
		return Credentials{}, ErrVersion
	}
	c := New(p.U, p.P)
	if p.K == kindOAuth {
		c = NewOAuth(p.U, p.P)
	}
	if p.V == 2 {
		c.Scope.NoSend = p.NS
		if p.A != "" {
			l, err := access.Parse(p.A)
			if err != nil {
				return Credentials{}, ErrVersion
			}
			c.Scope.Level = l
		}
		if p.Ag != "" && !ValidAgentName(p.Ag) {
			return Credentials{}, ErrVersion
		}
		c.Agent = p.Ag
		if p.Exp != 0 {
			c.Expires = time.Unix(p.Exp, 0)
		}
		c.Host, c.Provider = s.canonicalHost(p.H), p.Pv
		if p.Ap != "" {
			ap, err := access.ParseApproval(p.Ap)
			if err != nil || ap == 0 {
				return Credentials{}, ErrVersion
			}
			c.Scope.Approval = ap
		}
	}
	if !c.Valid() {
		return Credentials{}, ErrMalformed
	}
	if strings.ContainsRune(c.User, 0) || strings.ContainsRune(c.password, 0) {
		// sealed before Seal refused it
		return Credentials{}, ErrNUL
	}
	if !c.Expires.IsZero() && !now.Before(c.Expires) {
		return Credentials{}, ErrExpired
	}
	return c, nil
}

// base64URL reports whether s holds only the unpadded base64url alphabet.
func base64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

func (s *Sealer) keyFor(id [keyIDLen]byte) (sealKey, bool) {
	if id == s.current.id {
		return s.current, true
	}
	for _, k := range s.older {
		if id == k.id {
			return k, true
		}
	}
	return sealKey{}, false
}

func additional(id [keyIDLen]byte) []byte {
	return append([]byte(prefixV1), id[:]...)
}

// NewKey returns a fresh random key in hex, for ENCRYPTION_KEY.
func NewKey() (string, error) {
	b := make([]byte, KeyLength)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", b), nil
}
