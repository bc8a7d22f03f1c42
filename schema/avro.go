package schema

import (
	"encoding/binary"
	"math"
)

// This file walks Avro binary data (the specification's binary encoding)
// along an avroPlan: configured fields are read into the decoder's
// values, the others skipped by type without being read. Bad bytes are
// counted reasons, never a panic: every read is bounds-checked, a count
// is checked against the bytes left before anything is looped over, and
// recursion (only possible through a recursive named type) stops at
// maxAvroDepth.

// maxAvroDepth is the deepest nesting of Avro values the decoder skips;
// deeper data (possible only with a recursive schema) is rejected as
// ReasonOversized. 256 levels bound the goroutine stack to a few tens of
// KiB, and no event schema nests nearly as deep.
const maxAvroDepth = 256

// avLong reads a zig-zag varint long (at most 10 bytes) at p.
func avReadLong(b []byte, p int) (int64, int, bool) {
	var u uint64
	for s := uint(0); s < 70; s += 7 {
		if p >= len(b) {
			return 0, p, false
		}
		c := b[p]
		p++
		if s == 63 && c > 1 {
			return 0, p, false // overflows 64 bits
		}
		u |= uint64(c&0x7f) << s
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), p, true
		}
	}
	return 0, p, false
}

// avLen reads a non-negative length at p that fits in the bytes left.
func avLen(b []byte, p int) (int, int, bool) {
	n, p, ok := avReadLong(b, p)
	if !ok || n < 0 || n > int64(len(b)-p) {
		return 0, p, false
	}
	return int(n), p, true
}

// scanAvro reads one Avro record of plan at p to the end of msg.
func (d *Decoder) scanAvro(plan *avroPlan, msg []byte, p int) Reason {
	p, r := d.avRecord(plan, msg, p, 0)
	if r != ReasonNone {
		return r
	}
	if p != len(msg) {
		return ReasonTrailingData
	}
	return ReasonNone
}

// avRecord reads the record of plan at p.
func (d *Decoder) avRecord(plan *avroPlan, msg []byte, p, depth int) (int, Reason) {
	if depth > maxAvroDepth {
		return p, ReasonOversized
	}
	var r Reason
	for i := range plan.steps {
		st := &plan.steps[i]
		switch {
		case st.ref == unconfigured:
			p, r = d.avSkip(st.t, msg, p, depth+1)
		case st.ref >= 0:
			p, r = d.avScalar(st.t, msg, p, &d.vals[st.ref], depth+1)
		default:
			p, r = d.avNested(st, msg, p, depth+1)
		}
		if r != ReasonNone {
			return p, r
		}
	}
	return p, ReasonNone
}

// avNested reads the value of a field whose configured fields lie below,
// in node ^st.ref.
func (d *Decoder) avNested(st *avroStep, msg []byte, p, depth int) (int, Reason) {
	t, sub := st.t, st.sub[0]
	if t.kind == avUnion {
		i, next, ok := avReadLong(msg, p)
		if !ok || i < 0 || i >= int64(len(t.branches)) {
			return next, ReasonMalformed
		}
		p, t, sub = next, t.branches[i], st.sub[i]
	}
	switch {
	case sub != nil:
		return d.avRecord(sub, msg, p, depth)
	case t.kind == avNull:
		d.settle(^st.ref, kNil)
		return p, ReasonNone
	}
	d.settle(^st.ref, kOther)
	return d.avSkip(t, msg, p, depth)
}

// avScalar reads the value of a configured field into v.
func (d *Decoder) avScalar(t *avroType, msg []byte, p int, v *scalar, depth int) (int, Reason) {
	if t.kind == avUnion {
		i, next, ok := avReadLong(msg, p)
		if !ok || i < 0 || i >= int64(len(t.branches)) {
			return next, ReasonMalformed
		}
		p, t = next, t.branches[i]
	}
	var ok bool
	switch t.kind {
	case avNull:
		v.k = kNil
		return p, ReasonNone
	case avBool:
		if p >= len(msg) || msg[p] > 1 {
			return p, ReasonMalformed
		}
		v.k, v.b = kBool, msg[p] == 1
		return p + 1, ReasonNone
	case avInt, avLong:
		if v.i, p, ok = avReadLong(msg, p); !ok || (t.kind == avInt && v.i != int64(int32(v.i))) {
			return p, ReasonMalformed
		}
		v.k = kInt
		switch t.logical {
		case avTimeMillis:
			v.k = kTime
		case avTimeMicros:
			v.k, v.i = kTime, floorDiv(v.i, 1000)
		}
		return p, ReasonNone
	case avFloat:
		if p+4 > len(msg) {
			return p, ReasonMalformed
		}
		v.k, v.f = kFloat, float64(math.Float32frombits(binary.LittleEndian.Uint32(msg[p:])))
		return p + 4, ReasonNone
	case avDouble:
		if p+8 > len(msg) {
			return p, ReasonMalformed
		}
		v.k, v.f = kFloat, math.Float64frombits(binary.LittleEndian.Uint64(msg[p:]))
		return p + 8, ReasonNone
	case avString:
		var n int
		if n, p, ok = avLen(msg, p); !ok {
			return p, ReasonMalformed
		}
		v.k, v.s = kStr, msg[p:p+n]
		return p + n, ReasonNone
	case avEnum:
		i, next, ok := avReadLong(msg, p)
		if !ok || i < 0 || i >= int64(len(t.symbols)) {
			return next, ReasonMalformed
		}
		v.k, v.s = kStr, t.symbols[i]
		return next, ReasonNone
	}
	v.k = kOther // bytes, fixed, record, array, map
	return d.avSkip(t, msg, p, depth)
}

