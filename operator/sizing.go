package operator

// sizing.go answers "what will this configuration release, and how big must
// a group be for the releases to be useful?" from the same plan `run`
// calibrates (newPlan): per aggregate the mechanism, the per-coordinate
// noise scale and the half-width of the published interval, the group
// selection threshold, the budget, and — for an assumed group size — the
// relative error and the smallest changes that reach a target.
//
// Aggregates plug in through aggregator.expect (aggregate.go): an aggregate
// that expects nothing still gets its mechanism, scale and half-width (from
// its calibrated noises), only not the expected value a relative error
// needs.

import (
	"fmt"
	"math"
	"slices"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/schema"
)

// Sizes are the assumed size of a typical group in one window, for the
// relative errors of Sizing. Zero values mean unknown.
type Sizes struct {
	// UnitsPerGroup is the number of distinct privacy units that
	// contribute to one group in one window (with event-level privacy:
	// events per group and window).
	UnitsPerGroup float64 `json:"units_per_group"`
	// EventsPerUnit is the number of events one unit contributes to one
	// group in one window (0: 1). Bounds clip it: see the assumptions.
	EventsPerUnit float64 `json:"events_per_unit"`
}

// events returns the events per unit (1 when unknown or event-level).
func (s Sizes) events(p *plan) float64 {
	if s.EventsPerUnit <= 0 || p.unit == "" {
		return 1
	}
	return s.EventsPerUnit
}

// Sizing is the summary `dpstream plan` prints and `run` logs at start.
type Sizing struct {
	Budget      SizingBudget      `json:"budget"`
	Bounds      SizingBounds      `json:"bounds"` // plan_bounds.go
	Sizes       Sizes             `json:"sizes"`
	Aggregates  []AggregateSizing `json:"aggregates"`
	Selection   *SelectionSizing  `json:"selection"` // null: groups are public, or no group_by
	Assumptions []string          `json:"assumptions"`
	// Worst is the largest relative half-width over the series with an
	// expected value (null without sizes).
	Worst *float64 `json:"worst_relative"`
	// Target and Suggestions: the smallest changes that bring Worst to
	// Target (Suggest).
	Target      float64      `json:"target,omitempty"`
	Suggestions []Suggestion `json:"suggestions,omitempty"`
}

// parallelComposition names parallel composition in plan output and logs.
const parallelComposition = "parallel (event-level)"

// SizingBudget is the budget of one window and of the horizon.
type SizingBudget struct {
	Unit              string  `json:"unit"` // the privacy unit field, or "event"
	WindowSize        string  `json:"window_size"`
	WindowEpsilon     float64 `json:"window_epsilon"`
	WindowDelta       float64 `json:"window_delta"`
	Horizon           string  `json:"horizon"` // "" without a horizon budget
	HorizonEpsilon    float64 `json:"horizon_epsilon"`
	HorizonDelta      float64 `json:"horizon_delta"`
	WindowsPerHorizon int     `json:"windows_per_horizon"`
	// Composition is "parallel (event-level)" when every window spends the
	// whole horizon budget (Config.ParallelComposition); "" otherwise (the
	// windows of a horizon compose sequentially).
	Composition string `json:"composition,omitempty"`
	Accounting  string `json:"accounting"`
	// Lanes names the extra measures and histograms (schema.measures,
	// schema.histograms) whose parts the window's one joint calibration
	// composes with the others; Parts is then the number of noised parts
	// it composes. Both omitted without extra measures and histograms.
	Lanes []string `json:"lanes,omitempty"`
	Parts int      `json:"parts,omitempty"`
}

// AggregateSizing is one aggregate's released series.
type AggregateSizing struct {
	Aggregate string         `json:"aggregate"`
	Series    []SeriesSizing `json:"series"`
}

// SeriesSizing is one released series of an aggregate: noised (mechanism
// and scale) or derived from the noised ones (the mean).
type SeriesSizing struct {
	Series    string  `json:"series"`
	Mechanism string  `json:"mechanism"` // what runs; "derived" for post-processed series
	Auto      bool    `json:"auto"`      // chosen by mechanism: auto
	Scale     float64 `json:"scale"`     // per-coordinate noise scale in value units (0: derived)
	Level     float64 `json:"level"`     // confidence level of the published interval
	// HalfWidth is the half-width of the published interval of one value,
	// exactly as the release carries it; for a derived series, at the
	// expected values (null without sizes: then it can be the whole range).
	HalfWidth *float64 `json:"half_width"`
	// Expected is a value of a typical group under the sizes and
	// assumptions; Relative = HalfWidth / |Expected| (null: unknown).
	Expected *float64 `json:"expected"`
	Relative *float64 `json:"relative"`
	// CoversRange: the interval at the expected values is the whole
	// possible range (the mean's [lower, upper]): the value says nothing.
	CoversRange bool `json:"covers_range"`
	// Sensitivity of a noised series and the bounds that bind its L1 and
	// L2 (null for a derived series).
	Sensitivity *SeriesSensitivity `json:"sensitivity,omitempty"`
	// Running is how the series' running totals are released (null:
	// no windows.running, or not a count or sum).
	Running *RunningSizing `json:"running,omitempty"`
	// Quantiles is how the joint exponential mechanism's selection
	// releases the quantiles (omitted for every other series).
	Quantiles *QuantileSizing `json:"quantiles,omitempty"`
}

