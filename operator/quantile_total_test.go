package operator

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dpstream/dpstream/privacy/quantile"
	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/windows"
)

// TestQuantileExponentialTotal: under a binding total bound T
// (bounds.max_contributions < G·min(V, T)) and pure ε, the exponential
// mechanism's selections are composed by their L1 bound ⌈k·T/Vm⌉ (Vm =
// min(V, T); twice that replacing units) instead of L0 = k·G (see
// agg_quantile_total.go; privacy/quantile's TestExponentialPrivacyExactTotal
// checks the bound exactly), each selection's Δ taken at Vm. At the
// multi-group setting S2 of issue 20 (G = 5, V = T = 5, ε = 0.5, δ = 0,
// ranks 0.5, 0.9, 0.99) that is 3 selections instead of 15: scale 3/0.5
// = 6 instead of 15/0.5 = 30, and every rank's stated rank-error bound
// (2Δ·ln((L+1)/β)/ε', linear in the scale) 5× smaller. On the code before
// it the plan composes 15 selections, so this fails. With δ > 0 the PLD
// accountant composes the selections packed into 2·3 − 1 = 5 groups of at
// most one selection's ε (selectPacked; 15 on the code before it, and 15
// without the bound), and the pure accountant, valid under every δ, the 3
// selections of the L1 bound (privacy.Part.L1): scale 6 where the code
// before it planned 28.54 (PLD over 15 selections); a total bound that
// does not bind (T ≥ G·V) leaves the plan as without it. Exact: the
// scales are closed forms (privacy.Selection rounds up by an ulp;
// tolerance 1e-9 relative).
func TestQuantileExponentialTotal(t *testing.T) {
	conf := func(g, v, tb, units int, delta float64) Config {
		c := quantileConfig(v, 0.5, delta)
		c.Bounds.MaxGroups, c.Bounds.MaxContributions, c.Bounds.MaxUnits = g, tb, units
		return c
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*b }
	for _, tc := range []struct {
		name                string
		g, v, tb, units     int
		delta               float64
		coords, values      int
		scale               float64
		total, noteSpreaded bool
	}{
		{"S2: G=5 V=T=5", 5, 5, 5, 0, 0, 3, 5, 6, true, true},
		{"no total bound", 5, 5, 0, 0, 0, 15, 5, 30, false, false},
		{"T not binding", 5, 5, 25, 0, 0, 15, 5, 30, false, false},
		{"T=7: ⌈3·7/5⌉", 5, 5, 7, 0, 0, 5, 5, 10, true, true},
		{"T<V: Δ at T", 2, 5, 3, 0, 0, 3, 3, 6, true, true},
		{"replacing units", 5, 5, 5, 1000, 0, 6, 5, 12, true, true},
		{"δ>0: packed 2·3−1", 5, 5, 5, 0, 1e-6, 5, 5, 6, true, false},
		{"δ>0: T=7 packed 2·5−1", 5, 5, 7, 0, 1e-6, 9, 5, 10, true, false},
		{"δ>0: G=2 packed 5 of 6", 2, 5, 5, 0, 1e-6, 5, 5, 6, true, false},
	} {
		_, o := exponentialOperator(t, conf(tc.g, tc.v, tc.tb, tc.units, tc.delta))
		p := o.plan
		ap := &p.aggs[0]
		n := ap.noises[0]
		if n.coords != tc.coords || ap.selValues != int64(tc.values) || (tc.scale > 0 && !near(n.scale, tc.scale)) {
			t.Errorf("%s: %d selections, Δ for %d values, scale %v; want %d, %d, %v", tc.name, n.coords, ap.selValues, n.scale, tc.coords, tc.values, tc.scale)
		}
		s := p.seriesSensitivity(&n)
		if got := strings.Contains(s.L1Bound, "bounds.max_contributions"); got != tc.total {
			t.Errorf("%s: L1 %g by %q: total bound named %v, want %v", tc.name, s.L1, s.L1Bound, got, tc.total)
		}
		if got := strings.Contains(p.note, "by bounds.max_contributions at most"); got != tc.noteSpreaded {
			t.Errorf("%s: note %q: names the total bound's composition %v, want %v", tc.name, p.note, got, tc.noteSpreaded)
		}
	}
	// δ > 0: the note says the selections are packed; the scale is the
	// pure accountant's (checked above), below the unbounded plan's.
	_, od0 := exponentialOperator(t, conf(5, 5, 0, 0, 1e-6))
	_, od1 := exponentialOperator(t, conf(5, 5, 5, 0, 1e-6))
	s0, s1 := od0.plan.aggs[0].noises[0].scale, od1.plan.aggs[0].noises[0].scale
	if !(s1 < s0) || !strings.Contains(od1.plan.note, "they pack into 5 groups") {
		t.Errorf("δ>0: scale %v with the total bound, %v without; note %q", s1, s0, od1.plan.note)
	}
	t.Logf("δ = 1e-6: selection scale %v without the total bound (15 selections), %v with T = 5 (5 packed)", s0, s1)
	// The rank-error gain at S2: the same Δ (Vm = V = 5), a 5× smaller scale.
	_, o0 := exponentialOperator(t, conf(5, 5, 0, 0, 0))
	_, o1 := exponentialOperator(t, conf(5, 5, 5, 0, 0))
	e0, e1 := o0.plan.aggs[0].selError, o1.plan.aggs[0].selError
	for k := range e0 {
		if r := e0[k] / e1[k]; !near(r, 5) {
			t.Errorf("rank %g: rank-error bound %g without the total bound, %g with it: ratio %g, want 5", o0.plan.aggs[0].ranks[k], e0[k], e1[k], r)
		}
	}
	t.Logf("S2 rank-error bounds (β = plan level), ranks %v: without the total bound %v, with T = 5 %v", o0.plan.aggs[0].ranks, e0, e1)
}

