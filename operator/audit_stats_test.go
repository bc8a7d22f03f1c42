package operator

// The empirical privacy audit (audit_test.go) extended to the aggregates
// of issue 11: units, variance (its count, centred sum and centred sum of
// squares) and the quantile tree's nodes. Each is run on the streaming
// path (decode → windows → Poll) for D and D' = D plus one extra unit,
// with the same exact check (at most L0 coordinates of each part change,
// each by at most L∞, none goes down) and the same statistical check on
// the released coordinate the unit moves most (relative to its L∞),
// released streamAuditTrials times per side under independent noise keys.
//
// The claim a single coordinate is audited against is that coordinate's
// own privacy loss under the plan: with ε = 1, δ = 0 (laplace: discrete
// Laplace on integers, exact rounded Laplace on real values), a
// coordinate with noise scale b whose value moves by at most s (L∞, plus
// one grid step for real values) has privacy loss exactly s/b, and the
// joint calibration gives each of the window's parts a share of ε. The
// audit asserts ε̂ ≤ s/b; noise calibrated for ε = 2 (half the scales)
// audited against the ε = 1 claim must give ε̂ above it.
//
// The released quantiles are post-processing of the noised tree: their
// loss is at most the tree's. The audit therefore audits the tree's noised
// nodes, drawn from the release's own noise stream by the function the
// release computes its quantiles from (quantileNodes), so that the
// windows' leaf counts, the tree's sensitivity and its calibration are
// what is tested. (A quantile value alone is too coarse a statistic to
// show a halved noise.)