// SelectionSizing is private group selection: a group is released in a
// window only if its number of units plus noise reaches the threshold.
type SelectionSizing struct {
	Mechanism string  `json:"mechanism"`
	Scale     float64 `json:"scale"`
	Threshold float64 `json:"threshold"`
	// Release is the probability that a group of Sizes.UnitsPerGroup
	// units is released in a window (null without sizes).
	Release *float64 `json:"release_probability"`
	// Units50 and Units95 are the smallest numbers of units per group
	// released with probability at least 0.5 and 0.95.
	Units50 int `json:"units_for_50pct"`
	Units95 int `json:"units_for_95pct"`
}

// Suggestion is one change of the configuration (or of the data) and the
// worst relative half-width it gives.
type Suggestion struct {
	Change   string  `json:"change"`  // what to do, in words
	Setting  string  `json:"setting"` // the config key (or "data")
	Value    string  `json:"value"`   // its new value
	Relative float64 `json:"relative"`
	Reaches  bool    `json:"reaches_target"`
}

// seriesExpectation is what an aggregate expects (aggregator.expect) of one
// of its series for a group of the assumed size.
type seriesExpectation struct {
	series   string
	expected float64 // NaN: unknown
	// derived series only: the half-width at the expected values (NaN:
	// whole range), and whether it covers the whole range.
	derived     bool
	level       float64
	half        float64
	coversRange bool
}

// NewSizing validates c and returns the sizing of the plan `run` would
// calibrate for it (no key or broker needed), for a group of the given
// sizes.
func NewSizing(c Config, sz Sizes) (*Sizing, error) {
	p, err := planFor(c)
	if err != nil {
		return nil, err
	}
	return p.sizing(c, sz), nil
}

// planFor validates c and calibrates its plan, as New does.
func planFor(c Config) (*plan, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	dec, err := schema.NewDecoder(c.Schema)
	if err != nil {
		return nil, err
	}
	return newPlan(c, dec, windowsConfig(c, dec.NumBuckets()))
}

// Sizing returns the operator's plan summary (without sizes).
func (o *Operator) Sizing() *Sizing { return o.plan.sizing(o.cfg, Sizes{}) }

// sizing summarises p for a group of the given sizes.
func (p *plan) sizing(c Config, sz Sizes) *Sizing {
	s := &Sizing{Sizes: sz, Budget: SizingBudget{
		Unit: p.unit, WindowSize: c.Windows.Size.String(),
		WindowEpsilon: p.window.Epsilon, WindowDelta: p.window.Delta,
		WindowsPerHorizon: p.windows, Accounting: string(p.accounting),
	}}
	if s.Budget.Unit == "" {
		s.Budget.Unit = "event"
	}
	s.Bounds = boundsSizing(c)
	laneSizing(&s.Budget, c, p)
	if p.parallel {
		s.Budget.Composition = parallelComposition
	}
	if c.Privacy.Horizon != 0 {
		s.Budget.Horizon = c.Privacy.Horizon.String()
		s.Budget.HorizonEpsilon, s.Budget.HorizonDelta = p.total.Epsilon, p.total.Delta
	}
	units, events := sz.UnitsPerGroup, sz.events(p)
	known := units > 0
	for i := range p.aggs {
		ap := &p.aggs[i]
		as := AggregateSizing{Aggregate: ap.name}
		var exp []seriesExpectation
		if known {
			exp = ap.agg.expect(p, ap, units, events)
		}
		find := func(series string, derived bool) *seriesExpectation {
			for j := range exp {
				if exp[j].series == series && exp[j].derived == derived {
					return &exp[j]
				}
			}
			return nil
		}
		for j := range ap.noises {
			n := &ap.noises[j]
			ss := SeriesSizing{Series: n.series, Mechanism: n.mech.Name(), Auto: n.auto, Scale: n.scale,
				Level: 1 - n.beta, Sensitivity: p.seriesSensitivity(n)}
			if n.kind != selectExact { // a selection adds no noise: no half-width
				ss.HalfWidth = ptr(n.half)
			}
			if q := quantileSizing(ap, n); q != nil {
				ss.Mechanism, ss.Quantiles = q.Mechanism, q
			}
			if ap.agg.running() && c.Windows.Running {
				ss.Running = p.runningSizing(c, n)
			}
			if n.fact != nil {
				ss.Mechanism = factMechanism
			}
			if e := find(n.series, false); e != nil && !math.IsNaN(e.expected) {
				ss.Expected = ptr(e.expected)
				if e.expected != 0 {
					ss.Relative = ptr(n.half / math.Abs(e.expected))
				}
			}
			as.Series = append(as.Series, ss)
		}
		for _, e := range exp {
			if !e.derived {
				continue
			}
			ss := SeriesSizing{Series: e.series, Mechanism: schema.DerivedMechanism, Level: e.level,
				HalfWidth: ptr(e.half), Expected: ptr(e.expected), CoversRange: e.coversRange}
			if e.expected != 0 {
				ss.Relative = ptr(e.half / math.Abs(e.expected))
			}
			as.Series = append(as.Series, ss)
		}
		s.Aggregates = append(s.Aggregates, as)
	}
	if sel := p.sel; sel != nil {
		ss := &SelectionSizing{Mechanism: sel.noise.mech.Name(), Scale: sel.noise.scale, Threshold: sel.threshold}
		if known {
			ss.Release = ptr(p.releaseProbability(units))
		}
		ss.Units50 = p.unitsForRelease(0.5)
		ss.Units95 = p.unitsForRelease(0.95)
		s.Selection = ss
	}
	for _, a := range s.Aggregates {
		for _, r := range a.Series {
			if r.Relative != nil && (s.Worst == nil || *r.Relative > *s.Worst) {
				s.Worst = ptr(*r.Relative)
			}
		}
	}
	s.Assumptions = p.assumptions(sz)
	return s
}