// TestQuantileExponentialTotalRankError measures the rank error the total
// bound saves at setting S2 of issue 20 spread over groups (G = 5, V = T =
// 5, ε = 0.5, δ = 0): one group of N values uniform in [0, 100] — N = 600
// (1000 units of 1–5 values spread over 5 groups, about 3000/5 per group)
// and N = 3000 (all in one group) — (PCG seed 20, 21), 400 selections per
// rank from each plan's selector (fixed key), and the root mean square of
// |C(j) − q·N| (the released edge's rank error). The plan with T = 5 runs
// at a 5× smaller scale (its stated bound is 5× smaller,
// TestQuantileExponentialTotal); measured, the ratio is smaller where the
// plan without it saturates (its errors reach the ends of the N ranks),
// about 3 at N = 600. The test asserts a ratio above 2 for every rank and
// N (deterministic: fixed data and key; with a random key the RMSE of 400
// draws varies by about 10%, so the ratio 2 is several standard deviations
// below the measured ones) and logs the ratios.
func TestQuantileExponentialTotalRankError(t *testing.T) {
	conf := func(tb int) *plan {
		c := quantileConfig(5, 0.5, 0)
		c.Bounds.MaxGroups, c.Bounds.MaxContributions = 5, tb
		_, o := exponentialOperator(t, c)
		return o.plan
	}
	p0, p1 := conf(0), conf(5)
	for _, n := range []int{600, 3000} {
		leaves := uniformLeaves(rand.New(rand.NewPCG(20, 21)), n, p0.aggs[0].selector.Leaves)
		for _, q := range p0.aggs[0].ranks {
			e0, e1 := selectRMSE(t, p0, leaves, q), selectRMSE(t, p1, leaves, q)
			t.Logf("N = %d, rank %g: rank-error RMSE %.2f without the total bound, %.2f with T = 5: ratio %.2f", n, q, e0, e1, e0/e1)
			if e0 < 2*e1 {
				t.Errorf("N = %d, rank %g: RMSE %.2f without the total bound, %.2f with it: ratio %.2f, want > 2", n, q, e0, e1, e0/e1)
			}
		}
	}
}

// uniformLeaves returns the leaf histogram (of L leaves over [0, 100]) of
// n values uniform in [0, 100].
func uniformLeaves(r *rand.Rand, n, l int) []quantile.LeafCount {
	dense := map[uint32]int64{}
	for range n {
		dense[windows.LeafOf(100*r.Float64(), 0, 100, l)]++
	}
	var leaves []quantile.LeafCount
	for l, k := range dense {
		leaves = append(leaves, quantile.LeafCount{Leaf: l, Count: k})
	}
	slices.SortFunc(leaves, func(a, b quantile.LeafCount) int { return int(a.Leaf) - int(b.Leaf) })
	return leaves
}

