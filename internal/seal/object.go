package seal

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
)

// objectDomain separates the seals of the objects modelgate makes
// (SignObject) from those of reserved metadata (Sign).
const objectDomain = "modelgate.io/object-seal " + version

// SignObject returns the seal of an object modelgate makes itself (a GPU
// claim's ResourceClaimTemplate): of its kind, namespace and name, and of
// content, what the object holds in an encoding the caller fixes. It is
// modelgate's proof that it made the object: on an object of another name
// or namespace, or once the content has changed, it no longer verifies.
// "" for a nil Key.
func (k *Key) SignObject(kind, namespace, name string, content []byte) string {
	if k == nil || k.pool == nil {
		return ""
	}
	var mac [macSize]byte
	k.objectMAC(&mac, kind, namespace, name, content)
	return encode(&mac)
}

// VerifyObject reports whether s is the seal SignObject makes with k of
// that kind, namespace, name and content. It is false for a nil Key.
func (k *Key) VerifyObject(s, kind, namespace, name string, content []byte) bool {
	if k == nil || k.pool == nil {
		return false
	}
	var got, want [macSize]byte
	if !decode(s, &got) {
		return false
	}
	k.objectMAC(&want, kind, namespace, name, content)
	return hmac.Equal(got[:], want[:])
}

// objectMAC writes into out the truncated HMAC of the domain, the kind,
// namespace and name and the content, each length-prefixed.
func (k *Key) objectMAC(out *[macSize]byte, kind, namespace, name string, content []byte) {
	h := hmac.New(sha256.New, k.secret)
	var n [binary.MaxVarintLen64]byte
	for _, part := range [][]byte{[]byte(objectDomain), []byte(kind), []byte(namespace), []byte(name), content} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(part)))])
		h.Write(part)
	}
	var sum [sha256.Size]byte
	copy(out[:], h.Sum(sum[:0]))
}
