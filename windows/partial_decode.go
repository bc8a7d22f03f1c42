package windows

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// UnmarshalBinary decodes a partial written by MarshalBinary, replacing
// p. The input is untrusted: every length is checked against the bytes
// left before anything is allocated, so memory stays proportional to the
// input, and anything MarshalBinary would not have written (another
// version, a non-minimal varint, unsorted or repeated entries, counters
// out of range or inconsistent with each other, non-finite values,
// trailing bytes) is an error wrapping ErrCorrupt. Whether the partial
// fits a configuration (its bounds, buckets and aggregates) is checked by
// the merge, which knows the configuration.
func (p *Partial) UnmarshalBinary(data []byte) error {
	r := &preader{b: data}
	out, err := r.partial()
	if err != nil {
		return fmt.Errorf("%w: partial at byte %d: %w", ErrCorrupt, r.pos, err)
	}
	*p = out
	return nil
}

// preader reads the partial encoding.
type preader struct {
	b     []byte
	pos   int
	extra bool // flag bit 1: event-level groups carry variance and quantile fields
}

var errShort = errors.New("truncated")

func (r *preader) left() int { return len(r.b) - r.pos }

// uvarint reads a shortest-form uvarint.
func (r *preader) uvarint() (uint64, error) {
	var x uint64
	for i, s := 0, uint(0); ; i, s = i+1, s+7 {
		if r.pos >= len(r.b) {
			return 0, errShort
		}
		c := r.b[r.pos]
		r.pos++
		if i == binary.MaxVarintLen64-1 && c > 1 {
			return 0, errors.New("varint overflows 64 bits")
		}
		if c < 0x80 {
			if c == 0 && i > 0 {
				return 0, errors.New("varint not in shortest form")
			}
			return x | uint64(c)<<s, nil
		}
		x |= uint64(c&0x7f) << s
	}
}

// varint reads a shortest-form zig-zag varint.
func (r *preader) varint() (int64, error) {
	ux, err := r.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x, err
}

// upTo reads a uvarint at most max.
func (r *preader) upTo(max uint64, what string) (uint64, error) {
	x, err := r.uvarint()
	if err == nil && x > max {
		err = fmt.Errorf("%s %d above %d", what, x, max)
	}
	return x, err
}

// count reads the number of entries that follow, each taking at least
// min bytes, so that it cannot exceed what the input holds.
func (r *preader) count(min int, what string) (int, error) {
	x, err := r.uvarint()
	if err == nil && x > uint64(r.left()/min) {
		err = fmt.Errorf("%d %s: more than the input holds", x, what)
	}
	return int(x), err
}

func (r *preader) fixed32() (uint32, error) {
	if r.left() < 4 {
		return 0, errShort
	}
	x := binary.LittleEndian.Uint32(r.b[r.pos:])
	r.pos += 4
	return x, nil
}

func (r *preader) fixed64() (uint64, error) {
	if r.left() < 8 {
		return 0, errShort
	}
	x := binary.LittleEndian.Uint64(r.b[r.pos:])
	r.pos += 8
	return x, nil
}

func (r *preader) partial() (Partial, error) {
	var p Partial
	if r.left() < len(partialMagic)+2+len(p.fp) || string(r.b[:len(partialMagic)]) != partialMagic {
		return p, errors.New("not a partial")
	}
	r.pos = len(partialMagic)
	if v := r.b[r.pos]; v != partialVersion {
		return p, fmt.Errorf("version %d, want %d", v, partialVersion)
	}
	flags := r.b[r.pos+1]
	if flags > 3 || flags == 2 {
		return p, fmt.Errorf("unknown flags %#x", flags)
	}
	p.eventLevel = flags&1 == 1
	r.extra = flags&2 != 0
	r.pos += 2
	r.pos += copy(p.fp[:], r.b[r.pos:])
	var err error
	if p.Start, err = r.varint(); err != nil {
		return p, err
	}
	if p.End, err = r.varint(); err != nil {
		return p, err
	}
	if p.Start < minTime || p.Start > maxTime || p.End <= p.Start || p.End-p.Start > ms(maxDuration) {
		return p, fmt.Errorf("bad extent [%d, %d)", p.Start, p.End)
	}
	n, err := r.count(1, "partitions")
	if err != nil {
		return p, err
	}
	p.Partitions = make([]int32, n)
	for i := range p.Partitions {
		x, err := r.varint()
		if err != nil {
			return p, err
		}
		if x < math.MinInt32 || x > math.MaxInt32 || i > 0 && x <= int64(p.Partitions[i-1]) {
			return p, errors.New("partitions out of range, unsorted or repeated")
		}
		p.Partitions[i] = int32(x)
	}
	caps := [2]int64{}
	for i := range caps {
		x, err := r.upTo(math.MaxInt64, "drop count")
		if err != nil {
			return p, err
		}
		caps[i] = int64(x)
	}
	p.unitCap, p.groupCap = caps[0], caps[1]
	if p.eventLevel && p.unitCap != 0 || !p.eventLevel && p.groupCap != 0 {
		return p, errors.New("drop count of the other privacy level")
	}
	if n, err = r.count(1, "keys"); err != nil {
		return p, err
	}
	p.keys = make([]string, n)
	for i := range p.keys {
		l, err := r.count(1, "key bytes")
		if err != nil {
			return p, err
		}
		p.keys[i] = string(r.b[r.pos : r.pos+l])
		r.pos += l
		if i > 0 && !(p.keys[i-1] < p.keys[i]) {
			return p, errors.New("keys unsorted or repeated")
		}
	}
	if p.eventLevel {
		err = r.groups(&p)
	} else {
		err = r.units(&p)
	}
	if err == nil && r.left() != 0 {
		err = errors.New("trailing bytes")
	}
	return p, err
}

