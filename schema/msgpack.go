package schema

import (
	"encoding/binary"
	"math"
)

// This file is a small msgpack scanner and writer
// (https://github.com/msgpack/msgpack/blob/master/spec.md). It reads
// straight from the message bytes, never recurses and never allocates.

// kind is the type of a scalar read from a message.
type kind uint8

const (
	kAbsent  kind = iota // the field did not occur
	kNil                 // nil / null
	kBool                // b
	kInt                 // i (every integer that fits in int64)
	kUint                // u (integers above math.MaxInt64)
	kFloat               // f (float32 widened, or float64)
	kStr                 // s (valid until the next message)
	kTime                // i: a msgpack timestamp, unix ms
	kBadTime             // a msgpack timestamp with nanoseconds ≥ 1e9
	kOther               // a map, array, bin or other extension
)

// scalar is one value of a configured field.
type scalar struct {
	k kind
	b bool
	i int64
	u uint64
	f float64
	s []byte
	// badUTF8 marks a JSON string that contained an escaped lone surrogate
	// (decoded as U+FFFD).
	badUTF8 bool
}

// mpExtTimestamp is the msgpack extension type of timestamps (−1).
const mpExtTimestamp = 0xff

// mpLen reads a big-endian unsigned length of size bytes at p.
func mpLen(b []byte, p, size int) (int, bool) {
	if p+size > len(b) {
		return 0, false
	}
	switch size {
	case 1:
		return int(b[p]), true
	case 2:
		return int(binary.BigEndian.Uint16(b[p:])), true
	default:
		return int(binary.BigEndian.Uint32(b[p:])), true
	}
}

// mpSkip returns the position after the msgpack object at p, or false if the
// bytes from p do not start with a complete object. It iterates with a count
// of pending objects instead of recursing, so nesting depth costs nothing.
func mpSkip(b []byte, p int) (int, bool) {
	pending := uint64(1)
	for pending > 0 {
		// Every object takes at least one byte: reject impossible counts
		// (e.g. a map32 header declaring 4 billion entries) at once.
		if p >= len(b) || pending > uint64(len(b)-p) {
			return p, false
		}
		pending--
		c := b[p]
		p++
		var n int // payload bytes to skip after the header
		var ok = true
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		case c <= 0x8f: // fixmap
			pending += 2 * uint64(c&0x0f)
		case c <= 0x9f: // fixarray
			pending += uint64(c & 0x0f)
		case c <= 0xbf: // fixstr
			n = int(c & 0x1f)
		case c == 0xc4, c == 0xd9: // bin8, str8
			n, ok = mpLen(b, p, 1)
			p++
		case c == 0xc5, c == 0xda: // bin16, str16
			n, ok = mpLen(b, p, 2)
			p += 2
		case c == 0xc6, c == 0xdb: // bin32, str32
			n, ok = mpLen(b, p, 4)
			p += 4
		case c == 0xc7: // ext8: length, type, data
			n, ok = mpLen(b, p, 1)
			n++
			p++
		case c == 0xc8: // ext16
			n, ok = mpLen(b, p, 2)
			n++
			p += 2
		case c == 0xc9: // ext32
			n, ok = mpLen(b, p, 4)
			n++
			p += 4
		case c == 0xca, c == 0xce, c == 0xd2: // float32, uint32, int32
			n = 4
		case c == 0xcb, c == 0xcf, c == 0xd3: // float64, uint64, int64
			n = 8
		case c == 0xcc, c == 0xd0: // uint8, int8
			n = 1
		case c == 0xcd, c == 0xd1: // uint16, int16
			n = 2
		case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16 plus the type byte
			n = 1 + 1<<(c-0xd4)
		case c == 0xdc: // array16
			var k int
			k, ok = mpLen(b, p, 2)
			pending += uint64(k)
			p += 2
		case c == 0xdd: // array32
			var k int
			k, ok = mpLen(b, p, 4)
			pending += uint64(k)
			p += 4
		case c == 0xde: // map16
			var k int
			k, ok = mpLen(b, p, 2)
			pending += 2 * uint64(k)
			p += 2
		case c == 0xdf: // map32
			var k int
			k, ok = mpLen(b, p, 4)
			pending += 2 * uint64(k)
			p += 4
		default: // 0xc1 is never used
			return p, false
		}
		if !ok || n > len(b)-p {
			return p, false
		}
		p += n
	}
	return p, true
}

