package main

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/differential-privacy/go/v3/noise"
)

// laplaceSquares returns n squared draws of Laplace noise with scale b.
func laplaceSquares(r *rand.Rand, n int, b float64) []float64 {
	sq := make([]float64, n)
	for i := range sq {
		x := b * r.ExpFloat64()
		if r.IntN(2) == 0 {
			x = -x
		}
		sq[i] = x * x
	}
	return sq
}

// laplaceRelSE is the relative standard error of the RMSE of n Laplace
// draws: ½·√(Var X²/n)/E X² with E X² = 2b², E X⁴ = 24b⁴, so √20/(4√n).
func laplaceRelSE(n int) float64 { return math.Sqrt(20) / (4 * math.Sqrt(float64(n))) }

// TestStatLaplace checks the harness's RMSE and its standard error on
// Laplace noise of a known scale: RMSE √2·b. The tolerance is 4 standard
// errors: with a random seed it would fail with probability about 6e-5
// (normal approximation); the seed is fixed, so the test is deterministic.
func TestStatLaplace(t *testing.T) {
	const n, b = 20000, 2.0
	st := NewStat(laplaceSquares(rand.New(rand.NewPCG(1, 2)), n, b))
	want := math.Sqrt2 * b
	se := laplaceRelSE(n)
	if st.Reps != n {
		t.Fatalf("Reps = %d, want %d", st.Reps, n)
	}
	if math.Abs(st.RMSE/want-1) > 4*se {
		t.Errorf("RMSE = %.4f, want %.4f ± %.2f%%", st.RMSE, want, 400*se)
	}
	// The estimated standard error is itself an estimate (of Var X², from
	// the eighth moment): within 10% of the exact one at n = 20000.
	if math.Abs(st.RMSERelSE/se-1) > 0.1 {
		t.Errorf("RMSERelSE = %.5f, want %.5f ± 10%%", st.RMSERelSE, se)
	}
}

// TestRatioLaplace checks the ratio of two RMSEs and its standard error on
// Laplace noise with scales 3 and 2: ratio 1.5, standard error
// 1.5·√2·laplaceRelSE(n). Tolerance 4 standard errors (false-failure rate
// about 6e-5 with a random seed; the seed is fixed).
func TestRatioLaplace(t *testing.T) {
	const n = 20000
	r := rand.New(rand.NewPCG(3, 4))
	a, b := NewStat(laplaceSquares(r, n, 3)), NewStat(laplaceSquares(r, n, 2))
	got, se := Ratio(a, b)
	wantSE := 1.5 * math.Sqrt2 * laplaceRelSE(n)
	if math.Abs(got-1.5) > 4*wantSE {
		t.Errorf("ratio = %.4f, want 1.5 ± %.4f", got, 4*wantSE)
	}
	if math.Abs(se/wantSE-1) > 0.1 {
		t.Errorf("ratio SE = %.5f, want %.5f ± 10%%", se, wantSE)
	}
	if got, _ := Ratio(a, Stat{}); !math.IsNaN(got) {
		t.Errorf("ratio over a zero RMSE = %v, want NaN", got)
	}
}

// TestQuantileAndRankError checks the exact quantile and the rank error on
// data small enough to count by hand.
func TestQuantileAndRankError(t *testing.T) {
	tr := Truth{Sorted: []float64{1, 2, 2, 3, 4, 5, 6, 7, 8, 9}} // N = 10
	for _, c := range []struct{ r, want float64 }{{0.5, 4}, {0.9, 8}, {0.99, 9}, {0.01, 1}} {
		if got := tr.Quantile(c.r); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.r, got, c.want)
		}
	}
	for _, c := range []struct{ r, x, want float64 }{
		{0.5, 4, 0},    // 4 values below 4, 5 at or below: rank 5 inside
		{0.5, 4.5, 0},  // 5 below, 5 at or below
		{0.5, 2, 2},    // 1 below, 3 at or below: 5 − 3
		{0.5, 8.5, 4},  // 9 below: 9 − 5
		{0.9, 100, 1},  // 10 below: 10 − 9
		{0.99, 0, 9.9}, // 0 at or below: 9.9 − 0
	} {
		if got := tr.RankError(c.r, c.x); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("RankError(%v, %v) = %v, want %v", c.r, c.x, got, c.want)
		}
	}
}

