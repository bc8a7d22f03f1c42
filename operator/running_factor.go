package operator

// running_factor.go releases event-level running totals by the integer
// square-root factorization of the prefix-sum matrix
// (privacy/continual.Factorization), windows.running_mechanism.
//
// When. Event-level privacy with a horizon budget (parallel composition:
// one event changes one window's values), windows.running on, δ > 0, and
// no private group selection (every group of every window is released:
// a withheld group would leave a hole in the factorization, so with
// selection running totals are sums of released values). Then one event
// changes one window's count by at most Δ = L∞ (a sum by at most
// LatticeSensitivity(L∞, step) lattice steps) and, per group, the vector
// w = R'x + z over the horizon's T windows (x the counts or lattice sums
// of the group, z i.i.d. discrete Gaussian) is one mechanism whose
// coordinate j+k moves by at most Δ·r'_k. The plan calibrates it jointly
// with the window's other parts as T discrete Gaussian parts with shifts
// Δ·r'_k and one common σ_z (vectorNoise.calParts; the PLD composes them
// exactly, coordinates being independent). Each window's other parts are
// unchanged by an event elsewhere, so this covers the whole horizon.
//
// The release of window t is continual's Decode of w, computed from the
// window's own value and the regenerated noises z_0…z_t (z_j is the first
// draw of the stream of window j's release message of the group, so
// nothing but the current window is needed; the decoded noise of the
// earlier windows is kept in memory across windows, a cache of noise
// only: running_factor_cache.go): x_t + E_t/2^10, exact in
// integers and a function of w alone (post-processing). The running total
// is the sum of those released values, as with sums of windows
// (post-processing of what is published), and its noise is the
// square-root factorization's: worst-case error about s·Δ·Σ_{k<T} r_k²
// instead of s·Δ·√T (1.9× smaller at T = 16, 5.6× at T = 256). The price
// is the per-window value, whose noise is (R'^{-1}z)_t with standard
// deviation about ‖r'‖₂/K·1.13·σ₁ (σ₁ what the window alone would get):
// 1.57× at T = 16, 1.90× at T = 256, 2.08× at T = 1440. With "auto" the
// factorization runs whenever it can (its worst-case running error is the
// smaller for every T ≥ 2); "sum" keeps the per-window values at σ₁.
//
// Intervals. A released value's noise is Σ_j c_{t−j}·z_j/K and the
// running total's Σ_j d_{t−j}·z_j/K (weighted sums of independent
// σ_z²-subgaussian discrete Gaussians), plus a rounding bounded by
// continual (WindowRounding, RunningRounding): continual.HalfWidths. A
// running total that does not sum every window of the horizon so far (the
// operator started within the horizon, or a window was skipped as already
// published) gets a conservative bound instead: for any dependent Y_i,
// each σ_i²-subgaussian, Σ Y_i is (Σσ_i)²-subgaussian (Hölder).

