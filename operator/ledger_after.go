package operator

// ledger_after.go recalibrates the rest of a horizon after a configuration
// change. Every ledger record describes what its segment's configuration
// spends per window (spendLog: the mechanisms, shifts and scales of its
// parts, and group selection's share), so that a configuration taking over
// in the middle of a horizon can compose the earlier segments exactly with
// its own windows (privacy.CalibrateAfter: one PLD of the heterogeneous
// mechanisms for δ > 0, pure ε added up for δ = 0) and calibrate the
// windows left for what is left of the horizon's budget. A record without
// that description (written before it existed, or by a configuration with
// float noise, whose residual it does not carry) counts by its Spent
// alone, composed by basic composition.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/schema"
)

// spendLog is what a ledger record says about the spending of its horizon
// beyond the totals: the earlier segments (composed exactly by a
// successor) and the current one.
type spendLog struct {
	// Prior are earlier segments of the horizon, each with the number of
	// windows it was charged for.
	Prior []segmentSpend `json:"prior,omitempty"`
	// Current is what the current segment's configuration spends per
	// window (its Windows is unset: the record's SegStart to Through).
	Current segmentSpend `json:"current"`
	// Recalibrated: the current segment was calibrated for the budget
	// left after Prior and the record's Base (plan.recal), from SegStart.
	Recalibrated bool `json:"recalibrated,omitempty"`
}

// segmentSpend is one configuration's spending per window.
type segmentSpend struct {
	// Windows is the number of windows charged (prior segments only).
	Windows int `json:"windows,omitempty"`
	// Parts are the noised parts of a window with their scales.
	Parts []spendPart `json:"parts"`
	// SelDelta and SelShift are private group selection's δ and ε shift
	// per window (selectionBudget).
	SelDelta float64 `json:"sel_delta,omitempty"`
	SelShift float64 `json:"sel_shift,omitempty"`
	// Float: the parts include float noise, whose floating-point residual
	// the log does not carry; a successor counts the record's Spent.
	Float bool `json:"float,omitempty"`
	// Parallel: event-level parallel composition (every window spends the
	// whole total); a successor counts the record's Spent.
	Parallel bool `json:"parallel,omitempty"`
}

// spendPart is one calibrated part: the mechanism (privacy.Parse name),
// the coordinates a unit changes per window and by how much, the L1 and L2
// bounds of that change where the calibration used them (privacy.Part.L1,
// L2: a total bound, the quantile tree; absent in records written before
// they were logged, which a successor then composes as L0 coordinates at
// L∞ — valid, looser), and the per-coordinate scale the accountant
// composes.
type spendPart struct {
	Mechanism string  `json:"mechanism"`
	L0        int     `json:"l0"`
	Linf      float64 `json:"linf"`
	L1        float64 `json:"l1,omitempty"`
	L2        float64 `json:"l2,omitempty"`
	Scale     float64 `json:"scale"`
}

// recalSpec is a recalibration: the windows of the horizon [hs, he) from
// `from` on, after the earlier segments prior (composed exactly) and base
// (counted by basic composition), within claim.
type recalSpec struct {
	hs, he, from int64
	claim        schema.Budget
	base         schema.Budget
	prior        []segmentSpend
}

// segmentOf describes what plan p spends per window (its ledger's parts
// and scales, and group selection per window).
func segmentOf(p *plan, float bool) segmentSpend {
	l := p.ledger
	s := segmentSpend{SelDelta: l.pw, Float: float, Parallel: p.parallel}
	if l.shift > 0 {
		s.SelShift = math.Nextafter(l.shift/float64(l.windows), math.Inf(1))
	}
	for i, pt := range l.parts {
		s.Parts = append(s.Parts, spendPart{Mechanism: pt.Mechanism.Name(), L0: pt.L0, Linf: pt.Linf, L1: pt.L1, L2: pt.L2, Scale: l.scales[i]})
	}
	return s
}

