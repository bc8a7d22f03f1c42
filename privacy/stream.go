package privacy

import (
	"crypto/hmac"
	"crypto/sha256"
	"math/rand/v2"
)

// KeySize is the length of a secret key in bytes (256 bits, the HMAC-SHA256
// block-independent key size recommended by RFC 2104 §3 for SHA-256).
const KeySize = 32

// Key is the secret from which every release's noise is derived. It must
// never appear in logs, errors or metrics.
type Key [KeySize]byte

// Stream is a cryptographically secure pseudo-random stream for one release:
// a ChaCha8 generator seeded with HMAC-SHA256(key, release id). The same key
// and release id always give the same stream. A Stream is not safe for
// concurrent use.
type Stream struct {
	c *rand.ChaCha8
}

// NewStream returns the stream of the release identified by releaseID.
func NewStream(key Key, releaseID string) *Stream {
	mac := hmac.New(sha256.New, key[:])
	mac.Write([]byte(releaseID))
	var seed [32]byte
	copy(seed[:], mac.Sum(nil))
	return &Stream{c: rand.NewChaCha8(seed)}
}

// Uint64 returns 64 uniformly random bits.
func (s *Stream) Uint64() uint64 { return s.c.Uint64() }