// Smallest encodings, for count: a unit (k0, k1, events, one group), a
// group (five uvarints, two of them counts), a cell, a value, an
// event-level group.
const (
	minUnitBytes   = 12 + 2 + minGroupBytes
	minGroupBytes  = 6
	minCellBytes   = 2
	minValueBytes  = 12
	minEGroupBytes = 6
)

func (r *preader) units(p *Partial) error {
	n, err := r.count(minUnitBytes, "units")
	if err != nil {
		return err
	}
	used := make([]bool, len(p.keys))
	w := make([]uint32, 0, min(r.left()/2, 1<<20))
	var pk0 uint32
	var pk1 uint64
	for i := range n {
		var k [3]uint32
		for j := range k {
			if k[j], err = r.fixed32(); err != nil {
				return err
			}
		}
		k0, k1 := k[0], uint64(k[1])|uint64(k[2])<<32
		if i > 0 && unitCmp(pk0, pk1, k0, k1) >= 0 {
			return errors.New("units unsorted or repeated")
		}
		pk0, pk1 = k0, k1
		events, err := r.upTo(math.MaxUint32, "unit events")
		if err != nil {
			return err
		}
		ng, err := r.count(minGroupBytes, "groups")
		if err != nil {
			return err
		}
		if ng < 1 || ng > MaxBound {
			return fmt.Errorf("unit with %d groups", ng)
		}
		w = append(w, k0, k[1], k[2], uint32(events), uint32(ng))
		inGroups, prevGid := uint64(0), uint64(0)
		for j := range ng {
			var gid, ev uint64
			if w, gid, ev, err = r.unitGroup(w, len(p.keys), j == 0, prevGid); err != nil {
				return err
			}
			used[gid], prevGid = true, gid
			inGroups += ev
		}
		if events != math.MaxUint32 && inGroups > events {
			return errors.New("group events exceed the unit's")
		}
	}
	for _, u := range used {
		if !u {
			return errors.New("a key no unit uses")
		}
	}
	p.words, p.nunits = w, n
	return nil
}

// unitGroup reads one group of a unit and appends it to w (blob group
// layout), checking it against the dictionary size nkeys and, unless it is
// the unit's first, the previous group's key index prevGid. It returns the
// group's key index and events.
func (r *preader) unitGroup(w []uint32, nkeys int, first bool, prevGid uint64) (_ []uint32, gid, ev uint64, err error) {
	var c [gCounts]uint64
	for x := range c {
		if c[x], err = r.upTo(math.MaxUint32, "group counter"); err != nil {
			return nil, 0, 0, err
		}
	}
	gid, ev, hist, nvals := c[gGid], c[gEvents], c[gHist], c[gNvals]
	switch {
	case gid >= uint64(nkeys) || !first && gid <= prevGid:
		return nil, 0, 0, errors.New("group keys out of range, unsorted or repeated")
	case ev < 1 || hist > ev || nvals > ev:
		return nil, 0, 0, errors.New("inconsistent group counters")
	}
	g := len(w)
	w = append(w, uint32(gid), uint32(ev), uint32(hist), uint32(nvals), 0)
	nb, err := r.count(minCellBytes, "cells")
	if err != nil {
		return nil, 0, 0, err
	}
	if nb > MaxBound {
		return nil, 0, 0, fmt.Errorf("%d cells", nb)
	}
	inCells := uint64(0)
	for x := range nb {
		bkt, err := r.upTo(MaxNumBuckets-1, "bucket")
		if err != nil {
			return nil, 0, 0, err
		}
		cnt, err := r.upTo(math.MaxUint32, "cell count")
		if err != nil {
			return nil, 0, 0, err
		}
		if cnt < 1 || x > 0 && bkt <= uint64(w[len(w)-2]) {
			return nil, 0, 0, errors.New("cells empty, unsorted or repeated")
		}
		inCells += cnt
		w = append(w, uint32(bkt), uint32(cnt))
	}
	if nb == 0 && hist > 0 || hist != math.MaxUint32 && inCells > hist {
		return nil, 0, 0, errors.New("cell counts inconsistent with the group's")
	}
	nv, err := r.count(minValueBytes, "values")
	if err != nil {
		return nil, 0, 0, err
	}
	if nv > MaxBound || uint64(nv) > nvals || nvals > 0 && nv == 0 {
		return nil, 0, 0, errors.New("values inconsistent with the group's")
	}
	var prev valRec
	for x := range nv {
		pr, _ := r.fixed32()
		bits, _ := r.fixed64() // lengths checked by count
		if v := math.Float64frombits(bits); math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, 0, 0, errors.New("value not finite")
		}
		cur := valRec{pr, bits}
		if x > 0 && valCmp(prev, cur) > 0 {
			return nil, 0, 0, errors.New("values unsorted")
		}
		prev = cur
		w = append(w, pr, uint32(bits), uint32(bits>>32))
	}
	w[g+gCounts] = uint32(nb) | uint32(nv)<<16
	return w, gid, ev, nil
}

