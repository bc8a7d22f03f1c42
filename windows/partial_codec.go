package windows

import (
	"encoding/binary"
	"errors"
	"math"
)

// partialMagic and partialVersion open every encoded partial. A decoder
// accepts only this version; the version is also part of the fingerprint.
const (
	partialMagic   = "DPSP"
	partialVersion = 1
	// maxPartialSum bounds |x| for every term of an event-level exact sum
	// (2^117: a window's sum of at most 2^63 values of magnitude at most
	// MaxAbsValue = 2^53 is below 2^116), so that merging any number of
	// decoded partials that fit in memory never overflows float64.
	maxPartialSum = 0x1p117
)

// MarshalBinary encodes the partial, for the internal topic between the
// stages. The encoding is canonical: equal states give equal bytes,
// whatever the order in which events arrived, and UnmarshalBinary accepts
// only canonical encodings, so decoding and encoding again gives the same
// bytes. Integers are unsigned LEB128 varints ("uvarint") in their
// shortest form, or zig-zag varints ("varint") where they may be negative;
// fixed-size fields are little-endian. Layout:
//
//	magic        "DPSP"
//	version      1 byte: 1
//	flags        1 byte: bit 0 for event-level privacy; bit 1 (event
//	             level only) when some group carries the variance or
//	             quantile fields below
//	fingerprint  16 bytes (configuration and seed, see Partial)
//	start, end   varint (Unix ms)
//	partitions   uvarint n, then n varints, strictly increasing
//	unit_cap     uvarint (0 with event level)
//	group_cap    uvarint (0 without event level)
//	keys         uvarint n, then n × (uvarint length, bytes), strictly
//	             increasing bytewise
//
// then, without event level,
//
//	units        uvarint n, then n units, strictly increasing by (k0, k1):
//	  k0 4 bytes (top half of the unit's keyed hash), k1 8 bytes,
//	  events uvarint, groups uvarint (≥ 1), then each group:
//	    key index uvarint (strictly increasing within the unit; every key
//	      is used by some unit), events uvarint (≥ 1), with a cell
//	      uvarint, with a value uvarint,
//	    cells uvarint n, n × (bucket uvarint strictly increasing, count
//	      uvarint ≥ 1),
//	    values uvarint n, n × (priority 4 bytes, value 8 bytes IEEE 754,
//	      finite), non-decreasing by (priority, bits)
//
// and with event level, for each key in order:
//
//	events uvarint (≥ 1), values uvarint, clamped uvarint,
//	cells uvarint n, n × (bucket uvarint strictly increasing, count uvarint ≥ 1),
//	sum, centred sum: uvarint n, n × float64 8 bytes, each the canonical
//	  exact-sum expansion (see exactSum.canon)
//	with flag bit 1: centred sum of squares (as the sums), then leaves
//	  uvarint n, n × (leaf uvarint strictly increasing, count uvarint ≥ 1)
//
// Per-unit counters are at most 2^32 − 1; cells and values per group at
// most MaxBound. It returns an error if Start ≥ End or Partitions is not
// sorted and distinct.
func (p *Partial) MarshalBinary() ([]byte, error) {
	if p.Start >= p.End {
		return nil, errors.New("windows: encoding partial: empty extent")
	}
	if !sortedDistinct(p.Partitions) {
		return nil, errors.New("windows: encoding partial: partitions not sorted or repeated")
	}
	size := 64 + 5*len(p.Partitions) + 4*len(p.words)
	for _, k := range p.keys {
		size += len(k) + 2
	}
	b := make([]byte, 0, size)
	flags, extra := p.codecFlags()
	b = p.appendHeader(b, flags)
	if p.eventLevel {
		return p.appendGroups(b, extra), nil
	}
	return p.appendUnits(b), nil
}

// codecFlags returns the flags byte of p's encoding: 1 for event-level
// state, and 2 (extra) if some event-level group has a sum of squares or
// leaf counts.
func (p *Partial) codecFlags() (flags byte, extra bool) {
	if !p.eventLevel {
		return 0, false
	}
	flags = 1
	for i := range p.groups {
		if len(p.groups[i].csq.p) > 0 || len(p.groups[i].leaves) > 0 {
			extra = true
		}
	}
	if extra {
		flags |= 2
	}
	return flags, extra
}