// assumptions lists what the expected values assume.
func (p *plan) assumptions(sz Sizes) []string {
	if sz.UnitsPerGroup <= 0 {
		return []string{"no group size given (--units-per-group): intervals only, no relative errors"}
	}
	a := []string{
		fmt.Sprintf("every group has %g %s per window", sz.UnitsPerGroup, map[bool]string{true: "units", false: "events"}[p.unit != ""]),
	}
	if p.unit != "" {
		a = append(a, fmt.Sprintf("each unit adds %g event(s) to its group per window, clipped by the bounds (max_values %d, max_buckets × max_per_bucket %d)",
			sz.events(p), p.bounds.MaxValues, p.bounds.MaxBuckets*p.bounds.MaxPerBucket))
	}
	if len(p.labels) > 0 {
		a = append(a, fmt.Sprintf("histogram events spread evenly over its %d buckets", len(p.labels)))
	}
	if p.upper > p.lower {
		a = append(a, fmt.Sprintf("values at the middle of [lower, upper] = %g", p.mid))
	}
	return append(a, p.laneAssumptions()...)
}

// laneAssumptions are the assumptions of the extra measures and
// histograms, in lane order: each measure's values at the middle of its
// own range, each histogram's events spread evenly over its buckets
// (what their aggregates' expect assume).
func (p *plan) laneAssumptions() []string {
	var a []string
	var last *lane
	for i := range p.aggs {
		l := p.aggs[i].lane
		if l == nil || l == last {
			continue
		}
		last = l
		switch {
		case l.measure >= 0:
			a = append(a, fmt.Sprintf("values of measure %s at the middle of its [lower, upper] = %g", l.name, l.view.mid))
		case len(l.view.labels) > 0:
			a = append(a, fmt.Sprintf("events of histogram %s spread evenly over its %d buckets", l.name, len(l.view.labels)))
		}
	}
	return a
}

func ptr(v float64) *float64 { return &v }

// releaseProbability is the probability that a group of units units is
// released: P(units + noise ≥ threshold) for the selection's integer noise.
func (p *plan) releaseProbability(units float64) float64 {
	sel := p.sel
	if sel == nil {
		return 1
	}
	d := sel.threshold - math.Floor(units) // release iff noise ≥ d
	if d <= 0 {
		return 1 - p.selTail(1-d) // P(noise ≥ d) = 1 − P(noise ≤ d−1) = 1 − P(noise ≥ 1−d)
	}
	return p.selTail(d)
}

