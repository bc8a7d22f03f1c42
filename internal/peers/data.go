package main

// data.go: the three settings of issue 20 and their synthetic data, a
// deterministic function of the setting and the seed, shared by every
// library measured (the Python script reads the CSV that WriteCSV writes).

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"

	"github.com/dpstream/dpstream/internal/demo"
)

// ErrData wraps problems with a setting or its data.
var ErrData = errors.New("peers: data")

// Value bounds of issue 20: every value is clamped to [Lower, Upper].
const (
	Lower = 0.0
	Upper = 100.0
)

// Categories are the histogram cells, with CategoryWeights the probability
// of each per event (made up: unequal so cells differ in size).
var (
	Categories      = []string{"a", "b", "c", "d"}
	CategoryWeights = []float64{0.5, 0.25, 0.15, 0.1}
)

// Ranks are the quantile ranks measured (issue 20: p50, p90, p99).
var Ranks = []float64{0.5, 0.9, 0.99}

// Setting is one of issue 20's settings: Units units, each with between
// MinEvents and MaxEvents events (uniformly), a per-window budget (Epsilon,
// Delta) and at most Bound events per unit and window (the bound on the
// events a unit contributes to the count, the sum, the mean, the variance
// and the quantiles, and per histogram cell).
type Setting struct {
	Name                 string
	Units                int
	MinEvents, MaxEvents int
	Epsilon, Delta       float64
	Bound                int
}

// Settings are S1, S2 and S3 of issue 20.
var Settings = []Setting{
	{Name: "S1", Units: 10_000, MinEvents: 1, MaxEvents: 1, Epsilon: 1, Delta: 1e-6, Bound: 1},
	{Name: "S2", Units: 1_000, MinEvents: 1, MaxEvents: 5, Epsilon: 0.5, Delta: 0, Bound: 5},
	{Name: "S3", Units: 100_000, MinEvents: 1, MaxEvents: 5, Epsilon: 4, Delta: 1e-6, Bound: 5},
}

// Cells is the number of histogram cells one unit may touch (the L0 bound
// of the histogram): all of them, or fewer when a unit has fewer events.
func (s Setting) Cells() int { return min(len(Categories), s.Bound) }

// Event is one synthetic event. Value is the raw value (it may lie outside
// [Lower, Upper]; every library clamps it).
type Event struct {
	Unit     int
	Value    float64
	Category int
}

// Data is a setting's synthetic data: the events in a fixed shuffled order
// and the exact aggregates after clamping (no unit exceeds a bound, so
// contribution bounding drops nothing and the truth is exact).
type Data struct {
	Setting Setting
	Events  []Event
	Truth   Truth
}

// Truth holds the exact aggregates of the clamped values.
type Truth struct {
	Count    float64   // events
	Units    float64   // distinct units
	Sum      float64   // sum of clamped values
	Mean     float64   // Sum / Count
	Variance float64   // population variance of the clamped values
	Hist     []float64 // events per category
	Sorted   []float64 // clamped values, sorted (for quantiles)
}

// Value distribution: log-normal with these parameters of the underlying
// normal (made up: median e^2.9 ≈ 18.2, p99 ≈ 82, about 0.4% of values
// above Upper and clamped, so every measured quantile lies inside the
// bounds). Values are not rounded: ties would put a floor under every
// library's rank error (a released value can fall next to a block of equal
// values but not on it); the CSV writes them exactly (shortest
// round-trip decimal).
const (
	logMean  = 2.9
	logSigma = 0.65
)

// Generate returns the synthetic data of s for seed: a pure function of
// both.
func Generate(s Setting, seed uint64) (*Data, error) {
	if s.Units < 1 || s.MinEvents < 1 || s.MaxEvents < s.MinEvents || s.MaxEvents > s.Bound {
		return nil, fmt.Errorf("%w: setting %s: need units ≥ 1 and 1 ≤ min events ≤ max events ≤ bound", ErrData, s.Name)
	}
	r := rand.New(rand.NewPCG(seed, uint64(s.Units)))
	var evs []Event
	for u := range s.Units {
		k := s.MinEvents + r.IntN(s.MaxEvents-s.MinEvents+1)
		for range k {
			v := math.Exp(logMean + logSigma*r.NormFloat64())
			evs = append(evs, Event{Unit: u, Value: v, Category: demo.Pick(r, CategoryWeights)})
		}
	}
	r.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	d := &Data{Setting: s, Events: evs}
	d.Truth = truthOf(evs, s.Units)
	return d, nil
}

// Clamp clamps v to [Lower, Upper].
func Clamp(v float64) float64 { return min(max(v, Lower), Upper) }

// truthOf computes the exact aggregates of evs (units 0..units-1, each
// with at least one event).
func truthOf(evs []Event, units int) Truth {
	t := Truth{Units: float64(units), Hist: make([]float64, len(Categories))}
	for _, e := range evs {
		v := Clamp(e.Value)
		t.Count++
		t.Sum += v
		t.Hist[e.Category]++
		t.Sorted = append(t.Sorted, v)
	}
	slices.Sort(t.Sorted)
	t.Mean = t.Sum / t.Count
	for _, v := range t.Sorted {
		t.Variance += (v - t.Mean) * (v - t.Mean)
	}
	t.Variance /= t.Count
	return t
}

// Quantile returns the exact r-quantile: the ⌈rN⌉-th smallest value (at
// least the first), as the dpstream demo defines it.
func (t *Truth) Quantile(r float64) float64 {
	k := max(1, int(math.Ceil(r*float64(len(t.Sorted)))))
	return t.Sorted[k-1]
}

// RankError returns how far rank r·N lies from the ranks x takes among the
// sorted values: 0 when x is a valid r-quantile, else the distance in
// events from r·N to the interval [values below x, values at or below x].
func (t *Truth) RankError(r, x float64) float64 {
	n := float64(len(t.Sorted))
	below := float64(sort.SearchFloat64s(t.Sorted, x))
	atOrBelow := float64(sort.Search(len(t.Sorted), func(i int) bool { return t.Sorted[i] > x }))
	return math.Max(0, math.Max(below-r*n, r*n-atOrBelow))
}

// WriteCSV writes the events as CSV (header unit,value,category; the value
// raw, as generated) for the OpenDP script.
func (d *Data) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"unit", "value", "category"}); err != nil {
		return fmt.Errorf("%w: writing CSV: %v", ErrData, err)
	}
	for _, e := range d.Events {
		rec := []string{strconv.Itoa(e.Unit), strconv.FormatFloat(e.Value, 'g', -1, 64), Categories[e.Category]}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("%w: writing CSV: %v", ErrData, err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("%w: writing CSV: %v", ErrData, err)
	}
	return nil
}
