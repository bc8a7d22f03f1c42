package operator

import (
	"math"
	"slices"
	"testing"

	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// TestSelectPrivacyAudit is the streaming privacy audit (audit_test.go)
// of the quantiles' exponential mechanism: D and D' = D plus a unit with
// its 3 values at the upper bound run through the streaming path (decode
// → windows → Poll); in the first window and group whose leaf histograms
// differ, the whole window is released streamAuditTrials times per side
// under independent keys, and for every rank the lower confidence bound
// on the privacy loss of the released value over the events {Y ≤ t},
// {Y > t} and the bins between the leaf edges' midpoints must stay ≤ one
// selection's ε (1/scale). False-failure rate ≤ 3 × streamAuditAlpha =
// 3e-6 for a random key; deterministic with the fixed keys. (The exact
// audit of the mechanism over every neighbour of small histograms is
// privacy/quantile's TestExponentialPrivacyExact; this one checks the
// operator's path: the leaf counts, the bound V and the plan's scale.)
func TestSelectPrivacyAudit(t *testing.T) {
	t.Parallel() // computes alone; no shared state (docs/development.md)
	selectAudit(t, QuantileExponential)
}

// TestJointPrivacyAudit is TestSelectPrivacyAudit for the joint
// exponential mechanism: one selection per group at ε = 1/scale releases
// every rank, so each rank's value (post-processing of the tuple) has a
// privacy loss of at most that ε; same false-failure rate. (The exact
// audit is privacy/quantile's TestJointPrivacyExact and, under the total
// bound, TestJointPrivacyExactTotal.)
func TestJointPrivacyAudit(t *testing.T) {
	t.Parallel() // computes alone; no shared state (docs/development.md)
	selectAudit(t, QuantileJoint)
}

// selectAudit runs the streaming audit of TestSelectPrivacyAudit for the
// selection mechanism mech (exponential or joint): every rank's released
// value against the claim of one selection's ε.
func selectAudit(t *testing.T, mech string) {
	base := genStream(streamAuditSeed, streamAuditWindows, streamAuditUsers)
	c, o := quantileOperator(t, statsAuditConfig(AggQuantiles), mech)
	p := o.plan
	ap := &p.aggs[0]
	items := baseItems(base, c.Windows.AllowedLateness)
	d := runWindows(t, c, o, auditMessages(items))
	d1 := runWindows(t, c, o, auditMessages(append(slices.Clone(items), extremeUnit(streamAuditWindows)...)))
	var w0, w1 *windows.Window
	group := ""
	for i := range d.windows {
		a, b := &d.windows[i], windowAtRun(d1, d.windows[i].Start)
		if b == nil {
			t.Fatal("window released for D only")
		}
		ga, gb := p.groupsOf(a), p.groupsOf(b)
		for j := range ga {
			if !slices.Equal(ga[j].Leaves, gb[j].Leaves) && group == "" {
				w0, w1, group = a, b, ga[j].Key
			}
		}
	}
	if group == "" {
		t.Fatal("the extra unit changed no leaf histogram")
	}
	draw := func(w *windows.Window, side int) [][]float64 {
		ys := make([][]float64, len(ap.ranks))
		for i := range streamAuditTrials {
			out, _, _, err := p.releaseWindow(w, auditKey("select", side, i), "test", "audit", nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range out {
				if m.rel.Kind == schema.KindQuantiles && m.key == schema.ReleaseKey(releaseID("test", w.Start), ap.name, mustValues(group)...) {
					for k := range ap.ranks {
						ys[k] = append(ys[k], m.rel.Series[0].Floats[k])
					}
				}
			}
		}
		for k := range ys {
			slices.Sort(ys[k])
		}
		return ys
	}
	y0, y1 := draw(w0, 0), draw(w1, 1)
	edge, leaves := ap.selector.Edge, ap.selector.Leaves
	if mech == QuantileJoint {
		edge, leaves = ap.joint.Edge, ap.joint.Leaves
	}
	var th []float64
	for j := range leaves {
		th = append(th, (edge(j)+edge(j+1))/2)
	}
	claim := ap.noises[0].sens.Linf / ap.noises[0].scale
	for k, r := range ap.ranks {
		if len(y0[k]) != streamAuditTrials || len(y1[k]) != streamAuditTrials {
			t.Fatalf("rank %g: %d and %d releases of group %q", r, len(y0[k]), len(y1[k]), group)
		}
		eps, where, _ := streamLoss(y0[k], y1[k], th, 0, streamAuditAlpha)
		t.Logf("%s, rank %g (group %s, window %d): ε̂ = %.4f ≤ claim %.4f (event %s)", mech, r, group, w0.Start, eps, claim, where)
		if eps > claim || math.IsNaN(eps) {
			t.Errorf("rank %g: privacy loss lower bound %.4f exceeds one selection's ε %.4f", r, eps, claim)
		}
	}
}
