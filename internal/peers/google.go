package main

// google.go runs Google's differential-privacy Go library (v3, dpagg) on
// the same data with the same budget and the same bounds: one partition
// per unit (MaxPartitionsContributed = 1; the histogram's cells are
// partitions, Setting.Cells of them per unit), at most Setting.Bound
// contributions per partition, values clamped to [Lower, Upper].
//
// Count, BoundedSum and the histogram cells have no exported bound on the
// contributions per partition, so, as Google's pipelines do, the harness
// aggregates per unit first and bounds the unit's total: BoundedSumInt64
// of the unit's event count in [0, Bound] (Count itself where Bound is 1,
// and for distinct units), BoundedSumFloat64 of the unit's clamped sum in
// [0, Bound·Upper]. BoundedMean, BoundedVariance and BoundedQuantiles take
// every event with MaxContributionsPerPartition = Bound.

import (
	"errors"
	"fmt"

	"github.com/google/differential-privacy/go/v3/dpagg"
	"github.com/google/differential-privacy/go/v3/noise"
)

// ErrGoogle wraps failures of Google's library.
var ErrGoogle = errors.New("peers: google")

// Noise kinds of Google's library measured.
const (
	NoiseLaplace  = "laplace"
	NoiseGaussian = "gaussian"
)

// googleNoises returns the noise kinds valid at s: Laplace always (at
// δ = 0: it is pure ε, so it meets (ε, δ) too), Gaussian when δ > 0.
func googleNoises(s Setting) []string {
	if s.Delta > 0 {
		return []string{NoiseLaplace, NoiseGaussian}
	}
	return []string{NoiseLaplace}
}

// perUnit is the data aggregated per unit, for the aggregations bounded
// per unit.
type perUnit struct {
	count []int64   // events per unit
	sum   []float64 // clamped sum per unit
	cells [][]int64 // events per unit and cell
}

func aggregatePerUnit(d *Data) perUnit {
	n := d.Setting.Units
	p := perUnit{count: make([]int64, n), sum: make([]float64, n), cells: make([][]int64, len(Categories))}
	for j := range p.cells {
		p.cells[j] = make([]int64, n)
	}
	for _, e := range d.Events {
		p.count[e.Unit]++
		p.sum[e.Unit] += Clamp(e.Value)
		p.cells[e.Category][e.Unit]++
	}
	return p
}

// googleRep runs every aggregation once with noise kind kind and returns
// the squared errors.
func googleRep(d *Data, p perUnit, kind string) (RepErrors, error) {
	s := d.Setting
	t := &d.Truth
	var nz noise.Noise
	eps, del := s.Epsilon, s.Delta
	switch kind {
	case NoiseLaplace:
		nz, del = noise.Laplace(), 0
	case NoiseGaussian:
		nz = noise.Gaussian()
	default:
		return nil, fmt.Errorf("%w: unknown noise %q", ErrGoogle, kind)
	}
	bound := int64(s.Bound)
	e := RepErrors{}
	put := func(row string, got, want float64) {
		d := got - want
		e[row] = d * d
	}

	// count: the events, each unit's count bounded by Bound.
	cnt, err := unitSum(p.count, eps, del, 1, bound, nz)
	if err != nil {
		return nil, err
	}
	put(RowCount, cnt, t.Count)

	// units: one per unit.
	uc, err := dpagg.NewCount(&dpagg.CountOptions{Epsilon: eps, Delta: del, MaxPartitionsContributed: 1, Noise: nz})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	if err := uc.IncrementBy(int64(s.Units)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	u, err := uc.Result()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	put(RowUnits, float64(u), t.Units)

	// sum: each unit's clamped sum bounded by Bound·Upper.
	bs, err := dpagg.NewBoundedSumFloat64(&dpagg.BoundedSumFloat64Options{Epsilon: eps, Delta: del,
		MaxPartitionsContributed: 1, Lower: 0, Upper: float64(bound) * Upper, Noise: nz})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	for _, v := range p.sum {
		if err := bs.Add(v); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrGoogle, err)
		}
	}
	sum, err := bs.Result()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	put(RowSum, sum, t.Sum)

	// mean and variance: every event, Bound per unit.
	bm, err := dpagg.NewBoundedMean(&dpagg.BoundedMeanOptions{Epsilon: eps, Delta: del, MaxPartitionsContributed: 1,
		MaxContributionsPerPartition: bound, Lower: Lower, Upper: Upper, Noise: nz})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	bv, err := dpagg.NewBoundedVariance(&dpagg.BoundedVarianceOptions{Epsilon: eps, Delta: del, MaxPartitionsContributed: 1,
		MaxContributionsPerPartition: bound, Lower: Lower, Upper: Upper, Noise: nz})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	bq, err := dpagg.NewBoundedQuantiles(&dpagg.BoundedQuantilesOptions{Epsilon: eps, Delta: del, MaxPartitionsContributed: 1,
		MaxContributionsPerPartition: bound, Lower: Lower, Upper: Upper, Noise: nz})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	for _, ev := range d.Events {
		if err := errors.Join(bm.Add(ev.Value), bv.Add(ev.Value), bq.Add(ev.Value)); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrGoogle, err)
		}
	}
	mean, err := bm.Result()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	put(RowMean, mean, t.Mean)
	variance, err := bv.Result()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	put(RowVariance, variance, t.Variance)
	xs := make([]float64, len(Ranks))
	for i, r := range Ranks {
		if xs[i], err = bq.Result(r); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrGoogle, err)
		}
	}
	quantileErrors(e, t, xs)

	// histogram: each cell a partition, Cells per unit, Bound per cell.
	var sq float64
	for j := range Categories {
		c, err := unitSum(p.cells[j], eps, del, int64(s.Cells()), bound, nz)
		if err != nil {
			return nil, err
		}
		d := c - t.Hist[j]
		sq += d * d
	}
	e[RowHist] = sq / float64(len(Categories))
	return e, nil
}

// unitSum releases the sum of per-unit integers xs, each in [0, upper],
// with l0 partitions per unit: Count when upper is 1 (its own bound),
// else BoundedSumInt64.
func unitSum(xs []int64, eps, del float64, l0, upper int64, nz noise.Noise) (float64, error) {
	if upper == 1 {
		c, err := dpagg.NewCount(&dpagg.CountOptions{Epsilon: eps, Delta: del, MaxPartitionsContributed: l0, Noise: nz})
		if err != nil {
			return 0, fmt.Errorf("%w: %v", ErrGoogle, err)
		}
		var total int64
		for _, x := range xs {
			total += x
		}
		if err := c.IncrementBy(total); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrGoogle, err)
		}
		r, err := c.Result()
		return float64(r), err
	}
	bs, err := dpagg.NewBoundedSumInt64(&dpagg.BoundedSumInt64Options{Epsilon: eps, Delta: del,
		MaxPartitionsContributed: l0, Lower: 0, Upper: upper, Noise: nz})
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	for _, x := range xs {
		if err := bs.Add(x); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrGoogle, err)
		}
	}
	r, err := bs.Result()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	return float64(r), nil
}
