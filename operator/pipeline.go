package operator

// pipeline.go is the glue between the leaf packages: it maps the operator's
// config onto schema.Config and windows.Config, calibrates the noise of
// every released vector once at start, and turns a closed windows.Window
// into schema.Release messages. API drift in schema, windows or privacy
// should only touch this file.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// noiseDomain prefixes every noise stream id, so that streams of this
// derivation never coincide with streams used elsewhere with the same key.
const noiseDomain = "dpstream/release/v1"

// windowsConfig maps the operator config onto windows.Config.
func windowsConfig(c Config, numBuckets int) windows.Config {
	w := windows.Config{
		Size:            c.Windows.Size,
		Offset:          c.Windows.Offset,
		AllowedLateness: c.Windows.AllowedLateness,
		IdleTimeout:     c.Windows.IdleTimeout,
		EventLevel:      c.Schema.UnitField == "",
		MaxGroups:       c.Bounds.MaxGroups,
		MaxBuckets:      c.Bounds.MaxBuckets,
		MaxPerBucket:    c.Bounds.MaxPerBucket,
		MaxValues:       c.Bounds.MaxValues,
	}
	for _, a := range c.Windows.Aggregates {
		switch a {
		case AggHistogram:
			w.Histogram, w.NumBuckets = true, numBuckets
		case AggCount:
			w.Count = true
		case AggSum:
			w.Sum = true
		case AggMean:
			w.Mean = true
		}
	}
	if w.Sum || w.Mean {
		w.Lower, w.Upper = c.Schema.Lower, c.Schema.Upper
	}
	return w
}

// vectorNoise is the calibrated noise of one released vector.
type vectorNoise struct {
	series   string // schema series name
	mech     privacy.Mechanism
	cal      privacy.Calibration
	sens     windows.Sensitivity
	ints     bool    // integer-valued noise (discrete mechanisms)
	half     float64 // half-width of the (1−β) interval of one value
	beta     float64 // the β the half-width is for
	perCoord string  // how the vector was calibrated, for the note
}

// aggPlan is how one aggregate is released.
type aggPlan struct {
	name   string
	kind   schema.Kind
	noises []vectorNoise // one per noised series, in schema order
}

// selection is DP group selection by Laplace thresholding of the number of
// units per group: a group is released only if units + Lap(scale) ≥
// threshold. The noisy unit counts are not published.
type selection struct {
	scale, threshold float64
}

// plan is everything decided at start about releasing a window.
type plan struct {
	aggs         []aggPlan
	sel          *selection // nil: groups are public (no group-by, or a public list)
	eps, delta   float64    // the per-window budget
	note         string
	labels       []string // histogram bucket labels
	groupFields  []string
	publicGroups []string // canonical group keys, sorted; nil if not public
	unit         string
	bounds       schema.Bounds
	mid          float64 // centre of the value range (means)
	lower, upper float64
	sens         windows.Sensitivities
	horizon      time.Duration
	horizonB     schema.Budget
	offset, size int64 // ms
}

// isLaplaceFamily: mechanisms whose vector version is calibrated with the
// L1 sensitivity directly (pure ε, valid in any dimension).
func vectorRule(name string) string {
	switch {
	case name == "gaussian":
		return "l2" // analytic Gaussian is valid in any dimension with L2
	default:
		return "per-coordinate"
	}
}

// calibrateVector calibrates mechanism m for a vector with sensitivity s
// under budget (eps, delta): the analytic Gaussian with the L2 sensitivity;
// every other mechanism per coordinate by basic composition over the L0
// coordinates one unit can move, each with (eps/L0, delta/L0) and Δ = L∞
// (for Laplace this equals the L1 calibration). Never a single p-norm for
// other noise (DESIGN.md §3; SEEDS.md erratum 1).
func calibrateVector(m privacy.Mechanism, eps, delta float64, s windows.Sensitivity) (privacy.Calibration, string, error) {
	if !(s.L0 >= 1) || !(s.Linf > 0) {
		return privacy.Calibration{}, "", fmt.Errorf("operator: vector sensitivity L0=%g, L∞=%g cannot be calibrated", s.L0, s.Linf)
	}
	if vectorRule(m.Name()) == "l2" {
		c, err := m.Calibrate(eps, delta, s.L2)
		return c, fmt.Sprintf("%s on L2=%g", m.Name(), s.L2), err
	}
	// Round the per-coordinate budget down (towards more noise).
	ec := math.Nextafter(eps/s.L0, 0)
	dc := 0.0
	if delta > 0 {
		dc = math.Nextafter(delta/s.L0, 0)
	}
	c, err := m.Calibrate(ec, dc, s.Linf)
	return c, fmt.Sprintf("%s per coordinate (ε/%g, δ/%g, Δ=L∞=%g)", m.Name(), s.L0, s.L0, s.Linf), err
}

