package credentials

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"
)

// Link layout (an attachment download link, version 1):
//
//	"att1." base64url-no-padding( keyID[4] | nonce[12] | AES-256-GCM(payload) )
//
// The same keys as tokens, but the additional data is "att1." plus the key
// id, so a credentials token can never be opened as a link nor a link as a
// token: either fails the tag. A link is a bearer capability for one part
// of one message until it expires, so it holds the login too (a gateway
// keeps no state between requests), sealed like a token's.
const (
	prefixLink = "att1."
	maxLink    = 4 << 10
)

// Errors a link can be refused with. Their text is safe to show anyone who
// presents the link: none says whose mailbox it is for.
var (
	ErrLinkMalformed  = errors.New("this is not a valid download link (malformed or truncated)")
	ErrLinkForeignKey = errors.New("this download link was made by another server, or before its key was changed")
	ErrLinkTampered   = errors.New("this download link has been altered and cannot be used")
	ErrLinkExpired    = errors.New("this download link has expired; ask for the attachment again to get a new one")
)

// Link is what a download link grants: the decoded bytes of one part of
// one message of one mailbox, until Expires.
type Link struct {
	Creds       Credentials
	Folder      string
	UID         uint32
	UIDValidity uint32
	PartID      string
	Expires     time.Time
}

// linkPayload is the sealed content of a link.
type linkPayload struct {
	U   string `json:"u"`
	P   string `json:"p"`
	F   string `json:"f"`
	ID  uint32 `json:"id"`
	UV  uint32 `json:"uv"`
	Pt  string `json:"pt"`
	Exp int64  `json:"exp"`
	K   string `json:"k,omitempty"` // as in a token's payload
	H   string `json:"h,omitempty"`
	Pv  string `json:"pv,omitempty"`
}

// SealLink returns a link for l under the current key. The expiry keeps
// whole seconds.
func (s *Sealer) SealLink(l Link) (string, error) {
	c := l.Creds
	switch {
	case !c.Valid():
		return "", errors.New("credentials: a link needs a user and password")
	case l.UID == 0 || l.PartID == "" || l.Folder == "" || l.Expires.IsZero():
		return "", errors.New("credentials: a link needs a folder, a UID, a part and an expiry")
	case !c.Expires.IsZero() && l.Expires.After(c.Expires):
		return "", errors.New("credentials: a link must not outlive the credentials it carries")
	case !utf8.ValidString(c.User) || !utf8.ValidString(c.password) || !utf8.ValidString(l.Folder) || !utf8.ValidString(l.PartID):
		return "", ErrNotUTF8
	case strings.ContainsRune(c.User, 0) || strings.ContainsRune(c.password, 0):
		return "", ErrNUL
	}
	lp := linkPayload{U: c.User, P: c.password, F: l.Folder, ID: l.UID, UV: l.UIDValidity, Pt: l.PartID, Exp: l.Expires.Unix(),
		H: s.canonicalHost(c.Host), Pv: c.Provider}
	if c.oauth {
		lp.K = kindOAuth
	}
	plain, err := json.Marshal(lp)
	if err != nil {
		return "", err
	}
	defer clear(plain)
	raw := make([]byte, keyIDLen+nonceLen, keyIDLen+nonceLen+len(plain)+tagLen)
	copy(raw, s.current.id[:])
	if _, err := rand.Read(raw[keyIDLen:]); err != nil {
		return "", err
	}
	raw = s.current.aead.Seal(raw, raw[keyIDLen:keyIDLen+nonceLen], plain, linkAdditional(s.current.id))
	link := prefixLink + b64.EncodeToString(raw)
	if len(link) > maxLink {
		return "", ErrTooLong
	}
	return link, nil
}

// OpenLink checks and opens a link at time now. Its errors are the
// ErrLink* values above: malformed, made under another key, altered, or
// expired (checked last, so an altered link is never reported as merely
// expired).
func (s *Sealer) OpenLink(link string, now time.Time) (Link, error) {
	if len(link) > maxLink {
		return Link{}, ErrLinkMalformed
	}
	body, ok := strings.CutPrefix(link, prefixLink)
	if !ok || !base64URL(body) {
		return Link{}, ErrLinkMalformed
	}
	raw, err := b64.DecodeString(body)
	if err != nil || len(raw) < keyIDLen+nonceLen+tagLen {
		return Link{}, ErrLinkMalformed
	}
	var id [keyIDLen]byte
	copy(id[:], raw)
	k, ok := s.keyFor(id)
	if !ok {
		return Link{}, ErrLinkForeignKey
	}
	plain, err := k.aead.Open(nil, raw[keyIDLen:keyIDLen+nonceLen], raw[keyIDLen+nonceLen:], linkAdditional(id))
	if err != nil {
		return Link{}, ErrLinkTampered
	}
	defer clear(plain)
	var p linkPayload
	if err := json.Unmarshal(plain, &p); err != nil || p.U == "" || p.P == "" || p.F == "" || p.ID == 0 || p.Pt == "" || (p.K != "" && p.K != kindOAuth) {
		return Link{}, ErrLinkMalformed
	}
	creds := New(p.U, p.P)
	if p.K == kindOAuth {
		creds = NewOAuth(p.U, p.P)
	}
	creds.Host, creds.Provider = s.canonicalHost(p.H), p.Pv
	l := Link{Creds: creds, Folder: p.F, UID: p.ID, UIDValidity: p.UV, PartID: p.Pt, Expires: time.Unix(p.Exp, 0)}
	if !now.Before(l.Expires) {
		return Link{}, ErrLinkExpired
	}
	return l, nil
}

func linkAdditional(id [keyIDLen]byte) []byte {
	return append([]byte(prefixLink), id[:]...)
}