// selTail returns P(noise ≥ t) for an integer t ≥ 1 of the selection's
// symmetric integer noise: in closed form for discrete Laplace
// (P(k) = tanh(1/(2s))·e^{−|k|/s}, so P(noise ≥ t) = e^{−t/s}/(1 + e^{−1/s})),
// by summing the probability mass for discrete Gaussian, and otherwise
// (float noise rounded to integers) from the mechanism's half-width by
// bisection on log β to a relative 1e-3 (HalfWidth is the smallest h with
// P(|noise| > h) ≤ β).
func (p *plan) selTail(t float64) float64 {
	n := &p.sel.noise
	switch n.mech.(type) {
	case privacy.DiscreteLaplace:
		q := math.Exp(-1 / n.scale)
		return math.Pow(q, t) / (1 + q)
	case privacy.DiscreteGaussian:
		sig2 := 2 * n.scale * n.scale
		kmax := math.Ceil(t + 40*n.scale + 40)
		var z, tail float64
		for k := kmax; k >= 1; k-- { // small terms first
			w := math.Exp(-k * k / sig2)
			z += 2 * w
			if k >= t {
				tail += w
			}
		}
		return tail / (z + 1)
	}
	hw := func(beta float64) float64 { return math.Ceil(n.mech.HalfWidth(n.scale, beta)) }
	lo, hi := 1e-30, 1.0 // hw(lo) > t−1 ≥ hw(hi) = 0
	if hw(lo) <= t-1 {
		return 0
	}
	for range 100 {
		mid := math.Sqrt(lo * hi)
		if hw(mid) <= t-1 {
			hi = mid
		} else {
			lo = mid
		}
		if hi/lo < 1+1e-3 {
			break
		}
	}
	return hi / 2
}

// unitsForRelease is the smallest number of units per group released with
// probability at least q.
func (p *plan) unitsForRelease(q float64) int {
	if p.sel == nil {
		return 0
	}
	lo, hi := 0, max(int(p.sel.threshold)*2+1, 1)
	for p.releaseProbability(float64(hi)) < q {
		if hi > 1<<40 {
			return hi
		}
		hi *= 2
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if p.releaseProbability(float64(mid)) >= q {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// LogAttrs returns the start-up log lines of s: one per released series,
// one for group selection and one for the budget, each as a message and
// key-value pairs (the numbers `dpstream plan --json` prints).
func (s *Sizing) LogAttrs() []SizingLine {
	var out []SizingLine
	b := s.Budget
	args := []any{"unit", b.Unit, "window_size", b.WindowSize, "window_epsilon", b.WindowEpsilon, "window_delta", b.WindowDelta, "accounting", b.Accounting}
	if b.Horizon != "" {
		args = append(args, "horizon", b.Horizon, "horizon_epsilon", b.HorizonEpsilon, "horizon_delta", b.HorizonDelta, "windows_per_horizon", b.WindowsPerHorizon)
		if b.Composition != "" {
			args = append(args, "composition", b.Composition)
		}
	}
	out = append(out, SizingLine{Msg: "plan: budget", Args: args})
	for _, a := range s.Aggregates {
		for _, r := range a.Series {
			args := []any{"aggregate", a.Aggregate, "series", r.Series, "mechanism", r.Mechanism}
			if r.Mechanism != schema.DerivedMechanism {
				args = append(args, "scale", r.Scale)
			}
			if r.HalfWidth != nil {
				// "confidence_level", not "level": slog's JSON handler
				// writes its own "level" key, and a JSON object with two
				// "level" keys loses one in many log pipelines.
				args = append(args, "half_width", *r.HalfWidth, "confidence_level", r.Level)
			} else {
				args = append(args, "interval", "up to the whole range")
			}
			if r.Auto {
				args = append(args, "auto", true)
			}
			out = append(out, SizingLine{Msg: "plan: " + a.Aggregate + "." + r.Series, Args: args})
		}
		if d, ok := aggregateNamed(a.Aggregate).(unsizedDeriver); ok && !slices.ContainsFunc(a.Series, func(r SeriesSizing) bool { return r.Mechanism == schema.DerivedMechanism }) {
			series, interval := d.unsizedDerived()
			out = append(out, SizingLine{Msg: "plan: " + a.Aggregate + "." + series, Args: []any{"aggregate", a.Aggregate, "series", series,
				"mechanism", schema.DerivedMechanism, "interval", interval}})
		}
	}
	if sel := s.Selection; sel != nil {
		out = append(out, SizingLine{Msg: "plan: group selection", Args: []any{"mechanism", sel.Mechanism, "scale", sel.Scale,
			"threshold", sel.Threshold, "units_for_50pct", sel.Units50, "units_for_95pct", sel.Units95,
			"hint", "a group is released in a window only if its units + noise reach the threshold; see `dpstream plan`"}})
	}
	return out
}

// unsizedDeriver is an aggregate whose derived series the start-up log
// names even without a group size (when Sizing has no derived series for
// it): the series and, in words, its interval.
type unsizedDeriver interface {
	unsizedDerived() (series, interval string)
}

// SizingLine is one start-up log line of the plan summary.
type SizingLine struct {
	Msg  string
	Args []any
}

// logSizing writes the plan summary to the start-up log.
func (o *Operator) logSizing() {
	for _, l := range o.Sizing().LogAttrs() {
		o.log.Info(l.Msg, l.Args...)
	}
	o.log.Debug("accounting note", "note", o.plan.note)
}
