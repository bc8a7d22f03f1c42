package main

// measure.go: the measured quantities (rows) and the errors of one
// repetition, from a dpstream release or from Google's dpagg results.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/schema"
)

// Row names: one measured quantity each.
const (
	RowCount    = "count"
	RowUnits    = "units"
	RowSum      = "sum"
	RowMean     = "mean"
	RowVariance = "variance"
	RowHist     = "histogram cell"
)

// rankRow and valueRow name the rank and value error rows of quantile
// rank r ("p50 rank", "p50 value").
func rankRow(r float64) string  { return "p" + strconv.FormatFloat(100*r, 'f', -1, 64) + " rank" }
func valueRow(r float64) string { return "p" + strconv.FormatFloat(100*r, 'f', -1, 64) + " value" }

// Rows lists the rows in table order.
func Rows() []string {
	rows := []string{RowCount, RowUnits, RowSum, RowMean, RowVariance, RowHist}
	for _, r := range Ranks {
		rows = append(rows, rankRow(r), valueRow(r))
	}
	return rows
}

// RepErrors holds one repetition's squared errors per row: the mean over
// the row's values (the histogram's cells; one value for the others).
type RepErrors map[string]float64

// quantileErrors adds the rank and value errors of released quantiles xs
// (one per rank of Ranks) to e.
func quantileErrors(e RepErrors, t *Truth, xs []float64) {
	for i, r := range Ranks {
		re := t.RankError(r, xs[i])
		ve := xs[i] - t.Quantile(r)
		e[rankRow(r)] = re * re
		e[valueRow(r)] = ve * ve
	}
}

// seriesNamed returns the series of r named name, which must hold n
// values.
func seriesNamed(r *schema.Release, name string, n int) (*schema.Series, error) {
	for i := range r.Series {
		if s := &r.Series[i]; s.Name == name {
			if s.Len() != n {
				return nil, fmt.Errorf("%w: series %q of %s has %d values, want %d", ErrDpstream, name, r.Aggregate, s.Len(), n)
			}
			return s, nil
		}
	}
	return nil, fmt.Errorf("%w: release %s of %s has no series %q", ErrDpstream, r.ReleaseID, r.Aggregate, name)
}

// Noise says which noise a dpstream release carried: the mechanisms of its
// noised series and, where one series carries the measured values (count,
// units, sum, histogram, quantiles: the tree's node counts), its scale.
type Noise struct {
	Mechanism string
	Scale     float64
}

// dpstreamErrors returns the squared errors of one dpstream release
// against the truth t, and its noise.
func dpstreamErrors(r *schema.Release, t *Truth) (RepErrors, Noise, error) {
	e := RepErrors{}
	var nz Noise
	one := func(row, series string, truth float64) error {
		s, err := seriesNamed(r, series, 1)
		if err != nil {
			return err
		}
		d := s.Value(0) - truth
		e[row] = d * d
		nz = Noise{Mechanism: s.Mechanism, Scale: s.Scale}
		return nil
	}
	var err error
	switch r.Aggregate {
	case operator.AggCount:
		err = one(RowCount, schema.SeriesCount, t.Count)
	case operator.AggUnits:
		err = one(RowUnits, schema.SeriesUnits, t.Units)
	case operator.AggSum:
		err = one(RowSum, schema.SeriesSum, t.Sum)
	case operator.AggMean:
		if err = one(RowMean, schema.SeriesMean, t.Mean); err == nil {
			nz = Noise{Mechanism: mechanisms(r)}
		}
	case operator.AggVariance:
		if err = one(RowVariance, schema.SeriesVariance, t.Variance); err == nil {
			nz = Noise{Mechanism: mechanisms(r)}
		}
	case operator.AggHistogram:
		var s *schema.Series
		if s, err = seriesNamed(r, schema.SeriesCounts, len(Categories)); err != nil {
			return nil, Noise{}, err
		}
		var sq float64
		for j := range Categories {
			if s.Labels[j] != Categories[j] {
				return nil, Noise{}, fmt.Errorf("%w: histogram cell %d is %q, want %q", ErrDpstream, j, s.Labels[j], Categories[j])
			}
			d := s.Value(j) - t.Hist[j]
			sq += d * d
		}
		e[RowHist] = sq / float64(len(Categories))
		nz = Noise{Mechanism: s.Mechanism, Scale: s.Scale}
	case operator.AggQuantiles:
		var s *schema.Series
		if s, err = seriesNamed(r, schema.SeriesQuantiles, len(Ranks)); err != nil {
			return nil, Noise{}, err
		}
		xs := make([]float64, len(Ranks))
		for j := range Ranks {
			xs[j] = s.Value(j)
		}
		quantileErrors(e, t, xs)
		nz = Noise{Mechanism: s.Mechanism, Scale: s.Scale}
	default:
		err = fmt.Errorf("%w: unexpected aggregate %q", ErrDpstream, r.Aggregate)
	}
	if err != nil {
		return nil, Noise{}, err
	}
	for row, v := range e {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, Noise{}, fmt.Errorf("%w: %s: error %v", ErrDpstream, row, v)
		}
	}
	return e, nz, nil
}

// mechanisms lists the mechanisms of r's noised (not derived) series.
func mechanisms(r *schema.Release) string {
	var names []string
	for _, s := range r.Series {
		if s.Scale != 0 && !slices.Contains(names, s.Mechanism) { // Scale 0: derived
			names = append(names, s.Mechanism)
		}
	}
	return strings.Join(names, "+")
}

// ExpectedRMSE returns the RMSE of one value with noise of mechanism mech
// and scale s (the density's scale parameter, as dpstream publishes it):
// √2·s for Laplace; √(2q)/(1−q), q = e^{−1/s}, for the discrete Laplace
// (P(k) ∝ q^|k|); s for the Gaussian; NaN for other mechanisms and for the
// discrete Gaussian (whose variance is below s², by a factor that is
// not closed-form).
func ExpectedRMSE(mech string, s float64) float64 {
	switch mech {
	case "laplace":
		return math.Sqrt2 * s
	case "discrete-laplace":
		q := math.Exp(-1 / s)
		return math.Sqrt(2*q) / (1 - q)
	case "gaussian":
		return s
	}
	return math.NaN()
}