func (r *preader) groups(p *Partial) error {
	if len(p.keys) > r.left()/minEGroupBytes {
		return errShort
	}
	p.groups = make([]egroup, len(p.keys))
	total := int64(0)
	extra := false
	for i := range p.groups {
		g := &p.groups[i]
		var c [3]uint64
		for x := range c {
			var err error
			if c[x], err = r.upTo(math.MaxInt64, "group counter"); err != nil {
				return err
			}
		}
		g.events, g.values, g.clamp = int64(c[0]), int64(c[1]), int64(c[2])
		var ok bool
		if total, ok = addInt(total, g.events); !ok || g.events < 1 || g.values > g.events || g.clamp > g.values {
			return errors.New("inconsistent group counters")
		}
		nb, err := r.count(minCellBytes, "cells")
		if err != nil {
			return err
		}
		if nb > MaxNumBuckets {
			return fmt.Errorf("%d cells", nb)
		}
		g.cells = make([]ecell, nb)
		inCells := int64(0)
		for x := range g.cells {
			bkt, err := r.upTo(MaxNumBuckets-1, "bucket")
			if err != nil {
				return err
			}
			cnt, err := r.upTo(math.MaxInt64, "cell count")
			if err != nil {
				return err
			}
			if cnt < 1 || x > 0 && bkt <= uint64(g.cells[x-1].bucket) {
				return errors.New("cells empty, unsorted or repeated")
			}
			if inCells, ok = addInt(inCells, int64(cnt)); !ok || inCells > g.events {
				return errors.New("cell counts exceed the group's events")
			}
			g.cells[x] = ecell{uint32(bkt), int64(cnt)}
		}
		for _, s := range []*exactSum{&g.sum, &g.csum} {
			if err := r.exactSum(s); err != nil {
				return err
			}
		}
		if g.values == 0 && (len(g.sum.p) > 0 || len(g.csum.p) > 0) {
			return errors.New("a sum without values")
		}
		if r.extra {
			if err := r.exactSum(&g.csq); err != nil {
				return err
			}
			if err := r.leaves(g); err != nil {
				return err
			}
			if g.values == 0 && len(g.csq.p) > 0 {
				return errors.New("a sum without values")
			}
			if len(g.csq.p) > 0 || len(g.leaves) > 0 {
				extra = true
			}
		}
	}
	if r.extra && !extra {
		return errors.New("variance and quantile fields flagged but empty")
	}
	return nil
}

// leaves reads an event-level group's quantile tree leaves.
func (r *preader) leaves(g *egroup) error {
	n, err := r.count(2, "leaves")
	if err != nil {
		return err
	}
	if n > MaxTreeLeaves {
		return fmt.Errorf("%d leaves", n)
	}
	if n == 0 {
		return nil
	}
	g.leaves = make([]LeafCount, n)
	total := int64(0)
	for x := range g.leaves {
		l, err := r.upTo(MaxTreeLeaves-1, "leaf")
		if err != nil {
			return err
		}
		c, err := r.upTo(math.MaxInt64, "leaf count")
		if err != nil {
			return err
		}
		if c < 1 || x > 0 && l <= uint64(g.leaves[x-1].Leaf) {
			return errors.New("leaves empty, unsorted or repeated")
		}
		var ok bool
		if total, ok = addInt(total, int64(c)); !ok || total > g.values {
			return errors.New("leaf counts exceed the group's values")
		}
		g.leaves[x] = LeafCount{uint32(l), int64(c)}
	}
	return nil
}

// maxTerms bounds the terms of a canonical exact sum: each term is below
// half an ulp of the previous one, and all are multiples of 2^-1074 below
// 2^118, so there are at most (118 + 1074)/53 + 1 = 23 of them.
const maxTerms = 23

// exactSum reads a canonical exact-sum expansion.
func (r *preader) exactSum(s *exactSum) error {
	n, err := r.count(8, "sum terms")
	if err != nil {
		return err
	}
	if n > maxTerms {
		return fmt.Errorf("%d sum terms", n)
	}
	if n == 0 {
		return nil
	}
	xs := make([]float64, n)
	var e exactSum
	for i := range xs {
		bits, _ := r.fixed64() // length checked by count
		xs[i] = math.Float64frombits(bits)
		if !(math.Abs(xs[i]) <= maxPartialSum) {
			return errors.New("sum term not finite or too large")
		}
		e.add(xs[i])
	}
	e.canon()
	if !slices64Equal(e.p, xs) {
		return errors.New("sum not in canonical form")
	}
	s.p = xs
	return nil
}

// slices64Equal compares float64 slices bit for bit.
func slices64Equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}