// appendHeader appends the magic, version, flags, fingerprint, extent,
// partitions, drop counts and key dictionary.
func (p *Partial) appendHeader(b []byte, flags byte) []byte {
	b = append(b, partialMagic...)
	b = append(b, partialVersion, flags)
	b = append(b, p.fp[:]...)
	b = binary.AppendVarint(b, p.Start)
	b = binary.AppendVarint(b, p.End)
	b = binary.AppendUvarint(b, uint64(len(p.Partitions)))
	for _, id := range p.Partitions {
		b = binary.AppendVarint(b, int64(id))
	}
	b = binary.AppendUvarint(b, uint64(p.unitCap))
	b = binary.AppendUvarint(b, uint64(p.groupCap))
	b = binary.AppendUvarint(b, uint64(len(p.keys)))
	for _, k := range p.keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	return b
}

// appendGroups appends an event-level partial's groups (with their sums
// of squares and leaf counts if extra).
func (p *Partial) appendGroups(b []byte, extra bool) []byte {
	le := binary.LittleEndian
	for i := range p.groups {
		g := &p.groups[i]
		b = binary.AppendUvarint(b, uint64(g.events))
		b = binary.AppendUvarint(b, uint64(g.values))
		b = binary.AppendUvarint(b, uint64(g.clamp))
		b = binary.AppendUvarint(b, uint64(len(g.cells)))
		for _, c := range g.cells {
			b = binary.AppendUvarint(b, uint64(c.bucket))
			b = binary.AppendUvarint(b, uint64(c.count))
		}
		for _, s := range [2][]float64{g.sum.p, g.csum.p} {
			b = binary.AppendUvarint(b, uint64(len(s)))
			for _, x := range s {
				b = le.AppendUint64(b, math.Float64bits(x))
			}
		}
		if extra {
			b = binary.AppendUvarint(b, uint64(len(g.csq.p)))
			for _, x := range g.csq.p {
				b = le.AppendUint64(b, math.Float64bits(x))
			}
			b = binary.AppendUvarint(b, uint64(len(g.leaves)))
			for _, l := range g.leaves {
				b = binary.AppendUvarint(b, uint64(l.Leaf))
				b = binary.AppendUvarint(b, uint64(l.Count))
			}
		}
	}
	return b
}

// appendUnits appends a unit partial's units.
func (p *Partial) appendUnits(b []byte) []byte {
	le := binary.LittleEndian
	w := p.words
	b = binary.AppendUvarint(b, uint64(p.nunits))
	for pos := 0; pos < len(w); {
		b = le.AppendUint32(b, w[pos+pK0])
		b = le.AppendUint32(b, w[pos+pK1lo])
		b = le.AppendUint32(b, w[pos+pK1hi])
		b = binary.AppendUvarint(b, uint64(w[pos+pEvents]))
		ng := w[pos+pNg]
		b = binary.AppendUvarint(b, uint64(ng))
		pos += pHdr
		for range ng {
			g := w[pos : pos+groupSize(w[pos+gCounts])]
			pos += len(g)
			for _, x := range g[:gCounts] {
				b = binary.AppendUvarint(b, uint64(x))
			}
			nb, nv := int(g[gCounts]&0xffff), int(g[gCounts]>>16)
			b = binary.AppendUvarint(b, uint64(nb))
			cells := g[gWords : gWords+cellWords*nb]
			for _, x := range cells {
				b = binary.AppendUvarint(b, uint64(x))
			}
			b = binary.AppendUvarint(b, uint64(nv))
			for i := gWords + len(cells); i < len(g); i += valWords {
				b = le.AppendUint32(b, g[i])
				b = le.AppendUint32(b, g[i+1])
				b = le.AppendUint32(b, g[i+2])
			}
		}
	}
	return b
}