import (
	"math"
	"slices"
	"testing"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// statsAuditConfig is the audit config for one new aggregate: ε = 1,
// δ = 0, max_values 3; for quantiles a one-level tree of 8 leaves (every
// node a leaf: a unit's 3 values move at most 3 nodes by at most 3).
func statsAuditConfig(agg string) Config {
	c := streamAuditConfig(agg)
	c.Windows.QuantileBranching, c.Windows.QuantileDepth = 8, 1
	return c
}

// extremeUnit is ordinaryUnit with every value at the upper bound, so that
// it moves every value-based coordinate by its full L∞ (the centred sum
// by 3·5, the centred sum of squares by 3·25, one leaf by 3).
func extremeUnit(nWindows int) []auditItem {
	out := ordinaryUnit(nWindows)
	for i := range out {
		out[i].e.value = testUpper
	}
	return out
}

// statsCoord is one audited coordinate: a window, a group, a part of the
// aggregate (index into aggPlan.noises) and a cell of it.
type statsCoord struct {
	start int64
	group string
	part  int
	cell  int
}

// statsValues returns the true value of every coordinate of the audited
// aggregate in w, in release order.
func statsValues(p *plan, w *windows.Window) ([]statsCoord, []float64) {
	ap := &p.aggs[0]
	var cs []statsCoord
	var vs []float64
	for _, g := range p.groupsOf(w) {
		switch ap.kind {
		case schema.KindUnits:
			cs, vs = append(cs, statsCoord{w.Start, g.Key, 0, 0}), append(vs, float64(g.Units))
		case schema.KindVariance:
			for i, v := range []float64{float64(g.Values), g.CentredSum, g.CentredSqSum} {
				cs, vs = append(cs, statsCoord{w.Start, g.Key, i, 0}), append(vs, v)
			}
		case schema.KindQuantiles:
			nodes, _ := treeNodes(ap, &g)
			for i, v := range nodes {
				cs, vs = append(cs, statsCoord{w.Start, g.Key, 0, i}), append(vs, v)
			}
		}
	}
	return cs, vs
}

// statsDiff is the exact check: it returns the coordinate of the given
// part the unit moves most relative to its L∞, its two true values, and
// the violations in any part.
func statsDiff(p *plan, r0, r1 auditRun, part int) (worst statsCoord, v0, v1 float64, problems []string) {
	ap := &p.aggs[0]
	best := -1.0
	for i := range r0.windows {
		w0 := &r0.windows[i]
		w1 := windowAtRun(r1, w0.Start)
		if w1 == nil {
			problems = append(problems, "window released for D only")
			continue
		}
		cs, a := statsValues(p, w0)
		cs1, b := statsValues(p, w1)
		if !slices.Equal(cs, cs1) {
			problems = append(problems, "different coordinates")
			continue
		}
		changed := make([]int, len(ap.noises))
		for j := range cs {
			n := &ap.noises[cs[j].part]
			d := b[j] - a[j]
			if d != 0 {
				changed[cs[j].part]++
			}
			// Real values move by at most L∞ plus the rounding of the
			// exact sums, within one grid step (vectorNoise.shift).
			if math.Abs(d) > n.shift() || (ap.kind != schema.KindVariance || cs[j].part != 1) && d < 0 {
				problems = append(problems, "a coordinate moved by more than L∞, or down")
			}
			if rel := math.Abs(d) / n.sens.Linf; rel > best && cs[j].part == part {
				best, worst, v0, v1 = rel, cs[j], a[j], b[j]
			}
		}
		for k, n := range changed {
			if float64(n) > ap.noises[k].sens.L0 {
				problems = append(problems, "more than L0 coordinates changed")
			}
		}
	}
	return worst, v0, v1, problems
}

func windowAtRun(r auditRun, start int64) *windows.Window {
	for i := range r.windows {
		if r.windows[i].Start == start {
			return &r.windows[i]
		}
	}
	return nil
}

// statsRelease returns coordinate c of one release of w under key.
func statsRelease(t *testing.T, p *plan, w *windows.Window, c statsCoord, key rng.Key) float64 {
	t.Helper()
	ap := &p.aggs[0]
	k := schema.ReleaseKey(releaseID("test", c.start), ap.name, mustValues(c.group)...)
	if ap.kind == schema.KindQuantiles {
		for gi := range p.groupsOf(w) {
			g := p.groupsOf(w)[gi]
			if g.Key == c.group {
				nodes, err := quantileNodes(ap, &g, rng.NewStream(key, noiseID(p.digest, k)))
				if err != nil {
					t.Fatal(err)
				}
				return nodes[c.cell]
			}
		}
		t.Fatal("group missing")
	}
	out, _, _, err := p.releaseWindow(w, key, "test", "audit", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range out {
		if m.key == k {
			return m.rel.Series[c.part].Value(0)
		}
	}
	t.Fatalf("release %q missing", k)
	return 0
}

// statsAudit releases coordinate c of w0 and w1 n times each under the
// noise of plan p and returns the largest privacy-loss lower bound over
// threshold events around the true values (thresholds never on the
// output grid), with the audited coordinate's noise.
func statsAudit(t *testing.T, p *plan, w0, w1 *windows.Window, c statsCoord, v0, v1 float64, n int, tag string) (float64, string) {
	t.Helper()
	draw := func(w *windows.Window, side int) []float64 {
		ys := make([]float64, n)
		for i := range ys {
			ys[i] = statsRelease(t, p, w, c, auditKey(tag, side, i))
		}
		slices.Sort(ys)
		return ys
	}
	y0, y1 := draw(w0, 0), draw(w1, 1)
	nz := &p.aggs[0].noises[c.part]
	spacing := math.Max(nz.step, nz.scale/6)
	reach := 6 * nz.scale
	var th []float64
	for v := math.Min(v0, v1) - reach + nz.step/2; v <= math.Max(v0, v1)+reach; v += spacing {
		th = append(th, v)
	}
	eps, where, _ := streamLoss(y0, y1, th, 0, streamAuditAlpha)
	return eps, where
}

// coordClaim is the privacy loss of one coordinate of part k: its largest
// shift over its noise scale (exact for discrete and rounded Laplace).
func coordClaim(p *plan, c statsCoord) float64 {
	n := &p.aggs[0].noises[c.part]
	return n.shift() / n.scale
}

// TestStatsPrivacyAudit runs the audit for units, variance and the
// quantile tree with an extra unit at the upper bound: the exact check
// finds no violation and ε̂ stays ≤ the audited coordinate's claim.
// False-failure rate ≤ streamAuditAlpha = 1e-6 per aggregate for a random
// key; deterministic with the fixed keys.
func TestStatsPrivacyAudit(t *testing.T) {
	t.Parallel() // computes alone; no shared state (docs/development.md)
	base := genStream(streamAuditSeed, streamAuditWindows, streamAuditUsers)
	for _, agg := range []string{AggUnits, AggVariance, AggQuantiles} {
		t.Run(agg, func(t *testing.T) {
			c := statsAuditConfig(agg)
			o, err := New(c, WithKey(testKey()))
			if err != nil {
				t.Fatal(err)
			}
			p := o.plan
			items := baseItems(base, c.Windows.AllowedLateness)
			d := runWindows(t, c, o, auditMessages(items))
			d1 := runWindows(t, c, o, auditMessages(append(slices.Clone(items), extremeUnit(streamAuditWindows)...)))
			for part := range p.aggs[0].noises {
				worst, v0, v1, problems := statsDiff(p, d, d1, part)
				for _, pr := range problems {
					t.Errorf("sensitivity violated: %s", pr)
				}
				nz := &p.aggs[0].noises[worst.part]
				if math.Abs(math.Abs(v1-v0)-nz.sens.Linf) > nz.step/2 {
					t.Fatalf("the unit moves %s by %g, not its L∞ %g", nz.part, v1-v0, nz.sens.Linf)
				}
				claim := coordClaim(p, worst)
				eps, where := statsAudit(t, p, windowAtRun(d, worst.start), windowAtRun(d1, worst.start), worst, v0, v1, streamAuditTrials, "stats/"+agg)
				t.Logf("%s (%s, scale %.4g): true %g → %g; ε̂ = %.4f ≤ claim %.4f (window ε = %g; event %s)", nz.part, nz.mech.Name(), nz.scale, v0, v1, eps, claim, p.window.Epsilon, where)
				if eps > claim {
					t.Errorf("privacy loss lower bound %.4f exceeds the coordinate's claim %.4f", eps, claim)
				}
			}
		})
	}
}

// TestStatsAuditCatchesHalfScale: the same coordinates released with noise
// calibrated for ε = 2 (half the scales) give ε̂ above the ε = 1 claim, for
// each new aggregate. Deterministic (fixed stream and keys).
func TestStatsAuditCatchesHalfScale(t *testing.T) {
	t.Parallel() // computes alone; no shared state (docs/development.md)
	base := genStream(streamAuditSeed, streamAuditWindows, streamAuditUsers)
	for _, agg := range []string{AggUnits, AggVariance, AggQuantiles} {
		t.Run(agg, func(t *testing.T) {
			c := statsAuditConfig(agg)
			o, o2 := halfScaleOperators(t, c)
			items := baseItems(base, c.Windows.AllowedLateness)
			d := runWindows(t, c, o, auditMessages(items))
			d1 := runWindows(t, c, o, auditMessages(append(slices.Clone(items), extremeUnit(streamAuditWindows)...)))
			for part := range o.plan.aggs[0].noises {
				worst, v0, v1, problems := statsDiff(o.plan, d, d1, part)
				if len(problems) != 0 {
					t.Fatalf("sensitivity violated: %v", problems)
				}
				n1, n2 := &o.plan.aggs[0].noises[worst.part], &o2.plan.aggs[0].noises[worst.part]
				if n2.scale > n1.scale/2*(1+1e-6) {
					t.Fatalf("%s: scale at ε = 2 is %g, not half of %g", n1.part, n2.scale, n1.scale)
				}
				claim := coordClaim(o.plan, worst)
				eps, where := statsAudit(t, o2.plan, windowAtRun(d, worst.start), windowAtRun(d1, worst.start), worst, v0, v1, streamAuditTrials, "stats-half/"+agg)
				t.Logf("%s half scale: true %g → %g; ε̂ = %.4f vs claim %.4f (true loss ≈ %.4f; event %s)", n1.part, v0, v1, eps, claim, coordClaim(o2.plan, worst), where)
				if eps <= claim {
					t.Errorf("the audit does not detect half the calibrated scale: ε̂ = %.4f ≤ %.4f", eps, claim)
				}
			}
		})
	}
}
