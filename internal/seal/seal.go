// Package seal signs the metadata modelgate vouches for, so that a later
// review can tell modelgate's own owner labels and injection record from
// ones a user wrote by hand.
//
// modelgate writes the owner label, the team label, the owner-full
// annotation and the modelgate.io/injected record on the objects and pod
// templates it admits, and controllers copy templates into the objects they
// create. When such an object reaches modelgate, the reserved metadata it
// carries is trusted only if its modelgate.io/seal annotation is an HMAC,
// under a key only modelgate's replicas hold, of those values and the
// namespace. Anyone can copy a sealed template inside a namespace (the seal
// carries no object name, since one template stamps many objects), but no
// one without the key can make up an owner or a record.
//
// The objects modelgate makes itself (the GPU claims' ResourceClaimTemplates)
// carry a seal of another kind (SignObject), over their kind, namespace, name
// and content: modelgate deletes only the objects whose seal proves it made
// them, never one that merely carries its label.
package seal

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
)

// KeySize is the size of a generated key, and the least a key may have.
const KeySize = 32

// version prefixes every seal, so that a later format can be told apart.
const version = "v1."

// macSize is how much of the HMAC-SHA256 a seal keeps: 128 bits.
const macSize = 16

// encodedSize is macSize in unpadded base64url.
const encodedSize = (macSize*8 + 5) / 6

// ErrShortKey is returned for a key shorter than KeySize.
var ErrShortKey = errors.New("seal key is too short")

// Key signs and verifies seals. The zero Key and a nil *Key sign nothing
// and verify nothing.
type Key struct {
	secret []byte
	pool   *sync.Pool
}

// New returns a Key for secret, which must hold at least KeySize bytes.
func New(secret []byte) (*Key, error) {
	if len(secret) < KeySize {
		return nil, fmt.Errorf("%w: %d bytes, need at least %d", ErrShortKey, len(secret), KeySize)
	}
	s := append([]byte(nil), secret...)
	return &Key{secret: s, pool: &sync.Pool{New: func() any { return &macState{h: hmac.New(sha256.New, s)} }}}, nil
}

// Generate returns KeySize random bytes for a new key.
func Generate() []byte {
	b := make([]byte, KeySize)
	// crypto/rand.Read never fails (it panics where no randomness exists).
	_, _ = rand.Read(b)
	return b
}

// Ephemeral is a key made once per process. Offline tools (modelgate render
// and modelgate test) and tests use it: what one process seals only that
// process trusts. The server never uses it; it loads the key its replicas
// share.
var Ephemeral = sync.OnceValue(func() *Key {
	k, _ := New(Generate())
	return k
})

// Sealed lists the metadata a seal covers: the reserved keys modelgate
// writes.
var (
	sealedLabels      = []string{annotations.OwnerLabel, annotations.TeamLabel}
	sealedAnnotations = []string{annotations.OwnerFull, annotations.Injected}
)

// Carries reports whether m holds any metadata a seal covers.
func Carries(m *metav1.ObjectMeta) bool {
	if m == nil {
		return false
	}
	for _, k := range sealedLabels {
		if _, ok := m.Labels[k]; ok {
			return true
		}
	}
	for _, k := range sealedAnnotations {
		if _, ok := m.Annotations[k]; ok {
			return true
		}
	}
	return false
}

// Sign returns the seal of m's reserved metadata in namespace, "" for a nil
// Key.
func (k *Key) Sign(namespace string, m *metav1.ObjectMeta) string {
	if k == nil || k.pool == nil || m == nil {
		return ""
	}
	var mac [macSize]byte
	k.mac(&mac, namespace, m)
	return encode(&mac)
}

// encode renders a MAC as a seal: the version, then the MAC in unpadded
// base64url.
func encode(mac *[macSize]byte) string {
	var out [len(version) + encodedSize]byte
	copy(out[:], version)
	base64.RawURLEncoding.Encode(out[len(version):], mac[:])
	return string(out[:])
}

// decode is the MAC of a seal encode made; false for anything else.
func decode(s string, mac *[macSize]byte) bool {
	if len(s) != len(version)+encodedSize || s[:len(version)] != version {
		return false
	}
	var got [macSize + 2]byte // room for a decoder that writes a little past
	n, err := base64.RawURLEncoding.Decode(got[:], []byte(s[len(version):]))
	if err != nil || n != macSize {
		return false
	}
	copy(mac[:], got[:macSize])
	return true
}

// Verify reports whether m carries a seal, made with k, of its reserved
// metadata in namespace. It is false for a nil Key.
func (k *Key) Verify(namespace string, m *metav1.ObjectMeta) bool {
	if k == nil || k.pool == nil || m == nil {
		return false
	}
	var got, want [macSize]byte
	if !decode(m.Annotations[annotations.Seal], &got) {
		return false
	}
	k.mac(&want, namespace, m)
	return hmac.Equal(got[:], want[:])
}

// macState is a reusable HMAC and the scratch space of one message.
type macState struct {
	h   hash.Hash
	msg []byte
	sum [sha256.Size]byte
}

// mac writes into out the truncated HMAC of the namespace and the sealed
// values, each length-prefixed so no two different inputs share an
// encoding.
func (k *Key) mac(out *[macSize]byte, namespace string, m *metav1.ObjectMeta) {
	st := k.pool.Get().(*macState)
	defer k.pool.Put(st)
	msg := st.msg[:0]
	add := func(s string) {
		msg = binary.AppendUvarint(msg, uint64(len(s)))
		msg = append(msg, s...)
	}
	add(domain)
	add(namespace)
	for _, key := range sealedLabels {
		add(m.Labels[key])
	}
	for _, key := range sealedAnnotations {
		add(m.Annotations[key])
	}
	st.h.Reset()
	st.h.Write(msg)
	copy(out[:], st.h.Sum(st.sum[:0]))
	if cap(msg) <= maxKeptMessage {
		st.msg = msg
	}
}

// domain separates seals from any other use of the key.
const domain = "modelgate.io/seal " + version

// maxKeptMessage bounds the scratch space a pooled state keeps.
const maxKeptMessage = 64 << 10