import (
	"fmt"
	"math"
	"slices"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/privacy/continual"
	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// The values of windows.running_mechanism.
const (
	// RunningAuto: the factorization whenever it applies, else sums.
	RunningAuto = "auto"
	// RunningSum ("" too, the default): running totals are sums of the
	// per-window releases. The default keeps the releases of deployments
	// from before the factorization (their digest and per-window noise)
	// unchanged on upgrade; the factorization trades 1.6–2.1× the noise on
	// each window's own value for the smaller error of the totals, a choice
	// the operator makes.
	RunningSum = "sum"
	// RunningFactorization: the square-root factorization; a configuration
	// where it does not apply is refused.
	RunningFactorization = "factorization"
)

// factorBits is log2 K of the factorization: r'_0 = 2^20, so R' is within
// 2^−21 per entry of K·A^{1/2} (the worst-case error within 1e-5 of the
// square-root factorization's at T ≤ 1440).
const factorBits = 20

// factLatticeBits coarsens the lattice of a factorized sum from
// SnapStep(L∞) ≈ L∞·2^−20 to L∞·2^−10: the shift in lattice steps is then
// about 2^10 and σ_z ≈ s·2^10·‖r'‖₂·K stays below the discrete Gaussian
// sampler's 2^40 for noise multipliers s up to about 2^9 (ε = 0.01 at
// δ = 1e-10), at a cost of one part in 2^10 of the scale (the rounding
// adds one step to the shift).
const factLatticeBits = 10

// factAutoMaxWindows is the most windows per horizon for which "auto"
// chooses the factorization: the plan composes one discrete Gaussian PLD
// per window, about 25 s at 1440 windows on a loaded 2-core machine. A
// release decodes one O(t) step from the noise cache
// (running_factor_cache.go: about 30 µs per group and aggregate at the
// last window of T = 1440, BenchmarkFactorizedRelease), but a series not
// cached (a restart, beyond the cap) regenerates z_0…z_t and decodes in
// O(t²) (about 13 ms there). "factorization" goes up to
// continual.MaxFactorWindows.
const factAutoMaxWindows = 1440

// factMechanism names the noise of a factorized release in its series.
const factMechanism = "factorized-discrete-gaussian"

// factNoise is the factorization of a running aggregate's noise.
type factNoise struct {
	f      *continual.Factorization
	sigmaZ float64      // σ_z of z, in units of 1/K of a count or lattice step
	dg     rng.DGParams // the sampler's parameters for σ_z
	// variance is the variance of z_j/K in value units.
	variance float64
}

// runningFactorization reports whether c releases running totals by the
// factorization, and when running totals are on but it does not, why.
func (c Config) runningFactorization() (bool, string) {
	if !c.Windows.Running {
		return false, ""
	}
	if c.Windows.RunningMechanism == RunningSum || c.Windows.RunningMechanism == "" {
		return false, "windows.running_mechanism is sum (the default; auto or factorization chooses the factorization)"
	}
	_, nw := c.TotalBudget()
	switch {
	case !c.ParallelComposition():
		return false, "the factorization needs event-level privacy (no schema.unit_field) and a horizon budget"
	case !(c.Privacy.HorizonDelta > 0):
		return false, "the factorization needs δ > 0 (discrete Gaussian noise)"
	case len(c.Schema.GroupBy) > 0 && len(c.Privacy.PublicGroups) == 0:
		return false, "private group selection can withhold a group from a window, which the factorization cannot skip (list privacy.public_groups)"
	case nw < 2 || nw > continual.MaxFactorWindows:
		return false, fmt.Sprintf("the factorization needs 2 to %d windows per horizon, got %d", continual.MaxFactorWindows, nw)
	case nw > factAutoMaxWindows && c.Windows.RunningMechanism != RunningFactorization:
		return false, fmt.Sprintf("auto uses the factorization up to %d windows per horizon (its calibration composes one PLD per window: "+
			"about 25 s at 1440; set windows.running_mechanism: factorization to use it with %d)", factAutoMaxWindows, nw)
	}
	for _, a := range configuredAggregates(c) {
		if !a.running() {
			continue
		}
		m := c.Privacy.MechanismFor(a.name())
		if m == Auto {
			continue
		}
		if rm, err := ReleaseMechanism(m, true); err != nil || rm.Name() != (privacy.DiscreteGaussian{}).Name() {
			return false, fmt.Sprintf("the factorization needs Gaussian noise for %s (mechanism %s)", a.name(), m)
		}
	}
	return true, ""
}

// useFactorization sets the configured mechanism of the running
// aggregates' parts to discrete-gaussian when c releases running totals by
// the factorization, and returns the factorization (nil: none).
func useFactorization(c Config, specs []partSpec) (*continual.Factorization, error) {
	if ok, _ := c.runningFactorization(); !ok {
		return nil, nil
	}
	_, nw := c.TotalBudget()
	f, err := continual.NewFactorization(nw, factorBits)
	if err != nil {
		return nil, fmt.Errorf("operator: running totals: %w", err)
	}
	for i := range specs {
		if a := aggregateNamed(baseAggregate(specs[i].agg)); a != nil && a.running() {
			specs[i].configured = (privacy.DiscreteGaussian{}).Name()
		}
	}
	return f, nil
}

// calParts is n as the calibration sees it: its one part, or for the
// factorization one discrete Gaussian part per coordinate k of w (shift
// L∞·r'_k in integer units of w) with weights that give every coordinate
// the same σ_z = κ·L∞·⌈‖r'‖₂⌉.
func (n *vectorNoise) calParts() []privacy.Part {
	pt := n.calPart()
	if n.fact == nil {
		return []privacy.Part{pt}
	}
	r := n.fact.f.Coefficients()
	norm := n.fact.f.ColumnNorm() * float64(r[0])
	out := make([]privacy.Part, len(r))
	for k, rk := range r {
		// Coordinate j+k of w moves by r'_k times the window's shift: every
		// norm of the part scales by r'_k (L1 and L2 too, when a total bound
		// set them).
		out[k] = privacy.Part{Mechanism: pt.Mechanism, L0: pt.L0, Linf: pt.Linf * float64(rk), L1: scaleUp(pt.L1, rk), L2: scaleUp(pt.L2, rk), Weight: norm / float64(rk)}
	}
	return out
}

// scaleUp is x·r rounded up (0 stays 0: an unset norm).
func scaleUp(x float64, r int64) float64 {
	if x == 0 {
		return 0
	}
	return math.Nextafter(x*float64(r), math.Inf(1))
}

// expandParts returns the calibration's parts of noises and, per part, the
// index of its noise.
func expandParts(noises []vectorNoise) ([]privacy.Part, []int) {
	var parts []privacy.Part
	var owner []int
	for i := range noises {
		for _, pt := range noises[i].calParts() {
			parts = append(parts, pt)
			owner = append(owner, i)
		}
	}
	return parts, owner
}

// collapsePlans returns one plan per noise from the plans of the expanded
// parts: the first part's, with the largest scale of its parts (the
// factorization's coordinates share σ_z; their scales differ only by
// rounding, and the larger is more noise).
func collapsePlans(plans []privacy.Plan, owner []int, n int) []privacy.Plan {
	out := make([]privacy.Plan, n)
	seen := make([]bool, n)
	for k, i := range owner {
		if !seen[i] {
			out[i], seen[i] = plans[k], true
			continue
		}
		out[i].Scale = math.Max(out[i].Scale, plans[k].Scale)
	}
	return out
}

// setFact sets the scales and the worst-case interval of a factorized
// noise from σ_z: the value-unit scale σ = σ_z/K (times the step on the
// lattice) and the largest per-window half-width over the horizon.
func (n *vectorNoise) setFact(sigmaZ float64) error {
	if !rng.DiscreteScaleOK(sigmaZ) {
		return fmt.Errorf("%w: %s: factorized noise σ_z = %v is outside the sampler's [2^-30, 2^40]", privacy.ErrInfeasible, n.part, sigmaZ)
	}
	k := math.Ldexp(1, int(n.fact.f.Bits()))
	n.fact.sigmaZ, n.fact.dg = sigmaZ, rng.NewDGParams(sigmaZ)
	n.grid = sigmaZ / k // exact: K is a power of two
	n.scale = n.grid * n.step
	n.fact.variance = privacy.DiscreteGaussian{}.Variance(sigmaZ) / k / k * n.step * n.step
	h, _, err := n.fact.f.HalfWidths(n.scale, n.fact.variance, n.fact.f.Windows()-1, n.beta)
	if err != nil {
		return fmt.Errorf("operator: %s: %w", n.part, err)
	}
	n.half = h
	return nil
}

// windowIndex returns the index of the window starting at start among the
// windows of its horizon.
func (p *plan) windowIndex(start int64) (hs int64, t int) {
	hs, _ = p.horizonOf(start)
	first := p.offset + ceilDiv(hs-p.offset, p.size)*p.size
	return hs, int((start - first) / p.size)
}

// ceilDiv returns ⌈a/b⌉ for b > 0.
func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// factSeries releases the value v of one group's factorized aggregate in
// the window starting at start: x_t + E_t/2^10 with E = Decode(z_0…z_t),
// z_j the first draw of streamAt(start of window j), E_t from the series'
// cache s (nil: decoded afresh; the same bits either way).
func (p *plan) factSeries(n *vectorNoise, v float64, start int64, streamAt func(int64) *rng.Stream, s *factSeriesNoise) (schema.Series, error) {
	_, t := p.windowIndex(start)
	if t < 0 || t >= n.fact.f.Windows() {
		return schema.Series{}, fmt.Errorf("operator: %s: window %d of a horizon of %d", n.part, t, n.fact.f.Windows())
	}
	first := start - int64(t)*p.size
	zAt := func(j int) int64 { return streamAt(first + int64(j)*p.size).DiscreteGaussian(n.fact.dg) }
	et, err := factNoiseAt(n.fact.f, s, t, zAt)
	if err != nil {
		return schema.Series{}, fmt.Errorf("operator: %s: %w", n.part, err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return schema.Series{}, fmt.Errorf("operator: %s: value is not finite", n.part)
	}
	// The lattice integer of v: clamped to ±2^50 steps (data independent,
	// 1-Lipschitz) and rounded, as privacy.LatticeRelease does.
	x := int64(math.Round(math.Max(-factClamp, math.Min(factClamp, v/n.step))))
	if et > factNoiseMax || et < -factNoiseMax {
		return schema.Series{}, fmt.Errorf("operator: %s: factorized noise out of range", n.part) // depends on z only
	}
	val := math.Ldexp(float64(x<<continual.OutputBits+et), -continual.OutputBits) * n.step
	half, _, err := n.fact.f.HalfWidths(n.scale, n.fact.variance, t, n.beta)
	if err != nil {
		return schema.Series{}, fmt.Errorf("operator: %s: %w", n.part, err)
	}
	return schema.Series{
		Name: n.series, Mechanism: factMechanism, Scale: n.scale, Level: 1 - n.beta,
		Sensitivity: schema.Sensitivity{L0: int64(math.Ceil(n.sens.L0)), L1: n.sens.L1, L2: n.sens.L2, LInf: n.sens.Linf},
		Floats:      []float64{val}, Lo: []float64{val - half}, Hi: []float64{val + half},
	}, nil
}

// Ranges of the factorized release: |x| ≤ 2^50 steps and |E| ≤ 2^62, so
// x·2^10 + E fits in an int64.
const (
	factClamp    = 1 << 50
	factNoiseMax = 1 << 62
)

// factRelease is the release path of a group's factorized aggregate (a
// single part, count or sum): its value and the streams of the same
// group's release of every window of the horizon.
func (p *plan) factRelease(ap *aggPlan, g *windows.Group, start int64, key rng.Key, namespace string) ([]schema.Series, error) {
	vals := mustValues(g.Key)
	streamAt := func(s int64) *rng.Stream {
		return rng.NewStream(key, noiseID(p.streamDigest(), schema.ReleaseKey(releaseID(namespace, s), ap.name, vals...)))
	}
	v := float64(g.Count)
	if ap.kind == schema.KindSum {
		v = g.Sum
	}
	n := &ap.noises[0]
	var cached *factSeriesNoise
	if _, t := p.windowIndex(start); t >= 0 && t < n.fact.f.Windows() {
		id := factSeriesID{namespace: namespace, agg: ap.name, group: g.Key, first: start - int64(t)*p.size}
		cached = p.fcache.lookup(key, id, n.fact.f.Windows())
	}
	sr, err := p.factSeries(n, v, start, streamAt, cached)
	return []schema.Series{sr}, err
}

// factRunningSeries is the running series of a total t whose windows
// include factorized releases, through window index idx of the horizon (n
// the aggregate's noise): the factorization's own interval when t sums
// every window a…idx (a = t.FactFrom − 1: from the horizon's start, or
// from where this configuration started) and all are factorized, else
// mixedHalf.
func factRunningSeries(n *vectorNoise, t *runningTotal, idx int) (schema.Series, error) {
	var half float64
	var err error
	if a := t.FactFrom - 1; t.Fact == t.Windows && t.Windows == int64(idx)-a+1 {
		half, err = n.fact.f.RangeHalfWidth(n.scale, n.fact.variance, int(a), idx, n.beta)
	} else {
		half, err = mixedHalf(t, n.beta)
	}
	if err != nil {
		return schema.Series{}, err
	}
	half = math.Nextafter(half, math.Inf(1))
	return schema.Series{Name: schema.SeriesRunning, Mechanism: schema.DerivedMechanism, Level: 1 - n.beta, Windows: t.Windows,
		Floats: []float64{t.Value}, Lo: []float64{t.Value - half}, Hi: []float64{t.Value + half}}, nil
}

// mixedHalf is a valid (1−β) half-width for a running total t that
// includes factorized windows but not exactly the windows 0…idx of one
// factorization: their noises are dependent, each σ_i²-subgaussian with
// σ_i ≤ σ·WindowFactor(T−1), so their sum is (Σσ_i)²-subgaussian (Hölder)
// with variance at most (Σσ_i)² (a discrete Gaussian's variance is below
// σ²): t.FactScale, at β/2 when t also sums independent noises (t.Noise,
// SumHalfWidth at β/2; the union bound), plus both rounding bounds.
func mixedHalf(t *runningTotal, beta float64) (float64, error) {
	if len(t.Noise) > 0 {
		beta /= 2
	}
	h, err := continual.SumHalfWidth([]continual.Term{{Mechanism: (privacy.DiscreteGaussian{}).Name(), Scale: t.FactScale,
		Variance: t.FactScale * t.FactScale, N: 1}}, beta)
	if err != nil {
		return 0, err
	}
	h += t.FactSlack
	if len(t.Noise) > 0 {
		rest, err := continual.SumHalfWidth(runningTerms(t), beta)
		if err != nil {
			return 0, err
		}
		h += rest + t.Slack
	}
	return h, nil
}

// runningTerms returns the summed noises of t as continual terms.
func runningTerms(t *runningTotal) []continual.Term {
	terms := make([]continual.Term, len(t.Noise))
	for i, z := range t.Noise {
		terms[i] = continual.Term{Mechanism: z.Mechanism, Scale: z.Scale, Variance: z.Variance, N: z.N}
	}
	return terms
}

// factNote is the accounting note's sentence on factorized running totals.
func factNote(c Config) string {
	var aggs []string
	for _, a := range configuredAggregates(c) {
		if a.running() {
			aggs = append(aggs, a.name())
		}
	}
	_, nw := c.TotalBudget()
	return fmt.Sprintf("; running totals of %s since the horizon's start by the square-root factorization over its %d windows "+
		"(one discrete Gaussian mechanism calibrated with the window's other parts; per-window values and totals are its post-processing, "+
		"on a grid of 2^-%d), interval by a valid bound on the weighted noise", joinAnd(slices.Clip(aggs)), nw, continual.OutputBits)
}

// RunningSizing is how a count's or sum's running totals are released
// (windows.running), in `dpstream plan`.
type RunningSizing struct {
	// Mechanism is "square-root factorization" or "sum of window releases".
	Mechanism string `json:"mechanism"`
	// Why says why the factorization does not run ("": it does).
	Why string `json:"why_not_factorization,omitempty"`
	// WindowRMSE is the largest root mean squared error of one window's
	// released value over the horizon; WorstRMSE the largest of a running
	// total (at the horizon's end; 0 without a horizon: the totals never
	// restart) and WorstHalfWidth its interval's half-width.
	WindowRMSE     float64 `json:"window_rmse"`
	WorstRMSE      float64 `json:"worst_running_rmse"`
	WorstHalfWidth float64 `json:"worst_running_half_width"`
}

// runningSizing is the running totals' line of n's series in the plan.
func (p *plan) runningSizing(c Config, n *vectorNoise) *RunningSizing {
	if n.fact != nil {
		f := n.fact.f
		run, win := f.WorstRunningFactor()
		sd := math.Sqrt(n.fact.variance)
		_, h, err := f.HalfWidths(n.scale, n.fact.variance, f.Windows()-1, n.beta)
		if err != nil {
			h = math.NaN()
		}
		return &RunningSizing{Mechanism: string(continual.Sqrt), WindowRMSE: sd * win, WorstRMSE: sd * run, WorstHalfWidth: h}
	}
	_, why := c.runningFactorization()
	t := n.noiseTerm()
	rs := &RunningSizing{Mechanism: "sum of window releases", Why: why, WindowRMSE: math.Sqrt(t.Variance)}
	if p.horizon != 0 {
		rs.WorstRMSE = math.Sqrt(t.Variance * float64(p.windows))
		tot := &runningTotal{Windows: int64(p.windows), Slack: n.roundSlack() * float64(p.windows), Noise: []runningNoise{t}}
		tot.Noise[0].N = int64(p.windows)
		if s, err := runningSeries(tot, n.beta, false, n.half); err == nil {
			rs.WorstHalfWidth = s.Hi[0] - s.Value(0)
		}
	}
	return rs
}
