package operator

// ledger.go keeps the horizon's budget ledger in the state topic. The plan
// calibrates one configuration for a whole horizon; the ledger remembers
// what was actually spent, so that a configuration changed in the middle
// of a horizon (another ε, window size, bounds, mechanism) cannot spend
// more than the total: the spend of the earlier configuration is carried
// as a base, the new one is charged only for the windows left, and the
// two add up by basic composition (valid for any two mechanisms). The
// ledger type below is the plan's own account: what one configuration has
// spent after k windows of a horizon.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/schema"
)

// ledgerRecord is the persisted ledger of the horizon of the last
// published window.
type ledgerRecord struct {
	// Start and End bound the horizon [Start, End), Unix ms; for a
	// per-window budget they are the last window's bounds.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Size is the window size (ms) of the configuration that wrote it.
	Size int64 `json:"size"`
	// PerWindow: the configuration had a per-window budget (no horizon);
	// Total is then that per-window budget.
	PerWindow bool `json:"per_window,omitempty"`
	// Total is the budget claimed for the horizon.
	Total schema.Budget `json:"total"`
	// Base is what earlier configurations spent in this horizon.
	Base schema.Budget `json:"base"`
	// Budget identifies the spending of the current segment's
	// configuration (plan.budgetID): configurations that spend the same per
	// window over the same horizon continue one segment.
	Budget string `json:"budget"`
	// SegStart is the first window of the current segment: the window
	// count the plan's ledger charges runs from here.
	SegStart int64 `json:"seg_start"`
	// Through is the end of the last window accounted for.
	Through int64 `json:"through"`
	// Spent is Base plus the current segment through Through.
	Spent schema.Budget `json:"spent"`
	// Log describes what every segment of the horizon spends per window,
	// so that a configuration taking over can compose it exactly
	// (ledger_after.go). Records written before it existed have none.
	Log *spendLog `json:"log,omitempty"`
}

// horizonOf returns the horizon [start, end) holding the window starting
// at s (the plan must have a horizon).
func (p *plan) horizonOf(s int64) (int64, int64) {
	h := p.horizon.Milliseconds()
	hs := p.offset + floorDiv(s-p.offset, h)*h
	return hs, hs + h
}

// current reports whether l is the ledger of this configuration's segment
// of the horizon [hs, he).
func (p *plan) current(l *ledgerRecord, hs, he int64) bool {
	return l != nil && !l.PerWindow && l.Start == hs && l.End == he && l.Budget == p.budgetID()
}

// spentAt returns the budget spent in the horizon through the window
// starting at s, given the ledger l of the windows before it (nil: none in
// this horizon), and the horizon (zero without a horizon budget). The
// current configuration's windows are counted from the horizon's start,
// or from where it took over within the horizon (every window slot counts,
// whether or not it had events), and an earlier configuration's spend is
// added.
func (p *plan) spentAt(l *ledgerRecord, s int64) (schema.Budget, schema.Horizon) {
	if p.horizon == 0 {
		return p.window, schema.Horizon{}
	}
	hs, he := p.horizonOf(s)
	if r := p.recal; r != nil && r.hs == hs {
		// The ledger of a recalibrated plan holds the earlier spending.
		return p.ledger.spent(int((s-r.from)/p.size + 1)), schema.Horizon{Start: hs, End: he, Budget: p.horizonB}
	}
	base, seg := schema.Budget{}, hs
	if p.current(l, hs, he) {
		base, seg = l.Base, max(hs, l.SegStart)
	}
	b := p.ledger.spent(int((s-seg)/p.size + 1))
	b.Epsilon += base.Epsilon
	b.Delta += base.Delta
	return b, schema.Horizon{Start: hs, End: he, Budget: p.horizonB}
}