// TestGenerate checks that the data is a pure function of the setting and
// the seed, that no unit exceeds the bound, and the truth's count and sum.
func TestGenerate(t *testing.T) {
	s := Setting{Name: "T", Units: 300, MinEvents: 1, MaxEvents: 5, Epsilon: 1, Bound: 5}
	a, err := Generate(s, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(s, 7)
	c, _ := Generate(s, 8)
	if len(a.Events) != len(b.Events) || a.Truth.Sum != b.Truth.Sum {
		t.Error("the same seed gave different data")
	}
	if a.Truth.Sum == c.Truth.Sum {
		t.Error("another seed gave the same data")
	}
	per := map[int]int{}
	var sum float64
	for _, e := range a.Events {
		per[e.Unit]++
		sum += Clamp(e.Value)
	}
	for u, k := range per {
		if k < s.MinEvents || k > s.Bound {
			t.Fatalf("unit %d has %d events, want [%d, %d]", u, k, s.MinEvents, s.Bound)
		}
	}
	if len(per) != s.Units || a.Truth.Units != float64(s.Units) || a.Truth.Count != float64(len(a.Events)) {
		t.Errorf("units %d (truth %v), events %d (truth %v)", len(per), a.Truth.Units, len(a.Events), a.Truth.Count)
	}
	if math.Abs(sum-a.Truth.Sum) > 1e-9*sum {
		t.Errorf("truth sum %v, want %v", a.Truth.Sum, sum)
	}
}

// TestGoogleLaplaceCount checks the Google side on known mechanisms: with
// Laplace noise and ε = 1, the count of per-unit counts bounded by 1
// (dpagg's Count) gets Laplace noise of scale 1 and, bounded by 5
// (BoundedSumInt64), of scale 5, rounded to an integer: RMSE √(2b² + 1/12)
// to within the rounding's correlation with the noise (below 1%).
// Tolerance 4 standard errors (false-failure rate about 6e-5 for
// independent noise; Google's noise is not seedable, so this one is
// random) plus 1%.
func TestGoogleLaplaceCount(t *testing.T) {
	s := Setting{Name: "T", Units: 50, MinEvents: 1, MaxEvents: 1, Epsilon: 1, Bound: 1}
	d, err := Generate(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := aggregatePerUnit(d)
	const n = 4000
	for _, b := range []int64{1, 5} {
		sq := make([]float64, n)
		for i := range sq {
			c, err := unitSum(p.count, s.Epsilon, 0, 1, b, noise.Laplace())
			if err != nil {
				t.Fatal(err)
			}
			sq[i] = (c - d.Truth.Count) * (c - d.Truth.Count)
		}
		st := NewStat(sq)
		want := math.Sqrt(2*float64(b*b) + 1.0/12)
		if tol := 4*laplaceRelSE(n) + 0.01; math.Abs(st.RMSE/want-1) > tol {
			t.Errorf("bound %d: Google count RMSE = %.4f, want %.4f ± %.1f%%", b, st.RMSE, want, 100*tol)
		}
	}
}

// TestDpstreamCount runs dpstream's release path (fake broker, operator)
// on a small setting: the count of events, one per unit, ε = 1, δ = 0,
// gets discrete Laplace noise of scale 1 (P(k) ∝ e^{−|k|}), variance
// 2e^{−1}/(1−e^{−1})². Tolerance 4 standard errors of 100 windows (about
// 45%: it catches a wrong series, truth or scale, not a few percent;
// false-failure rate about 6e-5 for a random key, and the key is fixed).
// Skipped with -short (a few seconds).
func TestDpstreamCount(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the operator on a fake broker")
	}
	s := Setting{Name: "T", Units: 200, MinEvents: 1, MaxEvents: 1, Epsilon: 1, Bound: 1}
	d, err := Generate(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	rels, err := runDpstream(context.Background(), d, dpRun{aggregates: []string{"count"}}, n, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var sq []float64
	for _, r := range rels["count"] {
		e, nz, err := dpstreamErrors(&r, &d.Truth)
		if err != nil {
			t.Fatal(err)
		}
		// The scale is rounded towards more noise (DESIGN §2): 1 to 1e-9.
		if nz.Mechanism != "discrete-laplace" || math.Abs(nz.Scale-1) > 1e-9 {
			t.Fatalf("noise %+v, want discrete-laplace of scale 1", nz)
		}
		sq = append(sq, e[RowCount])
	}
	st := NewStat(sq)
	want := ExpectedRMSE("discrete-laplace", 1)
	if tol := 4 * laplaceRelSE(n); math.Abs(st.RMSE/want-1) > tol {
		t.Errorf("dpstream count RMSE = %.4f, want %.4f ± %.0f%%", st.RMSE, want, 100*tol)
	}
}

// TestConfigBound checks that the harness gives dpstream the settings'
// per-unit total bound (bounds.max_contributions = Setting.Bound, the
// neighbouring relation: a unit has at most Bound events in all) with
// -bound total, the default, and leaves it unset with -bound cell; both
// configurations validate.
func TestConfigBound(t *testing.T) {
	for _, s := range Settings {
		for _, c := range []struct {
			bound string
			want  int
		}{{BoundTotal, s.Bound}, {BoundCell, 0}} {
			cfg := dpstreamConfig(s, "histogram", dpRun{quantiles: "auto", bound: c.bound}, []string{"127.0.0.1:1"}, "in", "peers")
			if got := cfg.Bounds.MaxContributions; got != c.want {
				t.Errorf("%s -bound %s: bounds.max_contributions = %d, want %d", s.Name, c.bound, got, c.want)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("%s -bound %s: %v", s.Name, c.bound, err)
			}
		}
	}
	if _, err := run(context.Background(), options{settings: []string{"S1"}, dp: dpRun{bound: "cells"}}, io.Discard); err == nil {
		t.Error("run accepted -bound cells")
	}
}

// TestDpstreamHistogramBound checks the histogram's noise scale on
// dpstream's release path at S2's bounds and budget (at most 5 events per
// unit over 4 cells, ε = 0.5, δ = 0: discrete Laplace of scale L1/ε): 10
// under the total bound (L1 = 5), 40 under the per-cell bounds alone
// (L1 = 4 × 5). The scale is rounded towards more noise (DESIGN §2), so
// the tolerance is relative 1e-9. Skipped with -short (seconds).
func TestDpstreamHistogramBound(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the operator on a fake broker")
	}
	s := Settings[1]
	s.Units = 50
	d, err := Generate(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	for bound, want := range map[string]float64{BoundTotal: 10, BoundCell: 40} {
		rels, err := runDpstream(context.Background(), d, dpRun{aggregates: []string{"histogram"}, quantiles: "auto", bound: bound}, 2, 1, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rels["histogram"] {
			_, nz, err := dpstreamErrors(&r, &d.Truth)
			if err != nil {
				t.Fatal(err)
			}
			if nz.Mechanism != "discrete-laplace" || math.Abs(nz.Scale/want-1) > 1e-9 {
				t.Errorf("-bound %s: histogram noise %+v, want discrete-laplace of scale %g", bound, nz, want)
			}
		}
	}
}
