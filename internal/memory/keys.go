package memory

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
	"sync"
)

// keyPrefix starts every key the gateway writes, so an operator can see
// (and count, and delete) them: "mmcp:NAME:KIND:HMAC".
const keyPrefix = "mmcp:"

// namer turns identifiers into key names that reveal nothing: an HMAC
// under a key derived from ENCRYPTION_KEY, 128 bits, base64url. Someone
// with a dump of Redis learns how many entries each memory holds, not
// whose or what.
type namer struct {
	pool sync.Pool // of hash.Hash under the key
}

// nameKeyInfo is HKDF's info: a key for naming Redis keys, nothing else.
const nameKeyInfo = "mailbox-mcp shared memory key names v1"

func newNamer(secret []byte) (*namer, error) {
	k, err := hkdf.Key(sha256.New, secret, nil, nameKeyInfo, 32)
	if err != nil {
		return nil, err
	}
	n := &namer{}
	n.pool.New = func() any { return hmac.New(sha256.New, k) }
	return n, nil
}

// key is the key name of an entry of kind ("o" once, "c" counter, "b"
// bucket, "s" slots, "g" group, "f" family) in memory name.
func (n *namer) key(name, kind string, parts ...string) string {
	return keyPrefix + name + ":" + kind + ":" + n.hash(name, kind, parts...)
}

// hash is the HMAC of the parts, each length-prefixed so that no two
// lists of parts give the same input.
func (n *namer) hash(name, kind string, parts ...string) string {
	h := n.pool.Get().(hash.Hash)
	defer n.pool.Put(h)
	h.Reset()
	var buf [binary.MaxVarintLen64]byte
	for _, p := range append([]string{name, kind}, parts...) {
		h.Write(binary.AppendUvarint(buf[:0], uint64(len(p))))
		h.Write([]byte(p))
	}
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0])[:16])
}