// advance returns the ledger after the window [s, e) is published.
func (p *plan) advance(l *ledgerRecord, s, e int64) *ledgerRecord {
	if p.horizon == 0 {
		return &ledgerRecord{Start: s, End: e, Size: p.size, PerWindow: true, Total: p.window,
			Budget: p.budgetID(), SegStart: s, Through: e, Spent: p.window}
	}
	hs, he := p.horizonOf(s)
	n := ledgerRecord{Start: hs, End: he, Size: p.size, Total: p.totalBudget(), Budget: p.budgetID(), SegStart: hs, Through: e, Log: p.log}
	switch {
	case p.recal != nil && p.recal.hs == hs:
		n.Base, n.SegStart = p.recal.base, p.recal.from
	case p.current(l, hs, he):
		n.Base, n.SegStart = l.Base, l.SegStart
	case l != nil && !l.PerWindow && l.Start == hs && l.End == he:
		// Another configuration's segment that reconcile did not take
		// over (never on the operator's path): charge it in full.
		n.Base, n.SegStart = l.Spent, s
	}
	n.Spent, _ = p.spentAt(&n, s)
	return &n
}

// budgetID identifies what the plan spends: the horizon and its windows,
// the total, and every calibrated part with its scale (the inputs of the
// plan's ledger). Two configurations with equal budgetIDs spend the same on
// every window, so one can take over from the other in the middle of a
// horizon without a new segment (a changed max_skew, namespace or category
// order changes the release digest, not the spending).
func (p *plan) budgetID() string {
	h := sha256.New()
	l := p.ledger
	fmt.Fprintf(h, "dpstream/budget/v1|%d|%d|%d|%d|%v|%v|%v|%v|%v|%v",
		p.horizon.Milliseconds(), p.size, p.offset, p.windows, p.total.Epsilon, p.total.Delta,
		l.budget.Epsilon, l.budget.Delta, l.pw, l.shift)
	for i, pt := range l.parts {
		fmt.Fprintf(h, "|%s,%d,%v,%v", pt.Mechanism.Name(), pt.L0, pt.Linf, l.scales[i])
	}
	if p.parallel {
		h.Write([]byte("|parallel")) // every window spends the total: never one segment with a sequential plan
	}
	if p.recal != nil {
		fmt.Fprintf(h, "|recal|%s", p.recal.id())
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// totalBudget is the plan's total as a schema.Budget.
func (p *plan) totalBudget() schema.Budget {
	return schema.Budget{Epsilon: p.total.Epsilon, Delta: p.total.Delta}
}

// reconcile checks the ledger l recorded by earlier runs against this
// configuration, for releases from the window starting at from on, and
// returns the ledger to continue with. With the same configuration nothing
// changes. With another one in the same horizon, the windows left are
// recalibrated for what the earlier configurations left of the horizon's
// total (the smaller of the old and the new total; takeOver): the
// recalibrated plan releases them (p.at). The start is refused (ErrState)
// if even they cannot fit, or if the horizon itself moved (another horizon
// length or offset).
func (p *plan) reconcile(l *ledgerRecord, from int64) (*ledgerRecord, error) {
	if l == nil || l.Budget == p.budgetID() {
		return l, nil
	}
	if l.PerWindow {
		if p.horizon == 0 {
			return nil, nil // every window is its own claim
		}
		// The earlier configuration spent its per-window budget on every
		// window it published in this horizon.
		hs, he := p.horizonOf(from)
		var base schema.Budget
		if upto := min(l.Through, from); upto > hs && l.Size > 0 {
			k := float64((upto - hs + l.Size - 1) / l.Size)
			base = schema.Budget{Epsilon: k * l.Total.Epsilon, Delta: k * l.Total.Delta}
		}
		return p.takeOver(base, base, nil, hs, he, from, p.totalBudget())
	}
	if from >= l.End {
		return nil, nil // the earlier horizon is over
	}
	if p.horizon == 0 {
		// A per-window budget inside the earlier horizon: every window
		// left in it spends the per-window budget.
		m := float64((l.End - from + p.size - 1) / p.size)
		need := schema.Budget{Epsilon: l.Spent.Epsilon + m*p.window.Epsilon, Delta: l.Spent.Delta + m*p.window.Delta}
		if over(need, l.Total) {
			return nil, p.refusal(l, need, l.Total, int(m))
		}
		return nil, nil
	}
	hs, he := p.horizonOf(from)
	if hs != l.Start || he != l.End {
		next := p.firstHorizonFrom(l.End)
		return nil, fmt.Errorf("%w: the accounting horizon changed (from %s–%s to %s–%s) before the earlier one ended; "+
			"keep privacy.horizon and windows.offset until %s, or set windows.start to %s so that the new horizons start after the old one",
			ErrState, tsString(l.Start), tsString(l.End), tsString(hs), tsString(he), tsString(l.End), tsString(next))
	}
	if r := recalOf(l); r != nil && !over(r.claim, p.totalBudget()) {
		// This configuration restarting in a horizon it recalibrated (or
		// one that spends exactly as the recalibration did, within a total
		// that covers the claim).
		if q, err := p.recalibrated(r); err == nil && q.budgetID() == l.Budget {
			p.after.Store(q)
			return l, nil
		}
	}
	claim := l.Total
	if t := p.totalBudget(); t.Epsilon < claim.Epsilon || t.Delta < claim.Delta {
		claim = schema.Budget{Epsilon: min(t.Epsilon, claim.Epsilon), Delta: min(t.Delta, claim.Delta)}
	}
	base, prior := earlier(l)
	return p.takeOver(l.Spent, base, prior, hs, he, from, claim)
}

// takeOver starts this configuration in the horizon [hs, he) at from,
// after earlier configurations spent `spent` (as the ledger reported it):
// the windows left are recalibrated for what is left of claim after the
// segments prior (composed exactly) and base (basic composition), and
// the start is refused if they cannot be. A parallel-composition plan, and
// a configuration the recalibration does not cover (float noise, an
// accountant that cannot compose: privacy.ErrUnsupported), keep their own
// calibration and start only if it fits on top of spent (segment).
func (p *plan) takeOver(spent, base schema.Budget, prior []segmentSpend, hs, he, from int64, claim schema.Budget) (*ledgerRecord, error) {
	if p.parallel {
		return p.segment(spent, hs, he, from, claim)
	}
	r := &recalSpec{hs: hs, he: he, from: from, claim: claim, base: base, prior: prior}
	q, err := p.recalibrated(r)
	if errors.Is(err, privacy.ErrUnsupported) {
		return p.segment(spent, hs, he, from, claim)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the configuration changed in the middle of the horizon %s–%s, which already spent ε=%.4g, δ=%.3g "+
			"of its total ε=%g, δ=%g under the earlier configuration; the %d windows left cannot be calibrated within what is left: %w. "+
			"Keep the earlier configuration until %s, set windows.start to %s (no releases before it), or lower the new configuration's spend",
			ErrState, tsString(hs), tsString(he), spent.Epsilon, spent.Delta, claim.Epsilon, claim.Delta, r.windowsLeft(p.size), err,
			tsString(he), tsString(p.firstHorizonFrom(he)))
	}
	p.after.Store(q)
	return &ledgerRecord{Start: hs, End: he, Size: p.size, Total: claim, Base: base, Budget: q.budgetID(),
		SegStart: from, Through: from, Spent: spent, Log: q.log}, nil
}

// recalibrated returns this configuration's plan recalibrated by r (the
// one already installed if it has the same inputs); the caller installs
// it (p.after) once it is the plan of r's windows. A parallel-composition
// plan is not recalibrated (privacy.ErrUnsupported).
func (p *plan) recalibrated(r *recalSpec) (*plan, error) {
	if q := p.after.Load(); q != nil && q.recal.id() == r.id() {
		return q, nil
	}
	if p.build == nil || p.parallel {
		return nil, fmt.Errorf("%w: the plan cannot be recalibrated", privacy.ErrUnsupported)
	}
	q, err := p.build(r)
	if err != nil {
		return nil, err
	}
	q.digest = p.digest
	q.stream = p.digest + "/recal/" + q.budgetID()
	return q, nil
}

// segment starts this configuration's segment at from in the horizon
// [hs, he) on top of base, refusing it if it could overspend claim.
func (p *plan) segment(base schema.Budget, hs, he, from int64, claim schema.Budget) (*ledgerRecord, error) {
	m := int((he - from + p.size - 1) / p.size)
	seg := p.ledger.spent(m)
	need := schema.Budget{Epsilon: base.Epsilon + seg.Epsilon, Delta: base.Delta + seg.Delta}
	l := &ledgerRecord{Start: hs, End: he, Size: p.size, Total: p.totalBudget(), Base: base, Budget: p.budgetID(),
		SegStart: from, Through: from, Spent: base}
	if over(need, claim) {
		return nil, p.refusal(l, need, claim, m)
	}
	return l, nil
}

// overSlack is the relative slack of over: 8 ulps (8·2⁻⁵² ≈ 1.8e-15).
// Every spend the ledger adds is already an upper bound rounded up (pure ε
// by an ulp, the accountants' ε by their own certified margins), and the
// float sum of two of them can exceed the total by a few ulps when the true
// sum meets it exactly — the common case of a pure-ε change that keeps the
// total. The slack is the one place where a spend may be accepted above
// its total, by at most this relative amount.
const overSlack = 8 * 0x1p-52

// over reports whether b exceeds the claim c (beyond float rounding).
func over(b, c schema.Budget) bool {
	return b.Epsilon > c.Epsilon*(1+overSlack) || b.Delta > c.Delta*(1+overSlack)
}

// refusal is the error for a configuration change that could overspend.
func (p *plan) refusal(l *ledgerRecord, need, claim schema.Budget, m int) error {
	return fmt.Errorf("%w: the configuration changed in the middle of the horizon %s–%s, which already spent ε=%.4g, δ=%.3g "+
		"under the earlier configuration; with the new one the %d windows left would bring it to ε=%.4g, δ=%.3g, above the total ε=%g, δ=%g. "+
		"Keep the earlier configuration until %s, set windows.start to %s (no releases before it), or lower the new configuration's spend",
		ErrState, tsString(l.Start), tsString(l.End), l.Spent.Epsilon, l.Spent.Delta, m, need.Epsilon, need.Delta,
		claim.Epsilon, claim.Delta, tsString(l.End), tsString(p.firstHorizonFrom(l.End)))
}

// firstHorizonFrom returns the first window start at or after t that is
// also a horizon start of this configuration (t itself aligned up to a
// window without a horizon).
func (p *plan) firstHorizonFrom(t int64) int64 {
	step := p.size
	if p.horizon > 0 {
		step = p.horizon.Milliseconds()
	}
	s := p.offset + floorDiv(t-p.offset, step)*step
	if s < t {
		s += step
	}
	return s
}

// alignUp returns the first window start at or after t.
func (p *plan) alignUp(t int64) int64 {
	s := p.offset + floorDiv(t-p.offset, p.size)*p.size
	if s < t {
		s += p.size
	}
	return s
}

// windowAfter returns the first window that starts after now, the origin
// of a deployment started at now without windows.start.
func (p *plan) windowAfter(now time.Time) int64 {
	return p.alignUp(now.UnixMilli() + 1)
}

// ledger reports the budget spent after k windows of a horizon: the
// tightest accountant's ε for the k-fold composition of the window's parts
// at the parts' δ, plus the floating-point residual of k windows of float
// noise, plus group selection's share. Results are cached per k.
type ledger struct {
	parts   []privacy.Part
	scales  []float64
	windows int
	budget  privacy.Budget // what the parts are calibrated for over all windows
	pw      float64        // group selection δ per window
	shift   float64        // group selection ε over all windows
	horizon bool
	total   privacy.Budget
	// float is the floating-point residual reserved for one window (N =
	// L0 of each float part; k windows: k·N), added by
	// privacy.FloatGuarantee. Empty without float noise.
	float []privacy.FloatTerm
	// after is set for a recalibrated plan (ledger_after.go): the
	// earlier segments its windows compose with.
	after *ledgerAfter

	mu    sync.Mutex
	cache map[int]schema.Budget
}

func newLedger(parts []privacy.Part, scales []float64, windows int, budget privacy.Budget, pw, shift float64, horizon bool, total privacy.Budget) *ledger {
	return &ledger{parts: parts, scales: scales, windows: windows, budget: budget, pw: pw, shift: shift,
		horizon: horizon, total: total, cache: map[int]schema.Budget{}}
}

// spent returns the (ε, δ) guarantee of the first k windows of a horizon
// (k is clamped to [1, windows]). δ is the parts' δ plus k windows of group
// selection; ε the smallest the accountant certifies for k windows at that
// δ, never above what the calibration certified for all windows (k windows
// are part of them), plus the selection's ε shift. The floating-point
// residual of k windows of float noise is added to the parts' (ε, δ) by
// privacy.FloatGuarantee. With δ = 0 (no float noise then) pure ε adds up
// exactly: k/N of the total.
//
// Each evaluation composes k windows (milliseconds to a few hundred for
// discrete Gaussian noise), so k is first rounded up to a grid — exact up to
// ledgerExact windows, then steps of ledgerStep — and the guarantee of
// those (more) windows is reported, an upper bound: 32 + ln(N/32)/ln 1.05
// evaluations per horizon of N windows (111 for a day of 1-minute windows,
// 150 for a week).
func (l *ledger) spent(k int) schema.Budget {
	k = ledgerGrid(min(max(k, 1), l.windows), l.windows)
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.cache[k]; ok {
		return b
	}
	kf, nf := float64(k), float64(l.windows)
	var b schema.Budget
	if l.after != nil {
		b = l.spentAfter(k)
	} else if l.budget.Delta == 0 {
		b.Epsilon = math.Nextafter(l.budget.Epsilon*kf/nf, math.Inf(1))
		if k == l.windows {
			b.Epsilon = l.budget.Epsilon
		}
	} else {
		e := l.budget.Epsilon
		if k < l.windows {
			if acc, err := privacy.AccountantFor(l.parts, l.scales, k); err == nil {
				if v := acc.Epsilon(l.budget.Delta); v <= e {
					e = v
				}
			}
		}
		g := privacy.FloatGuarantee(privacy.Budget{Epsilon: e, Delta: l.budget.Delta}, l.floatTerms(k))
		b = schema.Budget{Epsilon: g.Epsilon + l.shift*kf/nf, Delta: g.Delta + kf*l.pw}
		if k == l.windows && l.horizon {
			// Exactly what the calibration certified: the configured total.
			b = schema.Budget{Epsilon: l.total.Epsilon, Delta: l.total.Delta}
		}
	}
	if !(b.Epsilon > 0) {
		b.Epsilon = math.SmallestNonzeroFloat64 // (0, δ) implies (ε, δ) for every ε > 0
	}
	b.Delta = math.Min(b.Delta, l.total.Delta)
	l.cache[k] = b
	return b
}

// floatTerms returns the floating-point residual terms of k windows.
func (l *ledger) floatTerms(k int) []privacy.FloatTerm {
	t := slices.Clone(l.float)
	for i := range t {
		t[i].N *= int64(k)
	}
	return t
}

// The ledger's grid of window counts: exact up to ledgerExact, then
// geometric with ratio ledgerStep.
const (
	ledgerExact = 32
	ledgerStep  = 1.05
)

// ledgerGrid rounds k up to the ledger's grid, at most n.
func ledgerGrid(k, n int) int {
	if k <= ledgerExact {
		return k
	}
	g := float64(ledgerExact)
	for int(math.Ceil(g)) < k {
		g *= ledgerStep
	}
	return min(int(math.Ceil(g)), n)
}
