package transport

import "crypto/tls"

// sessions holds the TLS sessions (TLS 1.3 tickets) of every connection
// this process makes to a mail server, IMAP and SMTP alike, so that the
// next connection resumes instead of doing a full handshake: the server
// sends and signs no certificate and the client verifies no chain again.
// One cache for the process, bounded: a gateway talks to one host, and
// each endpoint keeps only its newest ticket.
//
// Sharing it between users is safe because a TLS session is not a user's:
// it authenticates the server to the gateway and nothing else. Every user
// still logs in inside every connection; a resumed handshake still runs a
// fresh (EC)DHE exchange (crypto/tls offers only psk_dhe_ke), so no two
// connections share traffic keys; crypto/tls re-checks the cached chain
// against the current roots and host name before offering a ticket; and a
// ticket tells the server only that this client connected before, which
// its address already says. (No client certificate is configured; if one
// ever is, a session would carry that certificate, the gateway's own. A
// VerifyPeerCertificate hook would not run on resumption: pin with
// VerifyConnection instead.)
var sessions = tls.NewLRUClientSessionCache(64)

// endpointSessions is the process cache seen by one endpoint. crypto/tls
// keys sessions by server name only, and Dovecot and Postfix usually share
// one name: each would then overwrite the other's ticket and neither would
// resume. The address (host and port) keeps them apart.
type endpointSessions struct{ addr string }

func (s endpointSessions) key(serverName string) string { return s.addr + " " + serverName }

func (s endpointSessions) Get(serverName string) (*tls.ClientSessionState, bool) {
	return sessions.Get(s.key(serverName))
}

func (s endpointSessions) Put(serverName string, cs *tls.ClientSessionState) {
	sessions.Put(s.key(serverName), cs)
}
