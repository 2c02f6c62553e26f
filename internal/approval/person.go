package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// SignInTTL is how long a person stays signed in on the approval page.
const SignInTTL = 15 * time.Minute

// person is who signed in on the approval page: the caller they proved to
// be (the mailbox, and the agent of the links they may answer), until
// when, and a random nonce that the page's anti-forgery tokens are made
// from. It travels sealed in an HttpOnly, SameSite=Strict cookie; nothing
// is stored.
type person struct {
	Caller
	nonce   string
	expires time.Time
}

type personPayload struct {
	A   string `json:"a"`
	G   string `json:"g,omitempty"`
	N   string `json:"n"`
	Exp int64  `json:"exp"`
}

// newPerson seals who, signed in now, as a cookie value.
func (a *Approvals) newPerson(who Caller) (string, error) {
	p := personPayload{A: who.Account, G: who.Agent, N: nonce(), Exp: a.now().Add(SignInTTL).Unix()}
	plain, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	return a.sealer.SealOAuth(credentials.KindApprovalPerson, plain)
}

// openPerson opens a cookie value newPerson made, if it has not expired.
func (a *Approvals) openPerson(v string) (person, bool) {
	plain, err := a.sealer.OpenOAuth(credentials.KindApprovalPerson, v)
	if err != nil {
		return person{}, false
	}
	var p personPayload
	if json.Unmarshal(plain, &p) != nil || p.A == "" || p.N == "" {
		return person{}, false
	}
	exp := time.Unix(p.Exp, 0)
	if !a.now().Before(exp) {
		return person{}, false
	}
	return person{Caller: Caller{Account: p.A, Agent: p.G}, nonce: p.N, expires: exp}, true
}

// csrf is the anti-forgery token of one link's form for one signed-in
// person: derived from the secret nonce in their sealed cookie and the
// link's nonce, never chosen by the client. Only a browser holding the
// cookie can have been shown it, and it answers no other link.
func (p person) csrf(linkNonce string) string {
	sum := sha256.Sum256([]byte("mailbox-mcp approval form\x00" + p.nonce + "\x00" + linkNonce))
	return hex.EncodeToString(sum[:])
}
