package schema

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// This file walks the Protobuf binary wire format along a pbPlan:
// configured fields are read into the decoder's values, every other
// field (unknown numbers included) is skipped by its wire type alone,
// unread. Bad bytes are counted reasons, never a panic: protowire checks
// every length against the bytes left, and the walk descends only along
// configured paths (at most MaxPathDepth deep); skipped groups nest at
// most protowire.DefaultRecursionLimit deep.
//
// Semantics (docs/formats.md, Protobuf): a configured field on the wire
// with another wire type than its schema's is malformed; a configured
// field (or a message on a configured path) that occurs twice is
// duplicate_field — Protobuf's own rule would take the last (and merge
// messages), but readers that take the first would see another value,
// and every other input format rejects a repeated key; a field with
// implicit presence (proto3 without `optional`) that is absent is its
// zero value, any other absent field is missing.

// scanProto reads one Protobuf message of plan in msg.
func (d *Decoder) scanProto(plan *pbPlan, msg []byte) Reason {
	return d.pbMessage(plan, msg)
}

// pbMessage reads the fields of a message of plan in b.
func (d *Decoder) pbMessage(plan *pbPlan, b []byte) Reason {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ReasonMalformed
		}
		b = b[n:]
		st := plan.step(num)
		if st == nil {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return ReasonMalformed
			}
			b = b[n:]
			continue
		}
		if typ != st.wire {
			return ReasonMalformed
		}
		var r Reason
		if n, r = d.pbField(st, b); r != ReasonNone {
			return r
		}
		b = b[n:]
	}
	for _, i := range plan.implicit {
		if st := &plan.steps[i]; d.vals[st.ref].k == kAbsent {
			d.pbZero(st, &d.vals[st.ref])
		}
	}
	return ReasonNone
}

// pbField reads the value of configured field st at the start of b and
// returns its length.
func (d *Decoder) pbField(st *pbStep, b []byte) (int, Reason) {
	if st.kind == pbMessage {
		m, n := protowire.ConsumeBytes(b)
		switch {
		case n < 0:
			return n, ReasonMalformed
		case !d.enter(^st.ref):
			return n, ReasonDuplicateField
		}
		return n, d.pbMessage(st.sub, m)
	}
	v := &d.vals[st.ref]
	if v.k != kAbsent {
		return 0, ReasonDuplicateField
	}
	var u uint64
	var n int
	switch {
	case st.wire == protowire.VarintType:
		u, n = protowire.ConsumeVarint(b)
	case st.wire == protowire.Fixed32Type:
		var x uint32
		x, n = protowire.ConsumeFixed32(b)
		u = uint64(x)
	case st.wire == protowire.Fixed64Type:
		u, n = protowire.ConsumeFixed64(b)
	case st.kind == pbTimestamp:
		return pbTimestampValue(b, v)
	default: // a string
		s, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return n, ReasonMalformed
		}
		v.k, v.s = kStr, s
		return n, ReasonNone
	}
	if n < 0 {
		return n, ReasonMalformed
	}
	pbScalar(st, u, v)
	return n, ReasonNone
}

// pbScalar sets v to the numeric wire value u of field st, cast as the
// Protobuf specification casts each type (an int32 written as a 64-bit
// varint keeps its low 32 bits).
func pbScalar(st *pbStep, u uint64, v *scalar) {
	v.k = kInt
	switch st.kind {
	case pbInt32, pbSfixed32:
		v.i = int64(int32(u))
	case pbInt64, pbSfixed64:
		v.i = int64(u)
	case pbUint32, pbFixed32:
		v.i = int64(uint32(u))
	case pbUint64, pbFixed64:
		if u > math.MaxInt64 {
			v.k, v.u = kUint, u
		} else {
			v.i = int64(u)
		}
	case pbSint32:
		v.i = int64(int32(protowire.DecodeZigZag(u & math.MaxUint32)))
	case pbSint64:
		v.i = protowire.DecodeZigZag(u)
	case pbBool:
		v.k, v.b = kBool, u != 0
	case pbEnum:
		v.k, v.s = kStr, st.enum.name(int32(u))
		if v.s == nil {
			v.k = kOther // a number the schema does not declare: wrong_type
		}
	case pbFloat:
		v.k, v.f = kFloat, float64(math.Float32frombits(uint32(u)))
	case pbDouble:
		v.k, v.f = kFloat, math.Float64frombits(u)
	}
}

// pbZero sets v to the zero value of implicit-presence field st (an
// enum's is its value numbered 0; proto3 requires one).
func (d *Decoder) pbZero(st *pbStep, v *scalar) {
	if st.kind == pbString {
		v.k, v.s = kStr, nil
		return
	}
	pbScalar(st, 0, v)
}

// The range of a google.protobuf.Timestamp (timestamp.proto): seconds
// from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z, nanos in [0, 1e9).
const (
	pbMinSeconds = -62135596800
	pbMaxSeconds = 253402300799
	pbNanos      = 1_000_000_000
)

// pbTimestampValue reads the google.protobuf.Timestamp message at the
// start of b into v as a time in unix ms (nanos truncated to the
// millisecond, as RFC 3339 fractions are) and returns its length. Its
// seconds (1) and nanos (2) each at most once; other fields are skipped.
func pbTimestampValue(b []byte, v *scalar) (int, Reason) {
	m, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return n, ReasonMalformed
	}
	var secs, nanos int64
	var seen [3]bool
	for len(m) > 0 {
		num, typ, k := protowire.ConsumeTag(m)
		if k < 0 {
			return n, ReasonMalformed
		}
		m = m[k:]
		if num != 1 && num != 2 {
			if k = protowire.ConsumeFieldValue(num, typ, m); k < 0 {
				return n, ReasonMalformed
			}
			m = m[k:]
			continue
		}
		u, k := protowire.ConsumeVarint(m)
		switch {
		case typ != protowire.VarintType || k < 0:
			return n, ReasonMalformed
		case seen[num]:
			return n, ReasonDuplicateField
		}
		seen[num], m = true, m[k:]
		if num == 1 {
			secs = int64(u)
		} else {
			nanos = int64(int32(u))
		}
	}
	switch {
	case nanos < 0 || nanos >= pbNanos:
		v.k = kBadTime
	case secs < pbMinSeconds || secs > pbMaxSeconds:
		v.k, v.i = kTime, math.MinInt64 // outside every accepted range
	default:
		v.k, v.i = kTime, secs*1000+nanos/1_000_000
	}
	return n, ReasonNone
}
