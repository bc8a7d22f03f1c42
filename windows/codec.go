package windows

import (
	"bytes"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
)

// codecVersion is the version of the window encoding written by
// MarshalBinary; UnmarshalBinary accepts only this version.
const codecVersion = 1

// MarshalBinary encodes the window (closed or partial) as a msgpack map,
// for the merge stage or for storage. The encoding is deterministic: equal
// windows give equal bytes. Layout (keys in this order):
//
//	v           1
//	start, end  int (Unix ms)
//	event_level bool
//	units       int
//	partials    int
//	drops       map: groups, buckets, per_bucket, values, count, clamped,
//	            unit_cap, group_cap → int; then total → int only when
//	            non-zero (MaxContributions)
//	sensitivity map: histogram, count, sum, mean_sum, values, units →
//	            [L0, L1, L2, Linf] (float64), or [L0, L1, L2, Linf, 1]
//	            when MaxContributions binds it (Sensitivity.Total);
//	            replace_one → bool; then sum_sq and tree (same form) only
//	            when non-zero
//	groups      array of maps, sorted by k:
//	            k string, u int (units), h [int] or nil (histogram),
//	            c int (count), n int (values), s [float64] and cs [float64]
//	            (the exact-sum partials of Sum and CentredSum); then, only
//	            with Variance, q [float64] (CentredSqSum's partials), and
//	            only with Quantiles, l [int] (leaf, count pairs by leaf)
//
// Sum, CentredSum and CentredSqSum are not stored: they are recomputed,
// correctly rounded, from the partials. The optional keys keep the
// encoding of a window without the newer aggregates unchanged.
func (w *Window) MarshalBinary() ([]byte, error) {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	var err error
	put := func(fs ...func() error) {
		for _, f := range fs {
			if err == nil {
				err = f()
			}
		}
	}
	str := func(s string) func() error { return func() error { return e.EncodeString(s) } }
	num := func(n int64) func() error { return func() error { return e.EncodeInt(n) } }
	flt := func(x float64) func() error { return func() error { return e.EncodeFloat64(x) } }
	mapLen := func(n int) func() error { return func() error { return e.EncodeMapLen(n) } }
	arrLen := func(n int) func() error { return func() error { return e.EncodeArrayLen(n) } }
	boolean := func(b bool) func() error { return func() error { return e.EncodeBool(b) } }
	floats := func(xs []float64) {
		put(arrLen(len(xs)))
		for _, x := range xs {
			put(flt(x))
		}
	}
	sens := func(s Sensitivity) { floats([]float64{s.L0, s.L1, s.L2, s.Linf, 1}[:4+btoi(s.Total)]) }

	put(mapLen(9),
		str("v"), num(codecVersion),
		str("start"), num(w.Start),
		str("end"), num(w.End),
		str("event_level"), boolean(w.EventLevel),
		str("units"), num(w.Units),
		str("partials"), num(w.Partials),
		str("drops"), mapLen(8+btoi(w.Drops.Total != 0)),
		str("groups"), num(w.Drops.Groups),
		str("buckets"), num(w.Drops.Buckets),
		str("per_bucket"), num(w.Drops.PerBucket),
		str("values"), num(w.Drops.Values),
		str("count"), num(w.Drops.Count),
		str("clamped"), num(w.Drops.Clamped),
		str("unit_cap"), num(w.Drops.UnitCap),
		str("group_cap"), num(w.Drops.GroupCap))
	if w.Drops.Total != 0 {
		put(str("total"), num(w.Drops.Total))
	}
	put(str("sensitivity"), mapLen(7+btoi(w.Sensitivity.SumSq != Sensitivity{})+btoi(w.Sensitivity.Tree != Sensitivity{})))
	s := &w.Sensitivity
	for i, v := range [...]Sensitivity{s.Histogram, s.Count, s.Sum, s.MeanSum, s.Values, s.Units} {
		put(str([...]string{"histogram", "count", "sum", "mean_sum", "values", "units"}[i]))
		sens(v)
	}
	put(str("replace_one"), boolean(s.ReplaceOne))
	if s.SumSq != (Sensitivity{}) {
		put(str("sum_sq"))
		sens(s.SumSq)
	}
	if s.Tree != (Sensitivity{}) {
		put(str("tree"))
		sens(s.Tree)
	}
	variance, quantiles := s.SumSq != (Sensitivity{}), s.Tree != (Sensitivity{})
	put(str("groups"), arrLen(len(w.Groups)))
	for i := range w.Groups {
		g := &w.Groups[i]
		put(mapLen(7+btoi(variance)+btoi(quantiles)), str("k"), str(g.Key), str("u"), num(g.Units), str("h"))
		if g.Histogram == nil {
			put(e.EncodeNil)
		} else {
			put(arrLen(len(g.Histogram)))
			for _, c := range g.Histogram {
				put(num(c))
			}
		}
		put(str("c"), num(g.Count), str("n"), num(g.Values), str("s"))
		floats(g.sum.p)
		put(str("cs"))
		floats(g.csum.p)
		if variance {
			put(str("q"))
			floats(g.csq.p)
		}
		if quantiles {
			put(str("l"), arrLen(2*len(g.Leaves)))
			for _, l := range g.Leaves {
				put(num(int64(l.Leaf)), num(l.Count))
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("windows: encoding window: %w", err)
	}
	return buf.Bytes(), nil
}

// UnmarshalBinary decodes a window written by MarshalBinary, replacing w.
// It checks what it can — version, extent, non-negative counts, finite
// non-negative sensitivities, finite partials, groups sorted by key without
// duplicates, equal histogram sizes — and returns an error wrapping
// ErrCorrupt otherwise. Unknown keys are skipped, for forward
// compatibility.
func (w *Window) UnmarshalBinary(data []byte) error {
	d := &decoder{dec: msgpack.NewDecoder(bytes.NewReader(data)), limit: len(data)}
	out, err := d.window()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	*w = out
	return nil
}

// decoder reads the window encoding, failing on the first problem.
type decoder struct {
	dec   *msgpack.Decoder
	limit int // upper bound for any length (the input size)
}

func (d *decoder) mapLen() (int, error) {
	n, err := d.dec.DecodeMapLen()
	if err == nil && (n < 0 || n > d.limit) {
		err = fmt.Errorf("bad map length %d", n)
	}
	return n, err
}

func (d *decoder) arrayLen() (int, error) {
	n, err := d.dec.DecodeArrayLen()
	if err == nil && n > d.limit {
		err = fmt.Errorf("bad array length %d", n)
	}
	return n, err // −1 for nil
}

func (d *decoder) count(name string) (int64, error) {
	n, err := d.dec.DecodeInt64()
	if err == nil && n < 0 {
		err = fmt.Errorf("%s is negative", name)
	}
	return n, err
}

func (d *decoder) floats(name string, nonNeg bool) ([]float64, error) {
	n, err := d.arrayLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("%s is nil", name)
	}
	if n == 0 {
		return nil, nil
	}
	xs := make([]float64, n)
	for i := range xs {
		if xs[i], err = d.dec.DecodeFloat64(); err != nil {
			return nil, err
		}
		if math.IsNaN(xs[i]) || math.IsInf(xs[i], 0) || (nonNeg && xs[i] < 0) {
			return nil, fmt.Errorf("%s has a bad value", name)
		}
	}
	return xs, nil
}

func (d *decoder) window() (Window, error) {
	var w Window
	n, err := d.mapLen()
	if err != nil {
		return w, err
	}
	version := int64(-1)
	seen := map[string]bool{}
	for range n {
		key, err := d.dec.DecodeString()
		if err != nil {
			return w, err
		}
		if seen[key] {
			return w, fmt.Errorf("key %q repeated", key)
		}
		seen[key] = true
		switch key {
		case "v":
			version, err = d.dec.DecodeInt64()
		case "start":
			w.Start, err = d.dec.DecodeInt64()
		case "end":
			w.End, err = d.dec.DecodeInt64()
		case "event_level":
			w.EventLevel, err = d.dec.DecodeBool()
		case "units":
			w.Units, err = d.count("units")
		case "partials":
			w.Partials, err = d.count("partials")
		case "drops":
			err = d.drops(&w.Drops)
		case "sensitivity":
			err = d.sensitivity(&w.Sensitivity)
		case "groups":
			w.Groups, err = d.groups()
		default:
			err = d.dec.Skip()
		}
		if err != nil {
			return w, fmt.Errorf("%s: %w", key, err)
		}
	}
	switch {
	case version != codecVersion:
		return w, fmt.Errorf("version %d, want %d", version, codecVersion)
	case !seen["start"] || !seen["end"] || !seen["sensitivity"]:
		return w, fmt.Errorf("start, end or sensitivity missing")
	case w.Start < minTime || w.Start > maxTime || w.End <= w.Start || w.End-w.Start > ms(maxDuration):
		return w, fmt.Errorf("bad extent [%d, %d)", w.Start, w.End)
	case w.Partials < 1:
		return w, fmt.Errorf("partials must be at least 1")
	}
	return w, nil
}

func (d *decoder) drops(out *Drops) error {
	n, err := d.mapLen()
	if err != nil {
		return err
	}
	fields := map[string]*int64{
		"groups": &out.Groups, "buckets": &out.Buckets, "per_bucket": &out.PerBucket,
		"values": &out.Values, "count": &out.Count, "clamped": &out.Clamped,
		"unit_cap": &out.UnitCap, "group_cap": &out.GroupCap, "total": &out.Total,
	}
	for range n {
		key, err := d.dec.DecodeString()
		if err != nil {
			return err
		}
		if p := fields[key]; p != nil {
			*p, err = d.count(key)
		} else {
			err = d.dec.Skip()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) sensitivity(out *Sensitivities) error {
	n, err := d.mapLen()
	if err != nil {
		return err
	}
	fields := map[string]*Sensitivity{
		"histogram": &out.Histogram, "count": &out.Count, "sum": &out.Sum,
		"mean_sum": &out.MeanSum, "values": &out.Values, "units": &out.Units,
		"sum_sq": &out.SumSq, "tree": &out.Tree,
	}
	for range n {
		key, err := d.dec.DecodeString()
		if err != nil {
			return err
		}
		switch p := fields[key]; {
		case p != nil:
			var xs []float64
			if xs, err = d.floats(key, true); err == nil && (len(xs) < 4 || len(xs) > 5 || len(xs) == 5 && xs[4] != 1) {
				err = fmt.Errorf("%s: want [L0, L1, L2, Linf] or [L0, L1, L2, Linf, 1] (total bound)", key)
			}
			if err == nil {
				*p = Sensitivity{L0: xs[0], L1: xs[1], L2: xs[2], Linf: xs[3], Total: len(xs) == 5}
			}
		case key == "replace_one":
			out.ReplaceOne, err = d.dec.DecodeBool()
		default:
			err = d.dec.Skip()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) groups() ([]Group, error) {
	n, err := d.arrayLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	gs := make([]Group, n)
	nb := -1
	for i := range gs {
		g := &gs[i]
		m, err := d.mapLen()
		if err != nil {
			return nil, err
		}
		hasKey := false
		for range m {
			key, err := d.dec.DecodeString()
			if err != nil {
				return nil, err
			}
			switch key {
			case "k":
				g.Key, err = d.dec.DecodeString()
				hasKey = true
			case "u":
				g.Units, err = d.count("u")
			case "c":
				g.Count, err = d.count("c")
			case "n":
				g.Values, err = d.count("n")
			case "h":
				g.Histogram, err = d.histogram()
			case "l":
				g.Leaves, err = d.leaves()
			case "s", "cs", "q":
				var xs []float64
				if xs, err = d.floats(key, false); err == nil {
					for k := 1; k < len(xs) && err == nil; k++ {
						if !(math.Abs(xs[k-1]) < math.Abs(xs[k])) {
							err = fmt.Errorf("partials not in increasing magnitude")
						}
					}
					switch key {
					case "s":
						g.sum = exactSum{p: xs}
					case "cs":
						g.csum = exactSum{p: xs}
					default:
						g.csq = exactSum{p: xs}
					}
				}
			default:
				err = d.dec.Skip()
			}
			if err != nil {
				return nil, fmt.Errorf("group %d: %s: %w", i, key, err)
			}
		}
		if !hasKey {
			return nil, fmt.Errorf("group %d: key missing", i)
		}
		if i > 0 && !(gs[i-1].Key < g.Key) {
			return nil, fmt.Errorf("group %d: keys not sorted or repeated", i)
		}
		if g.Histogram != nil {
			if nb >= 0 && len(g.Histogram) != nb {
				return nil, fmt.Errorf("group %d: histogram size %d, others %d", i, len(g.Histogram), nb)
			}
			nb = len(g.Histogram)
		}
		if s, c, q := g.sum.value(), g.csum.value(), g.csq.value(); !finite(s) || !finite(c) || !finite(q) {
			return nil, fmt.Errorf("group %d: sum overflows", i)
		}
		g.finish()
	}
	return gs, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func (d *decoder) histogram() ([]int64, error) {
	n, err := d.arrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	h := make([]int64, n)
	for i := range h {
		if h[i], err = d.count("histogram cell"); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// leaves reads a group's quantile tree leaves: (leaf, count) pairs, leaves
// strictly increasing, counts ≥ 1.
func (d *decoder) leaves() ([]LeafCount, error) {
	n, err := d.arrayLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	if n%2 != 0 || n/2 > MaxTreeLeaves {
		return nil, fmt.Errorf("%d leaf words", n)
	}
	out := make([]LeafCount, n/2)
	for i := range out {
		l, err := d.count("leaf")
		if err != nil {
			return nil, err
		}
		c, err := d.count("leaf count")
		if err != nil {
			return nil, err
		}
		if l >= MaxTreeLeaves || c < 1 || i > 0 && uint32(l) <= out[i-1].Leaf {
			return nil, fmt.Errorf("leaves out of range, empty, unsorted or repeated")
		}
		out[i] = LeafCount{uint32(l), c}
	}
	return out, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