// spentRuns turns segments into the accountant's runs of releases.
func spentRuns(segs []segmentSpend) ([]privacy.Spent, error) {
	var runs []privacy.Spent
	for _, s := range segs {
		r := privacy.Spent{Windows: s.Windows}
		for _, pt := range s.Parts {
			m, err := ledgerMechanism(pt.Mechanism)
			if err != nil {
				return nil, fmt.Errorf("%w: the ledger's earlier segment: %w", ErrState, err)
			}
			r.Parts = append(r.Parts, privacy.Part{Mechanism: m, L0: pt.L0, Linf: pt.Linf, L1: pt.L1, L2: pt.L2})
			r.Scales = append(r.Scales, pt.Scale)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// ledgerMechanism is the mechanism a spendPart names: a privacy.Parse
// name, or the quantiles' exponential selection (privacy.Selection, which
// is not a noise a configuration can name).
func ledgerMechanism(name string) (privacy.Mechanism, error) {
	if sel := (privacy.Selection{}); name == sel.Name() {
		return sel, nil
	}
	return privacy.Parse(name)
}

// selectionOf sums group selection's (ε shift, δ) over segs.
func selectionOf(segs []segmentSpend) schema.Budget {
	var b schema.Budget
	for _, s := range segs {
		w := float64(s.Windows)
		b.Epsilon += w * s.SelShift
		b.Delta += w * s.SelDelta
	}
	return b
}

// earlier returns what the record l says was spent in its horizon before
// the window starting at from, as segments to compose exactly and a base
// counted by basic composition: the record's log (with its current
// segment charged for the windows it published) when it has one and every
// segment is composable, else the record's Spent as the base.
func earlier(l *ledgerRecord) (schema.Budget, []segmentSpend) {
	if l.Log == nil {
		return l.Spent, nil
	}
	prior := append([]segmentSpend(nil), l.Log.Prior...)
	if l.Size > 0 && l.Through > l.SegStart {
		cur := l.Log.Current
		cur.Windows = int((l.Through - l.SegStart + l.Size - 1) / l.Size)
		prior = append(prior, cur)
	}
	for _, s := range prior {
		if s.Float || s.Parallel || len(s.Parts) == 0 {
			return l.Spent, nil
		}
	}
	return l.Base, prior
}

// recalOf returns the recalibration a recalibrated segment's record l was
// written under (nil if it was not).
func recalOf(l *ledgerRecord) *recalSpec {
	if l == nil || l.Log == nil || !l.Log.Recalibrated {
		return nil
	}
	return &recalSpec{hs: l.Start, he: l.End, from: l.SegStart, claim: l.Total, base: l.Base, prior: l.Log.Prior}
}

// id identifies the recalibration by its inputs; it extends the budget id of a
// recalibrated plan, so that two runs take one for the other only if they
// recalibrated the same windows after the same spending.
func (r *recalSpec) id() string {
	h := sha256.New()
	b, _ := json.Marshal(r.prior) // plain numbers and strings: never fails
	fmt.Fprintf(h, "dpstream/recal/v1|%d|%d|%d|%v|%v|%v|%v|%s", r.hs, r.he, r.from,
		r.claim.Epsilon, r.claim.Delta, r.base.Epsilon, r.base.Delta, b)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// windowsLeft is the number of windows of size ms from r.from to the
// horizon's end.
func (r *recalSpec) windowsLeft(size int64) int {
	return int((r.he - r.from + size - 1) / size)
}

// recalTarget returns the budget the parts of the windows left may take
// together with the prior segments' parts: the claim less the base, the
// prior segments' group selection and the windows left's (m windows of pw
// and shiftPer).
func (r *recalSpec) recalTarget(m int, pw, shiftPer float64) privacy.Budget {
	sel := selectionOf(r.prior)
	mf := float64(m)
	e := r.claim.Epsilon - r.base.Epsilon - sel.Epsilon - mf*shiftPer
	d := r.claim.Delta - r.base.Delta - sel.Delta - mf*pw
	// Rounded down, so that the parts never get more than is left.
	return privacy.Budget{Epsilon: math.Nextafter(e, math.Inf(-1)) * (1 - 4*0x1p-53), Delta: math.Max(d*(1-4*0x1p-53), 0)}
}

// recalibrate is the step of buildPlan for a recalibrated plan: the
// windows left in the horizon get one joint calibration that, composed
// with the prior segments by the plan's accountant, meets what the claim
// leaves (recalTarget). Float noise is refused: its residual is not
// composed here. It returns the calibrations and the parts' budget.
func (p *plan) recalibrate(r *recalSpec, noises []vectorNoise, pw, shiftPer float64) ([]privacy.Plan, privacy.Budget, error) {
	for i := range noises {
		if noises[i].float() {
			return nil, privacy.Budget{}, fmt.Errorf("%w: %s: float noise (%s) cannot be recalibrated for the rest of a horizon (its floating-point residual is not composed); use laplace or gaussian",
				privacy.ErrUnsupported, noises[i].part, noises[i].mech.Name())
		}
	}
	m := r.windowsLeft(p.size)
	target := r.recalTarget(m, pw, shiftPer)
	if !(target.Epsilon > 0) || target.Delta < 0 || (r.claim.Delta > 0 && !(target.Delta > 0)) {
		return nil, target, fmt.Errorf("%w: nothing is left for the windows' noise (ε %.4g, δ %.3g)", privacy.ErrInfeasible, target.Epsilon, target.Delta)
	}
	prior, err := spentRuns(r.prior)
	if err != nil {
		return nil, target, err
	}
	pparts := make([]privacy.Part, len(noises))
	for i := range noises {
		pparts[i] = noises[i].calPart()
	}
	plans, err := privacy.CalibrateAfter(p.accounting, target, prior, m, pparts)
	if err != nil {
		return nil, target, fmt.Errorf("operator: calibrating %d parts over the %d window(s) left after %d earlier segment(s) with %s accounting: %w",
			len(pparts), m, len(prior), p.accounting, err)
	}
	p.recal, p.compose = r, m
	p.total = privacy.Budget{Epsilon: r.claim.Epsilon, Delta: r.claim.Delta}
	p.horizonB = r.claim
	return plans, target, nil
}

// ledgerAfter is the part of a recalibrated plan's ledger that the plain
// one lacks: the earlier segments and the base, the accountant that
// certified the calibration, and the claim the last window reaches.
type ledgerAfter struct {
	prior []privacy.Spent
	sel   schema.Budget // the prior segments' group selection
	base  schema.Budget
	acct  privacy.Accounting
	claim schema.Budget
}

// spentAfter is ledger.spent for a recalibrated plan: the guarantee after
// the prior segments and k windows of this one (k on the ledger's grid,
// 1 ≤ k ≤ windows): the accountant's ε for their composition at the
// parts' δ (never above what the calibration certified), plus group
// selection's and the base's shares; after the last window exactly the
// claim (what the calibration certified).
func (l *ledger) spentAfter(k int) schema.Budget {
	a := l.after
	if k == l.windows {
		return a.claim
	}
	kf := float64(k)
	e := l.budget.Epsilon
	if acc, err := privacy.AccountantAfter(a.acct, a.prior, l.parts, l.scales, k); err == nil {
		if v := acc.Epsilon(l.budget.Delta); v <= e {
			e = v
		}
	}
	ps := l.shift / float64(l.windows)
	return schema.Budget{Epsilon: e + a.sel.Epsilon + ps*kf + a.base.Epsilon, Delta: l.budget.Delta + a.sel.Delta + kf*l.pw + a.base.Delta}
}

// recalNote is the start log's and the note's sentence on a recalibration.
func (p *plan) recalNote() string {
	r := p.recal
	var sc []string
	for i, pt := range p.ledger.parts {
		sc = append(sc, fmt.Sprintf("%s %.6g", pt.Mechanism.Name(), p.ledger.scales[i]))
	}
	return fmt.Sprintf("recalibrated after a configuration change: %d window(s) left in the horizon from %s, "+
		"after %d earlier segment(s) (composed) and ε=%.4g, δ=%.3g counted by basic composition, within ε=%g, δ=%g; scales %s",
		p.compose, tsString(r.from), len(r.prior), r.base.Epsilon, r.base.Delta, r.claim.Epsilon, r.claim.Delta, strings.Join(sc, ", "))
}