func isInteger(m privacy.Mechanism) bool {
	return strings.HasPrefix(m.Name(), "discrete-")
}

// newPlan calibrates everything at start; any infeasible budget is an error
// here, not at the first window.
func newPlan(c Config, dec *schema.Decoder, wcfg windows.Config) (*plan, error) {
	sens, err := wcfg.Sensitivities()
	if err != nil {
		return nil, err
	}
	eps, delta, note := c.WindowBudget()
	p := &plan{
		eps: eps, delta: delta, sens: sens,
		groupFields: slices.Clone(c.Schema.GroupBy),
		unit:        c.Schema.UnitField,
		offset:      c.Windows.Offset.Milliseconds(),
		size:        c.Windows.Size.Milliseconds(),
		horizon:     c.Privacy.Horizon,
		horizonB:    schema.Budget{Epsilon: c.Privacy.HorizonEpsilon, Delta: c.Privacy.HorizonDelta},
	}
	if h := dec.Config().Histogram; h != nil {
		p.labels = h.Labels()
	}
	p.bounds = schema.Bounds{
		MaxGroups: int64(c.Bounds.MaxGroups), MaxBuckets: int64(c.Bounds.MaxBuckets),
		MaxPerBucket: int64(c.Bounds.MaxPerBucket), MaxValues: int64(c.Bounds.MaxValues),
	}
	if wcfg.Sum || wcfg.Mean {
		p.bounds.Lower, p.bounds.Upper = c.Schema.Lower, c.Schema.Upper
		p.lower, p.upper = c.Schema.Lower, c.Schema.Upper
		p.mid = c.Schema.Lower/2 + c.Schema.Upper/2
	}
	if len(c.Privacy.PublicGroups) > 0 {
		for _, g := range c.Privacy.PublicGroups {
			p.publicGroups = append(p.publicGroups, schema.MakeGroup(g...))
		}
		slices.Sort(p.publicGroups)
		p.publicGroups = slices.Compact(p.publicGroups)
	}
	// Basic composition: the window's (ε, δ) is split evenly over the
	// noised parts: each aggregate, plus group selection when the group
	// keys are not public. A mean's share is split again over its sum and
	// count.
	parts := len(c.Windows.Aggregates)
	needSel := len(c.Schema.GroupBy) > 0 && p.publicGroups == nil
	if needSel {
		parts++
	}
	ea := math.Nextafter(eps/float64(parts), 0)
	da := 0.0
	if delta > 0 {
		da = math.Nextafter(delta/float64(parts), 0)
	}
	beta := 1 - c.Privacy.Confidence
	for _, a := range c.Windows.Aggregates {
		m, err := privacy.Parse(c.Privacy.MechanismFor(a))
		if err != nil {
			return nil, err
		}
		ap := aggPlan{name: a}
		type vec struct {
			series string
			s      windows.Sensitivity
		}
		var vecs []vec
		switch a {
		case AggHistogram:
			ap.kind, vecs = schema.KindHistogram, []vec{{schema.SeriesCounts, sens.Histogram}}
		case AggCount:
			ap.kind, vecs = schema.KindCount, []vec{{schema.SeriesCount, sens.Count}}
		case AggSum:
			ap.kind, vecs = schema.KindSum, []vec{{schema.SeriesSum, sens.Sum}}
		case AggMean:
			ap.kind, vecs = schema.KindMean, []vec{{schema.SeriesSum, sens.MeanSum}, {schema.SeriesCount, sens.Values}}
		}
		ev, dv := ea, da
		if len(vecs) > 1 {
			ev = math.Nextafter(ea/float64(len(vecs)), 0)
			if da > 0 {
				dv = math.Nextafter(da/float64(len(vecs)), 0)
			}
		}
		// The mean's interval combines two intervals: give each β/2.
		vb := beta / float64(len(vecs))
		for _, v := range vecs {
			cal, how, err := calibrateVector(m, ev, dv, v.s)
			if err != nil {
				return nil, fmt.Errorf("operator: %s (%s): %w", a, m.Name(), err)
			}
			if !(cal.Scale > 0) || math.IsInf(cal.Scale, 0) {
				return nil, fmt.Errorf("operator: %s (%s): calibration gave scale %g", a, m.Name(), cal.Scale)
			}
			// Per value: a union bound over the vector is not needed, the
			// interval is per published value.
			h := m.HalfWidth(cal.Scale, vb)
			if math.IsNaN(h) || math.IsInf(h, 0) {
				return nil, fmt.Errorf("operator: %s (%s): no finite confidence interval at level %g", a, m.Name(), 1-vb)
			}
			ap.noises = append(ap.noises, vectorNoise{series: v.series, mech: m, cal: cal, sens: v.s,
				ints: isInteger(m), half: h, beta: vb, perCoord: how})
		}
		p.aggs = append(p.aggs, ap)
	}
	var notes []string
	notes = append(notes, note)
	notes = append(notes, fmt.Sprintf("basic composition: window budget (ε=%g, δ=%g) split evenly over %d parts (ε=%g, δ=%g each)", eps, delta, parts, ea, da))
	for _, ap := range p.aggs {
		for _, n := range ap.noises {
			notes = append(notes, fmt.Sprintf("%s.%s: %s, scale %g", ap.name, n.series, n.perCoord, n.cal.Scale))
		}
	}
	if needSel {
		if !(da > 0) {
			return nil, fmt.Errorf("%w: group_by without privacy.public_groups needs δ > 0 for private group selection (or list the public groups)", ErrConfig)
		}
		us := sens.Units
		lap, err := privacy.Laplace{}.Calibrate(ea, 0, us.L1)
		if err != nil {
			return nil, fmt.Errorf("operator: group selection: %w", err)
		}
		// A unit present in only one of two neighbouring streams can create
		// at most L0 groups, each with one unit; each is released with
		// probability P(1 + Lap(b) ≥ τ) = ½·exp(−(τ−1)/b). Summing to δ_sel:
		// τ = 1 + b·ln(L0/(2δ_sel)), at least 1. The noisy unit counts of
		// groups present in both are ε_sel-DP (L1 sensitivity).
		tau := 1 + lap.Scale*math.Log(us.L0/(2*da))
		tau = math.Max(1, math.Nextafter(tau, math.Inf(1)))
		p.sel = &selection{scale: lap.Scale, threshold: tau}
		notes = append(notes, fmt.Sprintf("groups selected privately: units + Laplace(%g) ≥ %g (ε=%g, δ=%g)", lap.Scale, tau, ea, da))
	}
	p.note = strings.Join(notes, "; ")
	return p, nil
}

