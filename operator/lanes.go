package operator

// lanes.go releases several measures and histograms of one stream under one
// budget (schema.measures, schema.histograms; issue 22). Each extra measure
// or histogram is a lane: a windows.Tumbling of its own, fed the same
// events as the first (primary) one, that holds only the lane's value
// aggregates (sum, mean, variance of the measure) or its histogram, with
// the per-unit bounds applied by the same keyed sampling (the same seed).
// So a lane's sensitivities are what windows.Sensitivities derives for its
// own configuration, one unit's events move every lane at once, and the
// joint calibration composes the parts of every lane of a window together
// with the primary's: the lanes only add parts to the window's one
// mechanism. Count and units are released once, by the primary lane.
//
// A lane's aggregates are named "<aggregate>:<name>" (sum:voltage,
// histogram:appliance) in releases, keys, metrics and the plan; the
// primary's keep their plain names.

import (
	"slices"
	"strings"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// laneSep separates an aggregate's name from its lane's in a release's
// aggregate name: "sum:voltage".
const laneSep = ":"

// laneValueAggregates are the aggregates a measure lane releases, when
// configured in windows.aggregates.
var laneValueAggregates = []string{AggSum, AggMean, AggVariance, AggQuantiles}

// lane is one extra measure or histogram.
type lane struct {
	name      string         // the measure's or histogram's name
	index     int            // 1 + its position among the lanes (0 is the primary)
	measure   int            // index in schema.measures, or −1
	histogram int            // index in schema.histograms, or −1
	wcfg      windows.Config // the lane's windows
	view      *plan          // what the lane's aggregates read of a plan: bounds, labels, value range
	aggs      []aggregator   // the lane's aggregates (laneAgg), in windows.aggregates order
}

// hasLanes reports whether c configures extra measures or histograms.
func hasLanes(c Config) bool { return laneCount(c) > 0 }

// laneCount is the number of lanes of c: its extra measures and histograms.
func laneCount(c Config) int { return len(c.Schema.Measures) + len(c.Schema.Histograms) }

// lanesOf returns the lanes of c: the measures, then the histograms, in
// configured order. c is valid.
func lanesOf(c Config) ([]*lane, error) {
	var out []*lane
	for i, m := range c.Schema.Measures {
		l := &lane{name: m.Name, measure: i, histogram: -1}
		l.wcfg = laneWindowsConfig(c, 0)
		for _, a := range configuredAggregates(c) {
			if slices.Contains(laneValueAggregates, a.name()) {
				a.enable(&l.wcfg, c, 0)
				l.aggs = append(l.aggs, laneAgg{inner: a, lane: l})
			}
		}
		l.wcfg.Lower, l.wcfg.Upper = m.Lower, m.Upper
		l.view = &plan{lower: m.Lower, upper: m.Upper, mid: m.Lower/2 + m.Upper/2}
		out = append(out, l)
	}
	for i := range c.Schema.Histograms {
		h := &c.Schema.Histograms[i]
		l := &lane{name: h.Name, measure: -1, histogram: i}
		l.wcfg = laneWindowsConfig(c, h.NumBuckets())
		for _, a := range configuredAggregates(c) {
			if a.name() == AggHistogram {
				a.enable(&l.wcfg, c, h.NumBuckets())
				l.aggs = append(l.aggs, laneAgg{inner: a, lane: l})
			}
		}
		l.view = &plan{labels: h.Labels()}
		out = append(out, l)
	}
	for k, l := range out {
		l.index = k + 1
		l.view.maxContrib = c.Bounds.MaxContributions
		l.view.bounds = schema.Bounds{
			MaxGroups: int64(c.Bounds.MaxGroups), MaxBuckets: int64(c.Bounds.MaxBuckets),
			MaxPerBucket: int64(c.Bounds.MaxPerBucket), MaxValues: int64(c.Bounds.MaxValues),
			Lower: l.view.lower, Upper: l.view.upper,
		}
		sens, err := treeSensitivities(l.wcfg, c)
		if err != nil {
			return nil, err
		}
		l.view.sens = sens
	}
	return out, nil
}

// laneWindowsConfig is the primary's windows configuration (geometry,
// bounds, caps) with no aggregate enabled: a lane enables its own.
func laneWindowsConfig(c Config, numBuckets int) windows.Config {
	w := windowsConfig(c, numBuckets)
	w.Histogram, w.NumBuckets, w.Count, w.Sum, w.Mean, w.Units, w.Variance, w.Quantiles = false, 0, false, false, false, false, false, false
	w.TreeBranching, w.TreeDepth, w.Lower, w.Upper = 0, 0, 0, 0
	return w
}

// laneEvent returns e as lane l sees it: the lane's value or bucket in
// place of the primary's.
func (l *lane) laneEvent(e windows.Event, x *schema.Extra) windows.Event {
	e.Bucket, e.Value, e.HasValue = -1, 0, false
	if x == nil {
		return e // not from a decoder with lanes: nothing for the lane
	}
	if l.measure >= 0 && l.measure < len(x.Measures) {
		m := x.Measures[l.measure]
		e.Value, e.HasValue = m.Value, m.Has
	}
	if l.histogram >= 0 && l.histogram < len(x.Buckets) {
		e.Bucket = x.Buckets[l.histogram]
	}
	return e
}

// releasedAggregates returns the aggregates a window of c releases: the
// primary's (configuredAggregates), then every lane's.
func releasedAggregates(c Config) ([]aggregator, error) {
	out := configuredAggregates(c)
	if !hasLanes(c) {
		return out, nil
	}
	lanes, err := lanesOf(c)
	if err != nil {
		return nil, err
	}
	for _, l := range lanes {
		out = append(out, l.aggs...)
	}
	return out, nil
}

// laneAgg is an aggregate of a lane: the primary's aggregate type inner,
// reading the lane's window with the lane's bounds, labels and value range.
type laneAgg struct {
	inner aggregator
	lane  *lane
}

func (a laneAgg) name() string      { return a.inner.name() + laneSep + a.lane.name }
func (a laneAgg) kind() schema.Kind { return a.inner.kind() }
func (a laneAgg) valued() bool      { return a.inner.valued() }
func (a laneAgg) running() bool     { return a.inner.running() }

// enable does nothing: the lane's own windows configuration enables what
// it reads (lanesOf).
func (laneAgg) enable(*windows.Config, Config, int) {}

// parts are the inner aggregate's parts with the lane's sensitivities.
func (a laneAgg) parts(windows.Sensitivities) []partSpec { return a.inner.parts(a.lane.view.sens) }

// complete completes the inner aggregate's plan for the lane's value range
// (the quantiles' tree and candidates span the measure's [lower, upper]).
func (a laneAgg) complete(ap *aggPlan, c Config, beta float64) error {
	if a.lane.measure >= 0 {
		c.Schema.Lower, c.Schema.Upper = a.lane.view.lower, a.lane.view.upper
	}
	return a.inner.complete(ap, c, beta)
}

func (a laneAgg) release(_ *plan, ap *aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error) {
	return a.inner.release(a.lane.view, ap, g, s)
}

func (a laneAgg) expect(_ *plan, ap *aggPlan, units, events float64) []seriesExpectation {
	return a.inner.expect(a.lane.view, ap, units, events)
}

func (a laneAgg) note(ap *aggPlan) string { return a.inner.note(ap) }

// baseAggregate returns the aggregate type's name of a released aggregate
// name: "sum" for "sum:voltage" and for "sum".
func baseAggregate(name string) string {
	base, _, _ := strings.Cut(name, laneSep)
	return base
}

// laneOf returns the lane of an aggregate (nil: the primary's).
func laneOf(a aggregator) *lane {
	if la, ok := a.(laneAgg); ok {
		return la.lane
	}
	return nil
}

// laneGroup returns the group keyed key of lane index (≥ 1) of w, or an
// empty group when the lane's window does not have it (a lane's window
// holds the same groups as the primary's, since it sees the same events;
// an absent group is released as all zeros either way).
func laneGroup(w *windows.Window, index int, key string) windows.Group {
	if index-1 < len(w.Lanes) {
		gs := w.Lanes[index-1].Groups
		lo, hi := 0, len(gs)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if gs[m].Key < key {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo < len(gs) && gs[lo].Key == key {
			return gs[lo]
		}
	}
	return windows.Group{Key: key}
}

// checkLanes reports the problems of the extra measures and histograms
// with the rest of the configuration: each needs an aggregate to release.
func checkLanes(p *problems, c Config) {
	if !hasLanes(c) {
		return
	}
	if len(c.Schema.Measures) > 0 && !slices.ContainsFunc(c.Windows.Aggregates, func(a string) bool { return slices.Contains(laneValueAggregates, a) }) {
		p.addf("schema.measures: need one of %s in windows.aggregates (what the measures release)", strings.Join(laneValueAggregates, ", "))
	}
	if len(c.Schema.Histograms) > 0 && !slices.Contains(c.Windows.Aggregates, AggHistogram) {
		p.addf("schema.histograms: need histogram in windows.aggregates")
	}
}

// laneSizing fills in what `dpstream plan` says of the lanes of c: their
// names and the parts of the one joint calibration (p's).
func laneSizing(b *SizingBudget, c Config, p *plan) {
	if !hasLanes(c) {
		return
	}
	for _, m := range c.Schema.Measures {
		b.Lanes = append(b.Lanes, "measure "+m.Name)
	}
	for _, h := range c.Schema.Histograms {
		b.Lanes = append(b.Lanes, "histogram "+h.Name)
	}
	for _, ap := range p.aggs {
		b.Parts += len(ap.noises)
	}
	if p.sel != nil {
		b.Parts++
	}
}
