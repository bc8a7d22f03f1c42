package operator

// running.go releases running totals (windows.running): every count and
// sum release also carries the cumulative total of its group since the
// horizon started, as a "running" series. At event level with a horizon
// budget the per-window values come from the square-root factorization
// instead (running_factor.go); the running total is still the sum of the
// released values.
//
// Why no extra noise and no extra budget. dpstream's neighbouring relation
// lets one privacy unit contribute to every window of the horizon (within
// the per-window bounds), and the plan already calibrates the per-window
// releases for the composition of all of them. Under that relation the
// running sum of the released per-window values is the best linear way to
// release prefix sums: for any factorization A = L·R of the prefix-sum
// matrix with Gaussian noise on R·x, the error at the horizon's end is at
// least s·c·T, which summing the per-window releases (R = I) attains,
// while the binary tree and the square-root factorization are worse (for
// 60, 1440 and 10080 windows the largest error over the horizon is 1.9,
// 3.3 and 4.2× for the tree, 1.6, 2.5 and 3.1× with Honaker's estimator,
// 1.2, 1.5 and 1.6× for the square root); see privacy/continual (Errors,
// and testdata/error_table.md). So the running
// total is post-processing of values already published — it adds no
// privacy loss, and it is exactly the sum of the released window values
// (a reader can recompute it, TestRunningIsPostProcessing).
//
// The period is the horizon (privacy.horizon): totals restart with every
// horizon. With a per-window budget (no horizon) they run from the first
// window released with windows.running on, and never restart.
//
// Finality. The totals of the current horizon are carried in the state
// topic (stateRecord.Running), written with the publication intent and the
// final record of every batch exactly like the ledger, so a replayed or
// recovered window carries the same running value, byte for byte.
//
// What is summed. A group's running total adds the group's released value
// of every window in which the group was released: with public groups and
// without group-by that is every window of the horizon; with private group
// selection a window that withheld the group adds nothing (its true value
// is unknown to the release), and the series says how many windows it
// sums (Series.Windows). The interval is for the true total of those
// windows. A window whose release was skipped as already published (a
// damaged state topic, never on the normal path) is not summed either.
//
// The interval. The error of a running total is the sum of the windows'
// independent noises plus their rounding: continual.SumHalfWidth gives a
// valid (1−β) half-width of the noise sum (Chernoff with the exact moment
// generating function of Laplace and discrete Laplace noise, the
// σ²-subgaussian bound of discrete Gaussian noise, or Chebyshev on the
// summed variance for other noise), and the rounding adds a deterministic
// bound per window (½ step on the lattice, a step for snapped real
// values, ½ for float noise rounded to integers). The stated level is a
// lower bound on the coverage (for many windows of Gaussian noise the
// actual coverage at 95% is about 99.3%).

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dpstream/dpstream/privacy/continual"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// runningRecord holds the running totals of the horizon of the last
// published window, in the state topic.
type runningRecord struct {
	// Start is the horizon's start (Unix ms), or without a horizon budget
	// the first window summed; Through the end of the last window summed.
	Start   int64 `json:"start"`
	Through int64 `json:"through"`
	// Totals maps the aggregate name, NUL and the group key to the total.
	Totals map[string]*runningTotal `json:"totals,omitempty"`
}

// runningTotal is one group's running total of one aggregate.
type runningTotal struct {
	// Value is the sum of the released values (integers for counts,
	// multiples of the grid step for sums).
	Value float64 `json:"v"`
	// Windows is the number of windows summed.
	Windows int64 `json:"n"`
	// Slack bounds the rounding of the summed values (see plan.roundSlack).
	Slack float64 `json:"r,omitempty"`
	// Fact is the number of summed windows released by the factorization
	// (running_factor.go); their noise is not in Noise but bounded by
	// FactScale (the sum of their noises' subgaussian scales) and
	// FactSlack (the sum of their rounding bounds).
	Fact      int64   `json:"fn,omitempty"`
	FactScale float64 `json:"fs,omitempty"`
	FactSlack float64 `json:"fr,omitempty"`
	// FactFrom is 1 + the horizon index of the first factorized window
	// summed (0: none).
	FactFrom int64 `json:"ff,omitempty"`
	// Noise lists the noises summed, by mechanism and scale.
	Noise []runningNoise `json:"z"`
}

// runningNoise is N windows' noise of one mechanism and scale, in value
// units (for the lattice, σ = grid·step and its variance).
type runningNoise struct {
	Mechanism string  `json:"m"`
	Scale     float64 `json:"s"`
	Variance  float64 `json:"var"`
	N         int64   `json:"n"`
}