// mpMapLen reads a map header at p: the number of entries and the position
// of the first key. isMap is false (with ok true) for a well-formed object
// that is not a map.
func mpMapLen(b []byte, p int) (n, next int, isMap, ok bool) {
	if p >= len(b) {
		return 0, p, false, false
	}
	c := b[p]
	switch {
	case c >= 0x80 && c <= 0x8f:
		return int(c & 0x0f), p + 1, true, true
	case c == 0xde:
		n, ok = mpLen(b, p+1, 2)
		return n, p + 3, true, ok
	case c == 0xdf:
		n, ok = mpLen(b, p+1, 4)
		return n, p + 5, true, ok
	}
	_, ok = mpSkip(b, p)
	return 0, p, false, ok
}

// mpArrayLen reads an array header at p.
func mpArrayLen(b []byte, p int) (n, next int, ok bool) {
	if p >= len(b) {
		return 0, p, false
	}
	c := b[p]
	switch {
	case c >= 0x90 && c <= 0x9f:
		return int(c & 0x0f), p + 1, true
	case c == 0xdc:
		n, ok = mpLen(b, p+1, 2)
		return n, p + 3, ok
	case c == 0xdd:
		n, ok = mpLen(b, p+1, 4)
		return n, p + 5, ok
	}
	return 0, p, false
}

// mpStr reads a str object at p. isStr is false (with ok true) for a
// well-formed object of another type, which is skipped.
func mpStr(b []byte, p int) (s []byte, next int, isStr, ok bool) {
	if p >= len(b) {
		return nil, p, false, false
	}
	c := b[p]
	var n int
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n, p, ok = int(c&0x1f), p+1, true
	case c == 0xd9:
		n, ok = mpLen(b, p+1, 1)
		p += 2
	case c == 0xda:
		n, ok = mpLen(b, p+1, 2)
		p += 3
	case c == 0xdb:
		n, ok = mpLen(b, p+1, 4)
		p += 5
	default:
		next, ok = mpSkip(b, p)
		return nil, next, false, ok
	}
	if !ok || n > len(b)-p {
		return nil, p, true, false
	}
	return b[p : p+n : p+n], p + n, true, true
}

// mpScalar reads the object at p into v. Maps, arrays, bin and extensions
// other than timestamps are skipped and reported as kOther.
func mpScalar(b []byte, p int, v *scalar) (int, bool) {
	if p >= len(b) {
		return p, false
	}
	c := b[p]
	switch {
	case c <= 0x7f:
		v.k, v.i = kInt, int64(c)
		return p + 1, true
	case c >= 0xe0:
		v.k, v.i = kInt, int64(int8(c))
		return p + 1, true
	case c >= 0xa0 && c <= 0xbf, c >= 0xd9 && c <= 0xdb:
		s, next, _, ok := mpStr(b, p)
		v.k, v.s = kStr, s
		return next, ok
	}
	// Fixed-size scalars: size is the payload after the type byte.
	size := 0
	switch c {
	case 0xc0, 0xc2, 0xc3:
	case 0xcc, 0xd0:
		size = 1
	case 0xcd, 0xd1:
		size = 2
	case 0xca, 0xce, 0xd2:
		size = 4
	case 0xcb, 0xcf, 0xd3:
		size = 8
	case 0xd6, 0xd7: // fixext4, fixext8: type byte plus payload
		if p+1 < len(b) && b[p+1] == mpExtTimestamp {
			return mpTimestamp(b, p, v)
		}
		fallthrough
	default:
		next, ok := mpSkip(b, p)
		if c == 0xc7 && ok && next-p == 15 && b[p+2] == mpExtTimestamp {
			return mpTimestamp(b, p, v)
		}
		v.k = kOther
		return next, ok
	}
	if size > len(b)-p-1 {
		return p, false
	}
	d := b[p+1 : p+1+size]
	switch c {
	case 0xc0:
		v.k = kNil
	case 0xc2, 0xc3:
		v.k, v.b = kBool, c == 0xc3
	case 0xcc:
		v.k, v.i = kInt, int64(d[0])
	case 0xcd:
		v.k, v.i = kInt, int64(binary.BigEndian.Uint16(d))
	case 0xce:
		v.k, v.i = kInt, int64(binary.BigEndian.Uint32(d))
	case 0xcf:
		u := binary.BigEndian.Uint64(d)
		if u <= math.MaxInt64 {
			v.k, v.i = kInt, int64(u)
		} else {
			v.k, v.u = kUint, u
		}
	case 0xd0:
		v.k, v.i = kInt, int64(int8(d[0]))
	case 0xd1:
		v.k, v.i = kInt, int64(int16(binary.BigEndian.Uint16(d)))
	case 0xd2:
		v.k, v.i = kInt, int64(int32(binary.BigEndian.Uint32(d)))
	case 0xd3:
		v.k, v.i = kInt, int64(binary.BigEndian.Uint64(d))
	case 0xca:
		v.k, v.f = kFloat, float64(math.Float32frombits(binary.BigEndian.Uint32(d)))
	case 0xcb:
		v.k, v.f = kFloat, math.Float64frombits(binary.BigEndian.Uint64(d))
	}
	return p + 1 + size, true
}

