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
	g, err := newGoogleRun(d, kind)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(g.counts(p), g.sum(p), g.events(), g.histogram(p)); err != nil {
		return nil, err
	}
	return g.e, nil
}

// googleRun is one repetition of Google's aggregations: the setting's
// budget with noise nz, and the squared errors so far.
type googleRun struct {
	d        *Data
	nz       noise.Noise
	eps, del float64
	bound    int64
	e        RepErrors
}

// newGoogleRun prepares a repetition with noise kind (Laplace: pure ε, so
// δ = 0; Gaussian: the setting's δ).
func newGoogleRun(d *Data, kind string) (*googleRun, error) {
	g := &googleRun{d: d, eps: d.Setting.Epsilon, del: d.Setting.Delta, bound: int64(d.Setting.Bound), e: RepErrors{}}
	switch kind {
	case NoiseLaplace:
		g.nz, g.del = noise.Laplace(), 0
	case NoiseGaussian:
		g.nz = noise.Gaussian()
	default:
		return nil, fmt.Errorf("%w: unknown noise %q", ErrGoogle, kind)
	}
	return g, nil
}

// put records the squared error of row.
func (g *googleRun) put(row string, got, want float64) {
	d := got - want
	g.e[row] = d * d
}

// counts releases the event count (each unit's count bounded by Bound)
// and the distinct units (one per unit).
func (g *googleRun) counts(p perUnit) error {
	cnt, err := unitSum(p.count, g.eps, g.del, 1, g.bound, g.nz)
	if err != nil {
		return err
	}
	g.put(RowCount, cnt, g.d.Truth.Count)
	uc, err := dpagg.NewCount(&dpagg.CountOptions{Epsilon: g.eps, Delta: g.del, MaxPartitionsContributed: 1, Noise: g.nz})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	if err := uc.IncrementBy(int64(g.d.Setting.Units)); err != nil {
		return fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	u, err := uc.Result()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	g.put(RowUnits, float64(u), g.d.Truth.Units)
	return nil
}

// sum releases the sum, each unit's clamped sum bounded by Bound·Upper.
func (g *googleRun) sum(p perUnit) error {
	bs, err := dpagg.NewBoundedSumFloat64(&dpagg.BoundedSumFloat64Options{Epsilon: g.eps, Delta: g.del,
		MaxPartitionsContributed: 1, Lower: 0, Upper: float64(g.bound) * Upper, Noise: g.nz})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	for _, v := range p.sum {
		if err := bs.Add(v); err != nil {
			return fmt.Errorf("%w: %v", ErrGoogle, err)
		}
	}
	sum, err := bs.Result()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	g.put(RowSum, sum, g.d.Truth.Sum)
	return nil
}

// events releases the mean, the variance and the quantiles from every
// event, Bound per unit.
func (g *googleRun) events() error {
	bm, err := dpagg.NewBoundedMean(&dpagg.BoundedMeanOptions{Epsilon: g.eps, Delta: g.del, MaxPartitionsContributed: 1,
		MaxContributionsPerPartition: g.bound, Lower: Lower, Upper: Upper, Noise: g.nz})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	bv, err := dpagg.NewBoundedVariance(&dpagg.BoundedVarianceOptions{Epsilon: g.eps, Delta: g.del, MaxPartitionsContributed: 1,
		MaxContributionsPerPartition: g.bound, Lower: Lower, Upper: Upper, Noise: g.nz})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	bq, err := dpagg.NewBoundedQuantiles(&dpagg.BoundedQuantilesOptions{Epsilon: g.eps, Delta: g.del, MaxPartitionsContributed: 1,
		MaxContributionsPerPartition: g.bound, Lower: Lower, Upper: Upper, Noise: g.nz})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	for _, ev := range g.d.Events {
		if err := errors.Join(bm.Add(ev.Value), bv.Add(ev.Value), bq.Add(ev.Value)); err != nil {
			return fmt.Errorf("%w: %v", ErrGoogle, err)
		}
	}
	mean, err := bm.Result()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	g.put(RowMean, mean, g.d.Truth.Mean)
	variance, err := bv.Result()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrGoogle, err)
	}
	g.put(RowVariance, variance, g.d.Truth.Variance)
	xs := make([]float64, len(Ranks))
	for i, r := range Ranks {
		if xs[i], err = bq.Result(r); err != nil {
			return fmt.Errorf("%w: %v", ErrGoogle, err)
		}
	}
	quantileErrors(g.e, &g.d.Truth, xs)
	return nil
}

// histogram releases every cell as a partition: Cells per unit, Bound per
// cell; the row is the mean squared error over the cells.
func (g *googleRun) histogram(p perUnit) error {
	var sq float64
	for j := range Categories {
		c, err := unitSum(p.cells[j], g.eps, g.del, int64(g.d.Setting.Cells()), g.bound, g.nz)
		if err != nil {
			return err
		}
		d := c - g.d.Truth.Hist[j]
		sq += d * d
	}
	g.e[RowHist] = sq / float64(len(Categories))
	return nil
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