// runningMaxTotals caps the running totals of a horizon (aggregate ×
// group): the state record carries them all (about 150 bytes each in
// JSON) and must stay well below Kafka's default message.max.bytes (1 MiB)
// — 2000 take about 300 KB. A group first released when the cap is
// reached gets no running series until the horizon ends (which groups are
// released is public, so this depends on published data only, and it is
// the same on every replay). A variable for tests.
var runningMaxTotals = 2000

// runningKey is the key of a total in runningRecord.Totals.
func runningKey(aggregate, group string) string { return aggregate + "\x00" + group }

// runningNote is what the accounting note says about windows.running.
func runningNote(c Config) string {
	if !c.Windows.Running {
		return ""
	}
	var aggs []string
	all, err := releasedAggregates(c) // with extra measures, their sums too
	if err != nil {
		all = configuredAggregates(c)
	}
	for _, a := range all {
		if a.running() {
			aggs = append(aggs, a.name())
		}
	}
	since := "the horizon's start"
	if c.Privacy.Horizon == 0 {
		since = "the first window released with them"
	}
	return fmt.Sprintf("; running totals of %s since %s: sums of the released window values "+
		"(post-processing: no budget, no noise of their own), interval by a valid bound on the summed noise", joinAnd(aggs), since)
}

func joinAnd(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	s := xs[0]
	for _, x := range xs[1 : len(xs)-1] {
		s += ", " + x
	}
	return s + " and " + xs[len(xs)-1]
}

// checkRunning reports configuration problems of windows.running.
func checkRunning(p *problems, c Config) {
	if !c.Windows.Running {
		return
	}
	if !slices.ContainsFunc(configuredAggregates(c), aggregator.running) {
		p.addf("windows.running: needs %s in windows.aggregates (running totals are of those)", runningAggregates())
	}
	switch c.Windows.RunningMechanism {
	case "", RunningAuto, RunningSum:
	case RunningFactorization:
		if ok, why := c.runningFactorization(); !ok {
			p.addf("windows.running_mechanism: factorization: %s", why)
		}
	default:
		p.addf("windows.running_mechanism: %q is not one of auto, sum, factorization", c.Windows.RunningMechanism)
	}
}

// roundSlack is the most the rounding of one released value can move it
// beyond its noise: 0 for exact integer noise, ½ for float noise rounded
// to integers, ½ step on the lattice (the value is rounded, the noise is
// on the lattice), a step for snapped real values (the value and the noise
// are each rounded by at most ½ step).
func (n *vectorNoise) roundSlack() float64 {
	switch n.kind {
	case intRounded:
		return 0.5
	case realLattice:
		return n.step / 2
	case realSnapped:
		return n.step
	}
	return 0
}

// noiseTerm is one window's noise of n as a runningNoise (N = 1).
func (n *vectorNoise) noiseTerm() runningNoise {
	if n.kind == realLattice {
		return runningNoise{Mechanism: n.mech.Name(), Scale: n.scale, Variance: n.mech.Variance(n.grid) * n.step * n.step, N: 1}
	}
	return runningNoise{Mechanism: n.mech.Name(), Scale: n.scale, Variance: n.mech.Variance(n.scale), N: 1}
}

