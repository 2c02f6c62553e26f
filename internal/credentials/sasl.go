package credentials

import (
	"errors"
	"strings"

	"github.com/emersion/go-sasl"
)

// SASL mechanism names for an OAuth access token.
const (
	MechOAuthBearer = "OAUTHBEARER" // RFC 7628
	MechXOAuth2     = "XOAUTH2"     // Google's and Microsoft's older one
)

// OAuthSASL returns the SASL client that presents c's access token, picked
// from the mechanisms the server offers (OAUTHBEARER first, the standard,
// then XOAUTH2). ok is false when the server offers neither, or c is not an
// OAuth credential. Both IMAP AUTHENTICATE and SMTP AUTH use it.
func (c Credentials) OAuthSASL(offered []string) (client sasl.Client, ok bool) {
	if !c.oauth {
		return nil, false
	}
	has := func(mech string) bool {
		for _, m := range offered {
			if strings.EqualFold(strings.TrimSpace(m), mech) {
				return true
			}
		}
		return false
	}
	switch {
	case has(MechOAuthBearer):
		return &oauthClient{mech: MechOAuthBearer, user: c.User, token: c.password}, true
	case has(MechXOAuth2):
		return &oauthClient{mech: MechXOAuth2, user: c.User, token: c.password}, true
	}
	return nil, false
}

// ValidAccessToken reports whether t can be an OAuth bearer token (RFC
// 6750's b64token: printable ASCII without spaces). Anything else could
// break the SASL message's framing (\x01 separates its fields).
func ValidAccessToken(t string) bool {
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] > '~' {
			return false
		}
	}
	return true
}

// oauthClient is OAUTHBEARER or XOAUTH2. go-sasl has an OAUTHBEARER client,
// but it neither escapes ',' and '=' in the user name (RFC 5801 saslname)
// nor answers the server's error challenge: go-imap then leaves the
// AUTHENTICATE unanswered and the connection hangs. go-sasl has no XOAUTH2
// client at all.
type oauthClient struct {
	mech, user, token string
}

func (a *oauthClient) Start() (string, []byte, error) {
	if !ValidAccessToken(a.token) || strings.ContainsAny(a.user, "\x00\x01") {
		return "", nil, errors.New("credentials: the access token or user name cannot be sent in a SASL message")
	}
	if a.mech == MechXOAuth2 {
		return a.mech, []byte("user=" + a.user + "\x01auth=Bearer " + a.token + "\x01\x01"), nil
	}
	name := strings.NewReplacer("=", "=3D", ",", "=2C").Replace(a.user)
	return a.mech, []byte("n,a=" + name + ",\x01auth=Bearer " + a.token + "\x01\x01"), nil
}

// Next answers the only challenge either mechanism has: the server's JSON
// error after refusing the token. The answer ends the exchange, and the
// server then sends its failure (IMAP NO, SMTP 535). RFC 7628 says to
// answer with a lone \x01; an empty answer would be clearer for XOAUTH2,
// but go-imap sends an empty answer as "=", which Dovecot refuses as bad
// base64, and servers fail the login whatever the answer.
func (a *oauthClient) Next([]byte) ([]byte, error) { return []byte{0x01}, nil }