// selectRMSE returns the root mean square rank error |C(j) − q·N| of 400
// selections of rank q by p's quantiles from leaves (fixed key).
func selectRMSE(t *testing.T, p *plan, leaves []quantile.LeafCount, q float64) float64 {
	t.Helper()
	ap := &p.aggs[0]
	below := func(j int) int64 {
		c := int64(0)
		for _, l := range leaves {
			if int(l.Leaf) < j {
				c += l.Count
			}
		}
		return c
	}
	n := float64(below(ap.selector.Leaves + 1))
	s := rng.NewStream(testKey(), "rank-error")
	sum := 0.0
	const draws = 400
	for range draws {
		j, err := ap.selector.Select(s, leaves, ap.selectOptions(q))
		if err != nil {
			t.Fatal(err)
		}
		d := float64(below(j)) - q*n
		sum += d * d
	}
	return math.Sqrt(sum / draws)
}

// TestSelectPackedDominated checks selectPacked's claim exactly on
// patterns: a unit's selections cost c_i·ε each (c_i ≤ 1, Σ c_i ≤ C), and
// the product of randomized responses at c_i·ε (each dominates its
// selection) must be dominated by 2⌈C⌉ − 1 randomized responses at ε: its
// hockey-stick divergence δ(ε′) = Σ_o max(0, P(o) − e^ε′·Q(o)), computed
// by enumerating all 2^n outcomes, is at most the packed one's at every
// ε′ of a grid (both orders of the pair are the same by symmetry). ε = 1
// and 0.3; patterns with pieces just over 1/2 (where packing needs the
// most groups), full pieces, and mixed ones. Tolerance 1e-12 (float64
// sums of at most 2^12 terms). It fails for ⌈C⌉ − 1 groups (checked:
// the pattern of ⌈C⌉ full pieces).
func TestSelectPackedDominated(t *testing.T) {
	rr := func(cs []float64, eps float64) (p, q []float64) {
		p, q = []float64{1}, []float64{1}
		for _, c := range cs {
			a := math.Exp(c*eps) / (1 + math.Exp(c*eps))
			var np, nq []float64
			for i := range p {
				np = append(np, p[i]*a, p[i]*(1-a))
				nq = append(nq, q[i]*(1-a), q[i]*a)
			}
			p, q = np, nq
		}
		return p, q
	}
	hs := func(p, q []float64, e float64) float64 {
		d := 0.0
		for i := range p {
			d += math.Max(0, p[i]-math.Exp(e)*q[i])
		}
		return d
	}
	ones := func(n int) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = 1
		}
		return s
	}
	for _, eps := range []float64{1, 0.3} {
		for _, tc := range []struct {
			c      float64
			pieces []float64
		}{
			{1, []float64{0.5, 0.5}}, {1, []float64{0.2, 0.2, 0.2, 0.2, 0.2}}, {2, []float64{0.51, 0.51, 0.49, 0.49}},
			{3, []float64{0.6, 0.6, 0.6, 0.6, 0.6}}, {3, []float64{0.51, 0.51, 0.51, 0.51, 0.51}}, {3, ones(3)},
			{3, []float64{1, 0.5, 0.5, 0.5, 0.5}}, {5, []float64{0.55, 0.55, 0.55, 0.55, 0.55, 0.55, 0.55, 0.55, 0.55}},
			{2, []float64{0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25}},
		} {
			p, q := rr(tc.pieces, eps)
			k := int(selectPacked(tc.c, math.Inf(1)))
			pp, qp := rr(ones(k), eps)
			worst := math.Inf(-1)
			for e := 0.0; e <= tc.c*eps; e += tc.c * eps / 64 {
				got, bound := hs(p, q, e), hs(pp, qp, e)
				worst = math.Max(worst, got-bound)
				if got > bound+1e-12 {
					t.Errorf("ε %g, pieces %v: δ(%g) = %.6g above %d packed groups' %.6g", eps, tc.pieces, e, got, k, bound)
				}
			}
			t.Logf("ε %g, C %g, pieces %v: %d groups, largest δ(ε′) − bound %.3g", eps, tc.c, tc.pieces, k, worst)
		}
	}
}
