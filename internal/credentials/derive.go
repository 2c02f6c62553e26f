package credentials

import (
	"fmt"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
)

// Narrowing is what a token made from some credentials is asked to allow.
// Zero values inherit: Level 0 keeps the credentials' level, Send nil
// their sending, Agent "" their agent binding. Approval is added to what
// the credentials already ask a person to approve (never taken away).
type Narrowing struct {
	Level    access.Level
	Send     *bool
	Agent    string
	Approval access.Approval
}

// Derive returns the credentials a token made from c may carry: never more
// than c itself may do. A level above c's scope, sending that c may not do,
// or an agent other than the one c is bound to is refused (not lowered in
// silence, so that the caller knows what the token does); the approval c
// asks for stays (more may be added); the expiry is c's, so a token made
// from a sign-in dies with it. The operator's level
// (MAILBOX_ACCESS) is the caller's to check.
//
// c.Agent must be the agent c is bound to (a token's), not one a request
// merely named.
func (c Credentials) Derive(n Narrowing) (Credentials, error) {
	out := c
	if n.Level != 0 {
		if c.Scope.Level != 0 && n.Level > c.Scope.Level {
			return Credentials{}, fmt.Errorf("access %s is more than the credentials this token would be made from allow (%s, the scope of the sign-in or token they came from); no token was made", n.Level, c.Scope.Level)
		}
		out.Scope.Level = n.Level
	}
	if n.Send != nil {
		if *n.Send && c.Scope.NoSend {
			return Credentials{}, fmt.Errorf("send is more than the credentials this token would be made from allow (they may not send mail); no token was made")
		}
		out.Scope.NoSend = !*n.Send
	}
	out.Scope.Approval |= n.Approval
	if n.Agent != "" {
		if c.Agent != "" && n.Agent != c.Agent {
			return Credentials{}, fmt.Errorf("the credentials this token would be made from act only as agent %s, so a token made from them cannot act as agent %s; no token was made", c.Agent, n.Agent)
		}
		out.Agent = n.Agent
	}
	return out, nil
}
