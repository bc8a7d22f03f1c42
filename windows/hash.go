package windows

import "math/bits"

// sip is an incremental SipHash-2-4 state with 128-bit output (Aumasson and
// Bernstein, "SipHash: a fast short-input PRF", 2012; the 128-bit variant of
// the reference implementation github.com/veorq/SipHash). It is a keyed
// pseudo-random function: without the key nobody can predict or engineer
// collisions of unit keys, and the same key gives the same output on every
// run, which makes contribution bounding reproducible after a restart.
//
// A sip lives on the stack; it never allocates.
type sip struct {
	v0, v1, v2, v3 uint64
	tail           uint64 // pending bytes, little-endian
	ntail          int    // number of pending bytes, < 8
	n              int    // total bytes written
}

// The SipHash initialisation constants ("somepseudorandomlygeneratedbytes"
// in ASCII, from the SipHash paper §2).
const (
	sipC0 = 0x736f6d6570736575
	sipC1 = 0x646f72616e646f6d
	sipC2 = 0x6c7967656e657261
	sipC3 = 0x7465646279746573
)

// newSip starts a SipHash-2-4-128 computation under the key (k0, k1), the
// two little-endian halves of the 16-byte key.
func newSip(k0, k1 uint64) sip {
	// 0xee: the 128-bit output variant's domain constant (reference
	// implementation, siphash.c, "if (outlen == 16) v1 ^= 0xee").
	return sip{v0: k0 ^ sipC0, v1: k1 ^ sipC1 ^ 0xee, v2: k0 ^ sipC2, v3: k1 ^ sipC3}
}

func (s *sip) round() {
	s.v0, s.v1, s.v2, s.v3 = sipRound(s.v0, s.v1, s.v2, s.v3)
}

// sipRound is one SipRound on the state words held in registers.
func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

// block absorbs one 8-byte message word (two compression rounds: the "2" of
// SipHash-2-4).
func (s *sip) block(m uint64) {
	s.v3 ^= m
	s.round()
	s.round()
	s.v0 ^= m
}

// word appends the 8 little-endian bytes of x to the message.
func (s *sip) word(x uint64) {
	s.n += 8
	if s.ntail == 0 {
		s.block(x)
		return
	}
	sh := uint(s.ntail) * 8
	s.block(s.tail | x<<sh)
	s.tail = x >> (64 - sh)
}

// str appends the bytes of b to the message.
func (s *sip) str(b string) {
	s.n += len(b)
	for s.ntail != 0 && len(b) > 0 {
		s.tail |= uint64(b[0]) << (uint(s.ntail) * 8)
		s.ntail++
		b = b[1:]
		if s.ntail == 8 {
			s.block(s.tail)
			s.tail, s.ntail = 0, 0
		}
	}
	for len(b) >= 8 {
		_ = b[7]
		s.block(uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56)
		b = b[8:]
	}
	for i := 0; i < len(b); i++ {
		s.tail |= uint64(b[i]) << (uint(s.ntail) * 8)
		s.ntail++
	}
}

// sum128 finishes the computation and returns the two output words (the
// first and last 8 bytes of the tag, little-endian).
func (s *sip) sum128() (uint64, uint64) {
	return sipFinish(s.v0, s.v1, s.v2, s.v3, s.tail|uint64(s.n&0xff)<<56)
}

// sumString appends the bytes of m and finishes, like str(m) then
// sum128, keeping the state in registers: the hot path of unit and group
// hashing. The state must have no pending bytes (only whole words
// written so far); s itself is not changed.
func (s *sip) sumString(m string) (uint64, uint64) {
	v0, v1, v2, v3 := s.v0, s.v1, s.v2, s.v3
	n := s.n + len(m)
	for ; len(m) >= 8; m = m[8:] {
		x := uint64(m[0]) | uint64(m[1])<<8 | uint64(m[2])<<16 | uint64(m[3])<<24 |
			uint64(m[4])<<32 | uint64(m[5])<<40 | uint64(m[6])<<48 | uint64(m[7])<<56
		v3 ^= x
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= x
	}
	t := uint64(0)
	for i := len(m) - 1; i >= 0; i-- {
		t = t<<8 | uint64(m[i])
	}
	return sipFinish(v0, v1, v2, v3, t|uint64(n&0xff)<<56)
}

// sumWords appends the words a and b and finishes, like word(a), word(b),
// sum128. The state must have no pending bytes; s is not changed.
func (s *sip) sumWords(a, b uint64) (uint64, uint64) {
	v0, v1, v2, v3 := s.v0, s.v1, s.v2, s.v3
	for _, x := range [2]uint64{a, b} {
		v3 ^= x
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= x
	}
	return sipFinish(v0, v1, v2, v3, uint64((s.n+16)&0xff)<<56)
}

// sipFinish absorbs the last block (the pending bytes and the length byte)
// and runs the finalisation of SipHash-2-4-128.
func sipFinish(v0, v1, v2, v3, last uint64) (uint64, uint64) {
	v3 ^= last
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= last
	v2 ^= 0xee
	for range 4 {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	a := v0 ^ v1 ^ v2 ^ v3
	v1 ^= 0xdd
	for range 4 {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	return a, v0 ^ v1 ^ v2 ^ v3
}

// mix returns a 64-bit value that looks uniformly random and independent for
// each distinct pair (a, b), provided a or b is itself a keyed pseudo-random
// value: one 64×64→128-bit multiply folded to 64 bits (the "mum" step of
// wyhash, github.com/wangyi-fudan/wyhash) followed by the SplitMix64
// finaliser (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014), which is a bijection with full avalanche. The
// odd constants are wyhash's published primes wyp0 and wyp1.
//
// mix is used for the priorities of bottom-k sampling, whose inputs always
// contain a SipHash output, so an adversary cannot steer them without the
// key. Its quality is checked statistically by the uniformity tests.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a^0xa0761d6478bd642f, b^0xe7037ed1a0b428db)
	x := hi ^ lo
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