// mpTimestamp decodes the timestamp extension at p (fixext4: uint32
// seconds; fixext8: 30-bit nanoseconds and 34-bit seconds; ext8 of length
// 12: uint32 nanoseconds and int64 seconds) into unix milliseconds,
// truncating towards the past.
func mpTimestamp(b []byte, p int, v *scalar) (int, bool) {
	var sec int64
	var nsec uint32
	switch b[p] {
	case 0xd6:
		if len(b)-p < 6 {
			return p, false
		}
		sec = int64(binary.BigEndian.Uint32(b[p+2:]))
		p += 6
	case 0xd7:
		if len(b)-p < 10 {
			return p, false
		}
		x := binary.BigEndian.Uint64(b[p+2:])
		nsec, sec = uint32(x>>34), int64(x&(1<<34-1))
		p += 10
	default: // ext8, length 12, checked by the caller
		nsec = binary.BigEndian.Uint32(b[p+3:])
		sec = int64(binary.BigEndian.Uint64(b[p+7:]))
		p += 15
	}
	// |sec| ≤ 9.2e15 keeps sec·1000 within int64; anything beyond is far
	// outside every valid time range anyway.
	const maxSec = math.MaxInt64/1000 - 1
	switch {
	case nsec >= 1e9:
		v.k = kBadTime
	case sec > maxSec || sec < -maxSec:
		v.k, v.i = kTime, math.MaxInt64 // out of range, reported later
	default:
		v.k, v.i = kTime, sec*1000+int64(nsec/1e6)
	}
	return p, true
}

// Writers. Each appends one object in the shortest encoding the spec
// allows, so equal values always give equal bytes.

func mpAppendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xde, byte(n>>8), byte(n))
	default:
		return append(b, 0xdf, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func mpAppendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xdc, byte(n>>8), byte(n))
	default:
		return append(b, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func mpAppendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xda, byte(n>>8), byte(n))
	default:
		b = append(b, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, s...)
}

func mpAppendInt(b []byte, i int64) []byte {
	switch {
	case i >= 0 && i <= 0x7f:
		return append(b, byte(i))
	case i < 0 && i >= -32:
		return append(b, byte(i))
	case i >= 0 && i <= math.MaxUint8:
		return append(b, 0xcc, byte(i))
	case i >= 0 && i <= math.MaxUint16:
		return append(b, 0xcd, byte(i>>8), byte(i))
	case i >= 0 && i <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(i))
	case i >= 0:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), uint64(i))
	case i >= math.MinInt8:
		return append(b, 0xd0, byte(i))
	case i >= math.MinInt16:
		return append(b, 0xd1, byte(i>>8), byte(i))
	case i >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(i))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(i))
	}
}

// mpAppendFloat always writes float64 (0xcb), so a float never turns into
// an integer on the wire.
func mpAppendFloat(b []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(f))
}

func mpAppendBool(b []byte, t bool) []byte {
	if t {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}
