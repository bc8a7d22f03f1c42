package operator

import (
	"math"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// histogramAgg is the histogram aggregate: the count of every bucket of
// schema.histogram per group, one integer vector (a cell per bucket label)
// noised with windows.Sensitivities.Histogram (max_groups × max_buckets
// coordinates, each moved by at most max_per_bucket; with
// max_contributions, L1 and L2 bounded by it too, plan_bounds.go).
type histogramAgg struct{ aggBase }

func (histogramAgg) name() string      { return AggHistogram }
func (histogramAgg) kind() schema.Kind { return schema.KindHistogram }

func (histogramAgg) enable(w *windows.Config, _ Config, numBuckets int) {
	w.Histogram, w.NumBuckets = true, numBuckets
}

func (histogramAgg) parts(sens windows.Sensitivities) []partSpec {
	return []partSpec{{series: schema.SeriesCounts, integer: true, sens: sens.Histogram}}
}

// release noises every bucket (absent cells count 0), labelled.
func (histogramAgg) release(p *plan, ap *aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error) {
	vals := make([]float64, len(p.labels))
	for i := range vals {
		if i < len(g.Histogram) {
			vals[i] = float64(g.Histogram[i])
		}
	}
	sr, err := p.noised(&ap.noises[0], vals, s, p.labels)
	return []schema.Series{sr}, err
}

func (histogramAgg) expect(p *plan, _ *aggPlan, units, events float64) []seriesExpectation {
	// A unit adds at most max_buckets × max_per_bucket events to a
	// group's histogram (and at most max_contributions in all); assumed
	// spread evenly over the buckets.
	nb := float64(max(len(p.labels), 1))
	per := p.totalCap(math.Min(events, float64(p.bounds.MaxBuckets*p.bounds.MaxPerBucket)))
	return []seriesExpectation{{series: schema.SeriesCounts, expected: units * per / nb}}
}