// releaseID names a window's release: the release namespace and the window
// start in RFC 3339 (UTC, milliseconds), e.g.
// "dpstream-meters/2024-05-01T12:00:00.000Z".
func releaseID(group string, start int64) string {
	return group + "/" + time.UnixMilli(start).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// noiseID is the id of the noise stream of one release message: the domain
// and the message key (which holds the release id, so the namespace). Every
// message has its own stream, so its noise does not depend on which other
// messages are published or in which order, and re-publishing a key gives
// identical bytes.
func noiseID(key string) string {
	return noiseDomain + "\x00" + key
}

// outMsg is one encoded release ready to write.
type outMsg struct {
	key   string
	value []byte
	rel   schema.Release
}

// releaseWindow builds the releases of w, skipping keys already published.
// It returns the messages to write, the number skipped as already
// published, and the number of groups withheld by selection.
func (p *plan) releaseWindow(w *windows.Window, key privacy.Key, namespace, instance string,
	published map[string]int64) (out []outMsg, dup, withheld int, err error) {
	id := releaseID(namespace, w.Start)
	groups := p.groupsOf(w)
	var selected []windows.Group
	for _, g := range groups {
		if p.sel != nil {
			s := privacy.NewStream(key, noiseID(schema.ReleaseKey(id, "_select", mustValues(g.Key)...)))
			noisy := float64(g.Units) + privacy.Laplace{}.Sample(s, p.sel.scale)
			if !(noisy >= p.sel.threshold) {
				withheld++
				continue
			}
		}
		selected = append(selected, g)
	}
	spent, hz := p.spent(w.Start)
	for _, ap := range p.aggs {
		for gi := range selected {
			g := &selected[gi]
			vals := mustValues(g.Key)
			k := schema.ReleaseKey(id, ap.name, vals...)
			if _, ok := published[k]; ok {
				dup++
				continue
			}
			r := schema.Release{
				ReleaseID: id, WindowStart: w.Start, WindowEnd: w.End,
				Aggregate: ap.name, Kind: ap.kind,
				Budget: schema.Budget{Epsilon: p.eps, Delta: p.delta},
				Spent:  spent, Horizon: hz,
				Unit: p.unit, Bounds: p.bounds, Instance: instance, Note: p.note,
			}
			for i, f := range p.groupFields {
				r.Group = append(r.Group, schema.GroupValue{Name: f, Value: vals[i]})
			}
			s := privacy.NewStream(key, noiseID(k))
			r.Series = p.series(ap, g, s)
			b, err := schema.EncodeRelease(&r)
			if err != nil {
				return nil, 0, 0, fmt.Errorf("operator: encoding release %s: %w", ap.name, err)
			}
			if r.Key() != k {
				return nil, 0, 0, errors.New("operator: release key mismatch (schema.ReleaseKey changed?)")
			}
			out = append(out, outMsg{key: k, value: b, rel: r})
		}
	}
	return out, dup, withheld, nil
}

// groupsOf returns the groups to consider releasing: the public list (absent
// groups with zero aggregates), the single group of an aggregation without
// group-by, or the groups the window saw (subject to selection).
func (p *plan) groupsOf(w *windows.Window) []windows.Group {
	var keys []string
	switch {
	case p.publicGroups != nil:
		keys = p.publicGroups
	case len(p.groupFields) == 0:
		keys = []string{schema.MakeGroup()}
	default:
		return w.Groups
	}
	out := make([]windows.Group, 0, len(keys))
	i := 0
	for _, k := range keys {
		for i < len(w.Groups) && w.Groups[i].Key < k {
			i++
		}
		if i < len(w.Groups) && w.Groups[i].Key == k {
			out = append(out, w.Groups[i])
		} else {
			out = append(out, p.emptyGroup(k))
		}
	}
	return out
}

func (p *plan) emptyGroup(k string) windows.Group {
	g := windows.Group{Key: k}
	if len(p.labels) > 0 {
		g.Histogram = make([]int64, len(p.labels))
	}
	return g
}

func mustValues(group string) []string {
	v, err := schema.GroupValues(group)
	if err != nil {
		// Group keys come from the decoder or MakeGroup; never here.
		return []string{"?"}
	}
	return v
}

// series draws the noise of one aggregate of one group from s, in the
// order of the schema's series.
func (p *plan) series(ap aggPlan, g *windows.Group, s *privacy.Stream) []schema.Series {
	var out []schema.Series
	switch ap.kind {
	case schema.KindHistogram:
		n := ap.noises[0]
		vals := make([]float64, len(p.labels))
		for i := range vals {
			if i < len(g.Histogram) {
				vals[i] = float64(g.Histogram[i])
			}
		}
		out = append(out, p.noised(n, vals, s, p.labels))
	case schema.KindCount:
		out = append(out, p.noised(ap.noises[0], []float64{float64(g.Count)}, s, nil))
	case schema.KindSum:
		out = append(out, p.noised(ap.noises[0], []float64{g.Sum}, s, nil))
	case schema.KindMean:
		sum := p.noised(ap.noises[0], []float64{g.CentredSum}, s, nil)
		cnt := p.noised(ap.noises[1], []float64{float64(g.Values)}, s, nil)
		out = append(out, sum, cnt, p.mean(sum, cnt))
	}
	return out
}

// noised adds noise to vals and attaches the per-value intervals.
func (p *plan) noised(n vectorNoise, vals []float64, s *privacy.Stream, labels []string) schema.Series {
	sr := schema.Series{
		Name: n.series, Mechanism: n.cal.Mechanism, Scale: n.cal.Scale, Level: 1 - n.beta,
		Sensitivity: schema.Sensitivity{L0: int64(math.Ceil(n.sens.L0)), L1: n.sens.L1, L2: n.sens.L2, LInf: n.sens.Linf},
		Labels:      labels,
	}
	if sr.Mechanism == "" {
		sr.Mechanism = n.mech.Name()
	}
	for _, v := range vals {
		z := n.mech.Sample(s, n.cal.Scale)
		if n.ints {
			x := int64(v) + int64(z)
			sr.Ints = append(sr.Ints, x)
			// Integer noise: the interval is integer too (half rounded up).
			h := math.Ceil(n.half)
			sr.Lo = append(sr.Lo, float64(x)-h)
			sr.Hi = append(sr.Hi, float64(x)+h)
			continue
		}
		x := v + z
		sr.Floats = append(sr.Floats, x)
		sr.Lo = append(sr.Lo, x-n.half)
		sr.Hi = append(sr.Hi, x+n.half)
	}
	return sr
}

// mean derives the mean from the noisy centred sum and count (post-
// processing): mid + sum/count clamped to [lower, upper], with the interval
// obtained from the two intervals (each at level 1−β/2, so together 1−β by
// the union bound); with a count interval reaching 0 the interval is the
// whole range.
func (p *plan) mean(sum, cnt schema.Series) schema.Series {
	clamp := func(x float64) float64 { return math.Min(p.upper, math.Max(p.lower, x)) }
	s, c := sum.Value(0), cnt.Value(0)
	m := p.mid
	if c >= 1 {
		m = clamp(p.mid + s/c)
	}
	lo, hi := p.lower, p.upper
	if cl := cnt.Lo[0]; cl >= 1 {
		ch := cnt.Hi[0]
		cands := []float64{sum.Lo[0] / cl, sum.Lo[0] / ch, sum.Hi[0] / cl, sum.Hi[0] / ch}
		lo, hi = clamp(p.mid+slices.Min(cands)), clamp(p.mid+slices.Max(cands))
	}
	return schema.Series{
		Name: schema.SeriesMean, Mechanism: schema.DerivedMechanism, Level: 1 - 2*(1-sum.Level),
		Floats: []float64{m}, Lo: []float64{math.Min(lo, m)}, Hi: []float64{math.Max(hi, m)},
	}
}

// spent returns the budget spent in the horizon through the window starting
// at start, and the horizon (zero without a horizon budget).
func (p *plan) spent(start int64) (schema.Budget, schema.Horizon) {
	b := schema.Budget{Epsilon: p.eps, Delta: p.delta}
	if p.horizon == 0 {
		return b, schema.Horizon{}
	}
	h := p.horizon.Milliseconds()
	hs := p.offset + floorDiv(start-p.offset, h)*h
	k := (start-hs)/p.size + 1 // windows of this horizon so far, this one included
	return schema.Budget{Epsilon: float64(k) * p.eps, Delta: float64(k) * p.delta},
		schema.Horizon{Start: hs, End: hs + h, Budget: p.horizonB}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// seedFromKey derives the windows package's sampling seed from the secret
// key, so contribution bounding is reproducible across restarts and not
// predictable without the key.
func seedFromKey(k privacy.Key) [32]byte {
	s := privacy.NewStream(k, "dpstream/windows-seed/v1")
	var seed [32]byte
	for i := 0; i < 32; i += 8 {
		v := s.Uint64()
		for j := range 8 {
			seed[i+j] = byte(v >> (8 * j))
		}
	}
	return seed
}
