package operator

// aggregate.go is the vocabulary of the released aggregates: one type per
// aggregate, each in its own file agg_<name>.go (the shape of Google DP
// Go's dpagg, one type per aggregation), and the table that registers them
// by name. An aggregate knows
//
//   - the window state it reads (enable: the windows.Config switches),
//   - its parts: the noised vectors, each with its sensitivity taken from
//     the bounds (windows.Sensitivities) and whether it holds integers,
//   - how one group's release is drawn: the noise of every part and the
//     post-processing of the noised parts into derived series (the mean
//     from the centred sum and the count, the variance and standard
//     deviation, the quantiles from the tree),
//   - what `dpstream plan` expects of its series for an assumed group size,
//   - its sentence in the accounting note, and whether its releases carry
//     a running total (windows.running, running.go).
//
// The planner (buildPlan) and the release path (releaseWindowAt) iterate
// over the configured aggregates through this table and never switch on
// a name. Adding an aggregate is one new file with its type and one line
// in aggregateTable (and its name in the configuration's knownAggregates,
// with its requirements in Config.Validate).

import (
	"math"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// aggregator is one kind of released aggregate (see aggregate.go).
type aggregator interface {
	// name is the aggregate's name in windows.aggregates and in releases.
	name() string
	// kind is the release kind (schema.Release.Kind).
	kind() schema.Kind
	// enable turns on in w the window state the aggregate reads.
	enable(w *windows.Config, c Config, numBuckets int)
	// valued reports whether the aggregate reads the values clamped to
	// [schema.lower, schema.upper] (the bounds then enter the release).
	valued() bool
	// parts lists the noised vectors of one group's release, in release
	// order, with their sensitivities; specsOf fills in the aggregate's
	// name and configured mechanism.
	parts(sens windows.Sensitivities) []partSpec
	// complete finishes the aggregate's plan once its noises are
	// calibrated (beta: 1 − the configured confidence).
	complete(ap *aggPlan, c Config, beta float64) error
	// release draws the noise of one group's release from s, in the order
	// of the parts, and returns the release's series in schema order.
	release(p *plan, ap *aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error)
	// expect says what a group of units units, each with events events
	// (at least 1), releases (the sizing of `dpstream plan`); nil: no
	// expected values.
	expect(p *plan, ap *aggPlan, units, events float64) []seriesExpectation
	// note is the aggregate's sentence in the accounting note ("": none),
	// starting with "; ".
	note(ap *aggPlan) string
	// running reports whether the aggregate's releases carry a running
	// total with windows.running (running.go).
	running() bool
}

// variant is implemented by an aggregate released by one of several
// mechanisms the configuration chooses between (the quantiles: the tree or
// the exponential mechanism): configuredAggregates uses the type variant
// returns for c.
type variant interface {
	variant(c Config) aggregator
}

// aggregateTable registers every aggregate, in the order of
// knownAggregates.
var aggregateTable = []aggregator{
	countAgg{}, histogramAgg{}, sumAgg{}, meanAgg{}, unitsAgg{}, varianceAgg{}, quantilesAgg{},
}

// aggregateNamed returns the registered aggregate called name (nil: none;
// Config.Validate refuses unknown names before a plan is built).
func aggregateNamed(name string) aggregator {
	for _, a := range aggregateTable {
		if a.name() == name {
			return a
		}
	}
	return nil
}

// configuredAggregates returns the registered aggregates of c, in the
// configured order (unknown names, refused by Config.Validate, are left
// out).
func configuredAggregates(c Config) []aggregator {
	out := make([]aggregator, 0, len(c.Windows.Aggregates))
	for _, name := range c.Windows.Aggregates {
		if a := aggregateNamed(name); a != nil {
			if v, ok := a.(variant); ok {
				a = v.variant(c)
			}
			out = append(out, a)
		}
	}
	return out
}

// readsValues reports whether any configured aggregate of c reads the
// clamped values (so the release carries the value bounds).
func readsValues(c Config) bool {
	for _, a := range configuredAggregates(c) {
		if a.valued() {
			return true
		}
	}
	return false
}

// partSpec is one noised vector before calibration.
type partSpec struct {
	agg, series string
	configured  string // the configured mechanism (specsOf)
	integer     bool   // integer values (counts), else real values (sums)
	sens        windows.Sensitivity
	// intervals is the number of the aggregate's intervals a derived
	// series combines by the union bound (0 or 1: none): each part's
	// interval is at level 1 − β/intervals.
	intervals int
	// exactAuto: "auto" compares only the exact integer mechanisms
	// (autoCandidates).
	exactAuto bool
	// exactOnly, when not empty, refuses a configured mechanism that is
	// not exact integer noise, with this reason.
	exactOnly string
	// pureL0, when set, is the number of coordinates the calibration
	// composes under pure ε (a budget with δ = 0) in place of L0: L1/L∞,
	// for a vector whose moves are bounded in L1 more tightly than by
	// L0·L∞ (the quantile tree: one shift of at most L∞ per level and
	// group). Pure ε of exact integer noise depends on the moves only
	// through L1 (the privacy loss of discrete Laplace noise under an
	// integer shift k is at most ‖k‖₁/t), so it is exact there. With
	// δ > 0 the accountants compose per-coordinate profiles and L0 stays.
	pureL0 float64
	// deltaL0, when set, is the number of coordinates the calibration
	// composes with δ > 0 in place of L0: the quantiles' selections under
	// a binding total bound, packed into groups that cost at most one
	// selection's ε each (agg_quantile_total.go, selectPacked).
	deltaL0 float64
	// norms: with δ > 0, the part's L1 and L2 (sens.L1, sens.L2) bound
	// one unit's moves per window more tightly than L0·L∞ and √L0·L∞ (the
	// quantile tree: at most L∞ per level and group, G·D·L∞ in all), and
	// are passed to the accountants as privacy.Part.L1/L2 like a total
	// bound's (vectorNoise.totalNorms). Pure ε uses pureL0 instead.
	norms bool
	// selection: the part is not noise but pure ε-DP selections, one per
	// coordinate, each (L∞/scale)-DP (privacy.Selection; the quantiles'
	// exponential mechanism): its mechanism is fixed, whatever is
	// configured.
	selection bool
}

// coords returns the number of coordinates the calibration composes for
// one window of s under a budget with the given δ (see pureL0 and
// deltaL0).
func (s partSpec) coords(delta float64) int {
	if s.pureL0 > 0 && delta == 0 {
		return int(math.Ceil(s.pureL0))
	}
	if s.deltaL0 > 0 && delta > 0 {
		return int(math.Ceil(s.deltaL0))
	}
	return int(math.Ceil(s.sens.L0))
}

// aggBase gives an aggregate the defaults: no values read, nothing to
// complete, no expected values, no note, no running total.
type aggBase struct{}

func (aggBase) valued() bool                                                 { return false }
func (aggBase) complete(*aggPlan, Config, float64) error                     { return nil }
func (aggBase) expect(*plan, *aggPlan, float64, float64) []seriesExpectation { return nil }
func (aggBase) note(*aggPlan) string                                         { return "" }
func (aggBase) running() bool                                                { return false }

// scalarRelease releases the single noised value v of a one-part
// aggregate (count, sum, units).
func scalarRelease(p *plan, ap *aggPlan, v float64, s *rng.Stream) ([]schema.Series, error) {
	sr, err := p.noised(&ap.noises[0], []float64{v}, s, nil)
	return []schema.Series{sr}, err
}