// floorDiv is x/m rounded towards −∞ (m > 0): microseconds to the
// millisecond at or before them, as RFC 3339 fractions are truncated.
func floorDiv(x, m int64) int64 {
	q := x / m
	if x%m < 0 {
		q--
	}
	return q
}

// avSkip skips a value of type t at p.
func (d *Decoder) avSkip(t *avroType, msg []byte, p, depth int) (int, Reason) {
	if t.size >= 0 {
		if t.size > len(msg)-p {
			return p, ReasonMalformed
		}
		return p + t.size, ReasonNone
	}
	if depth > maxAvroDepth {
		return p, ReasonOversized
	}
	var ok bool
	switch t.kind {
	case avInt, avLong, avEnum:
		if _, p, ok = avReadLong(msg, p); !ok {
			return p, ReasonMalformed
		}
		return p, ReasonNone
	case avBytes, avString:
		var n int
		if n, p, ok = avLen(msg, p); !ok {
			return p, ReasonMalformed
		}
		return p + n, ReasonNone
	case avUnion:
		i, next, ok := avReadLong(msg, p)
		if !ok || i < 0 || i >= int64(len(t.branches)) {
			return next, ReasonMalformed
		}
		return d.avSkip(t.branches[i], msg, next, depth+1)
	case avRecord:
		var r Reason
		for _, ft := range t.recFields {
			if p, r = d.avSkip(ft, msg, p, depth+1); r != ReasonNone {
				return p, r
			}
		}
		return p, ReasonNone
	case avArray, avMap:
		return d.avSkipBlocks(t, msg, p, depth)
	}
	return p, ReasonMalformed // unreachable: the kinds above cover every varying size
}

// avSkipBlocks skips an array or map: blocks of items, each a count
// (negative: followed by the block's size in bytes), ended by a zero
// count. Every block takes a byte at least, every item of varying size
// too, so the loops are bounded by the message length.
func (d *Decoder) avSkipBlocks(t *avroType, msg []byte, p, depth int) (int, Reason) {
	var r Reason
	for {
		n, next, ok := avReadLong(msg, p)
		if !ok || n == math.MinInt64 {
			return next, ReasonMalformed
		}
		p = next
		switch {
		case n == 0:
			return p, ReasonNone
		case n < 0:
			// The block's size in bytes follows. The items are skipped
			// one by one all the same and must fill exactly that size:
			// readers that trust the size and readers that read the items
			// must never see different values.
			var size int
			if size, p, ok = avLen(msg, p); !ok {
				return p, ReasonMalformed
			}
			end := p + size
			if p, r = d.avSkipItems(t, msg[:end], p, -n, depth); r != ReasonNone {
				return p, r
			}
			if p != end {
				return p, ReasonMalformed
			}
			continue
		}
		if p, r = d.avSkipItems(t, msg, p, n, depth); r != ReasonNone {
			return p, r
		}
	}
}

// avSkipItems skips n > 0 items of an array or map block.
func (d *Decoder) avSkipItems(t *avroType, msg []byte, p int, n int64, depth int) (int, Reason) {
	var r Reason
	switch {
	case t.kind == avArray && t.elem.size >= 0:
		if t.elem.size > 0 && n > int64((len(msg)-p)/t.elem.size) {
			return p, ReasonMalformed
		}
		return p + int(n)*t.elem.size, ReasonNone
	case n > int64(len(msg)-p):
		return p, ReasonMalformed
	}
	for ; n > 0; n-- {
		if t.kind == avMap {
			if p, r = d.avSkip(&avroStringType, msg, p, depth+1); r != ReasonNone {
				return p, r
			}
		}
		if p, r = d.avSkip(t.elem, msg, p, depth+1); r != ReasonNone {
			return p, r
		}
	}
	return p, ReasonNone
}

// avroStringType is the type of a map key.
var avroStringType = avroType{kind: avString, size: -1}