// addRunning adds the running series to the count and sum releases of
// one window (out, from releaseWindowAt) and returns them re-encoded with
// the running record after the window. run is the record after the
// windows before it (nil: none yet); it is not modified.
func (p *plan) addRunning(out []outMsg, run *runningRecord, w *windows.Window) ([]outMsg, *runningRecord, error) {
	// The period: the horizon, or without a horizon budget everything
	// since the first window released with running totals.
	hs := w.Start
	if p.horizon != 0 {
		hs, _ = p.horizonOf(w.Start)
	} else if run != nil {
		hs = run.Start
	}
	next := &runningRecord{Start: hs, Through: w.End, Totals: map[string]*runningTotal{}}
	if run != nil && run.Start == hs {
		if run.Through > w.Start {
			return nil, nil, fmt.Errorf("%w: running totals already include the window starting at %s", ErrState, tsString(w.Start))
		}
		for k, t := range run.Totals {
			c := *t
			c.Noise = slices.Clone(t.Noise)
			next.Totals[k] = &c
		}
	}
	for i := range out {
		r := &out[i].rel
		if !runningKind(r.Kind) {
			continue
		}
		ap := p.aggPlan(r.Aggregate)
		if ap == nil || len(ap.noises) == 0 || len(r.Series) == 0 || r.Series[0].Len() != 1 {
			return nil, nil, fmt.Errorf("operator: running %s: no plan for the release", r.Aggregate)
		}
		n := &ap.noises[0]
		vals := make([]string, len(r.Group))
		for j, g := range r.Group {
			vals[j] = g.Value
		}
		key := runningKey(r.Aggregate, schema.MakeGroup(vals...))
		t := next.Totals[key]
		if t == nil && len(next.Totals) >= runningMaxTotals {
			continue // no room in the state record: no running series
		}
		if t == nil {
			t = &runningTotal{}
			next.Totals[key] = t
		}
		t.Value += r.Series[0].Value(0)
		t.Windows++
		if n.fact != nil {
			_, idx := p.windowIndex(w.Start)
			if t.Fact == 0 {
				t.FactFrom = int64(idx) + 1
			}
			t.Fact++
			last := n.fact.f.Windows() - 1
			t.FactScale += n.scale * n.fact.f.WindowFactor(last)
			t.FactSlack += n.fact.f.WindowRounding(last)
			s, err := factRunningSeries(n, t, idx)
			if err != nil {
				return nil, nil, fmt.Errorf("operator: running %s: %w", r.Aggregate, err)
			}
			if out[i].value, err = encodeWithRunning(r, s); err != nil {
				return nil, nil, err
			}
			continue
		}
		t.Slack += n.roundSlack()
		term := n.noiseTerm()
		if k := slices.IndexFunc(t.Noise, func(z runningNoise) bool {
			return z.Mechanism == term.Mechanism && z.Scale == term.Scale && z.Variance == term.Variance
		}); k >= 0 {
			t.Noise[k].N++
		} else {
			t.Noise = append(t.Noise, term)
		}
		s, err := runningSeries(t, n.beta, n.kind == intExact || n.kind == intRounded, n.half)
		if err != nil {
			return nil, nil, fmt.Errorf("operator: running %s: %w", r.Aggregate, err)
		}
		if out[i].value, err = encodeWithRunning(r, s); err != nil {
			return nil, nil, err
		}
	}
	return out, next, nil
}

// encodeWithRunning appends the running series s to r and encodes it.
func encodeWithRunning(r *schema.Release, s schema.Series) ([]byte, error) {
	r.Series = append(r.Series, s)
	b, err := schema.EncodeRelease(r)
	if err != nil {
		return nil, fmt.Errorf("operator: encoding release %s with its running total: %w", r.Aggregate, err)
	}
	return b, nil
}

// runningAggregates names the aggregates that carry running totals
// (aggregator.running), "count or sum".
func runningAggregates() string {
	var names []string
	for _, a := range aggregateTable {
		if a.running() {
			names = append(names, a.name())
		}
	}
	return strings.Join(names, " or ")
}

// runningKind reports whether releases of kind k carry running totals.
func runningKind(k schema.Kind) bool {
	return slices.ContainsFunc(aggregateTable, func(a aggregator) bool { return a.kind() == k && a.running() })
}

// aggPlan returns the plan of the aggregate named name (nil: none).
func (p *plan) aggPlan(name string) *aggPlan {
	for i := range p.aggs {
		if p.aggs[i].name == name {
			return &p.aggs[i]
		}
	}
	return nil
}

// runningSeries is the running series of t at level 1−beta. A total of one
// window with the current noise (half: its release's half-width) gets that
// release's own interval, which is exact where the bound on a sum is not
// (Chernoff is up to 2× loose for one Laplace term).
func runningSeries(t *runningTotal, beta float64, integer bool, half float64) (schema.Series, error) {
	terms := make([]continual.Term, len(t.Noise))
	for i, z := range t.Noise {
		terms[i] = continual.Term{Mechanism: z.Mechanism, Scale: z.Scale, Variance: z.Variance, N: z.N}
	}
	h, err := continual.SumHalfWidth(terms, beta)
	if err != nil {
		return schema.Series{}, err
	}
	if t.Fact > 0 { // factorized windows too (a configuration changed within the horizon)
		if h, err = mixedHalf(t, beta); err != nil {
			return schema.Series{}, err
		}
		integer, half = false, math.Nextafter(h, math.Inf(1))
	}
	s := schema.Series{Name: schema.SeriesRunning, Mechanism: schema.DerivedMechanism, Level: 1 - beta, Windows: t.Windows}
	one := t.Windows == 1 && len(t.Noise) == 1 && t.Noise[0].N == 1
	switch {
	case t.Fact > 0:
		// half is mixedHalf's, rounding included.
	case one:
		// half is the window's own half-width, rounding included.
	case integer:
		half = math.Ceil(h + t.Slack) // the total and the truth are integers
	default:
		half = math.Nextafter(h+t.Slack, math.Inf(1))
	}
	if integer {
		s.Ints = []int64{int64(t.Value)}
	} else {
		s.Floats = []float64{t.Value}
	}
	s.Lo, s.Hi = []float64{t.Value - half}, []float64{t.Value + half}
	return s, nil
}
