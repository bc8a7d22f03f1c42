package operator

// sizing_suggest.go is the part of sizing.go that searches for changes:
// Sizing.Suggest and the single changes it evaluates (more units, a longer
// window, a larger ε, tighter bounds, public groups), each with the plan
// `run` would calibrate.

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Suggest fills s.Target and s.Suggestions: for the configuration c whose
// sizing s is, each single change that reaches the target relative
// half-width (or, if none of its values does, its best value): more units
// per group (a fact of the data), a longer window (assumed to gather
// proportionally more units per group, events per unit unchanged), a
// larger ε, bounds tightened to the events per unit (and a total bound,
// suggestTotal), and public groups
// (no selection threshold, and its share of the budget goes to the noise).
// Each is evaluated with the plan `run` would calibrate.
func (s *Sizing) Suggest(c Config, target float64) error {
	if !(target > 0) {
		return fmt.Errorf("%w: target must be a relative error > 0 (e.g. 0.1)", ErrConfig)
	}
	s.Target = target
	sz := s.Sizes
	if sz.UnitsPerGroup <= 0 {
		return fmt.Errorf("%w: --target needs --units-per-group (the relative error depends on the group size)", ErrConfig)
	}
	if s.Worst == nil {
		return nil
	}
	worst := func(c Config, sz Sizes) (float64, bool) {
		p, err := planFor(c)
		if err != nil {
			return 0, false
		}
		w := p.sizing(c, sz).Worst
		if w == nil {
			return 0, false
		}
		return *w, true
	}
	add := func(change, key, value string, rel float64) {
		s.Suggestions = append(s.Suggestions, Suggestion{Change: change, Setting: key, Value: value, Relative: rel, Reaches: rel <= target})
	}
	p, err := planFor(c)
	if err != nil {
		return err
	}
	// More units per group: the plan does not change.
	relAt := func(n float64) float64 {
		w := p.sizing(c, Sizes{UnitsPerGroup: n, EventsPerUnit: sz.EventsPerUnit}).Worst
		if w == nil {
			return math.Inf(1)
		}
		return *w
	}
	if n, ok := smallestInt(int(math.Ceil(sz.UnitsPerGroup)), 1<<40, func(n int) bool { return relAt(float64(n)) <= target }); ok {
		add(fmt.Sprintf("groups of at least %d units per window (a fact of the data, or of a longer window)", n), "data", strconv.Itoa(n), relAt(float64(n)))
	}
	s.suggestLonger(c, worst, add)
	s.suggestEpsilon(c, worst, add)
	// Bounds tightened to the events per unit.
	if c.Schema.UnitField != "" && sz.EventsPerUnit > 0 {
		m := int(math.Ceil(sz.EventsPerUnit))
		d := c
		var keys []string
		if d.Bounds.MaxValues > m {
			d.Bounds.MaxValues = m
			keys = append(keys, "bounds.max_values")
		}
		if d.Bounds.MaxPerBucket > m {
			d.Bounds.MaxPerBucket = m
			keys = append(keys, "bounds.max_per_bucket")
		}
		if len(keys) > 0 {
			if r, ok := worst(d, sz); ok {
				add(fmt.Sprintf("%s %d (each unit adds about %g events; no contribution is clipped)", joinKeys(keys), m, sz.EventsPerUnit),
					joinKeys(keys), strconv.Itoa(m), r)
			}
		}
	}
	suggestTotal(c, sz, worst, add)
	// Public groups.
	if p.sel != nil {
		d := c
		g := make([]string, len(c.Schema.GroupBy))
		for i := range g {
			g[i] = "example"
		}
		d.Privacy.PublicGroups = [][]string{g}
		if r, ok := worst(d, sz); ok {
			add("list privacy.public_groups (every listed group is released in every window, no threshold; its ε and δ share goes to the noise)",
				"privacy.public_groups", "[[...], ...]", r)
		}
	}
	return nil
}

// suggestLonger is Suggest's change to a longer window: k times as long
// with k times the units per group (within a horizon, k divides the
// windows per horizon). worst evaluates a configuration, add records a
// suggestion.
func (s *Sizing) suggestLonger(c Config, worst func(Config, Sizes) (float64, bool), add func(change, key, value string, rel float64)) {
	sz, target := s.Sizes, s.Target
	longer := func(k int) (Config, Sizes) {
		d := c
		d.Windows.Size = c.Windows.Size * time.Duration(k)
		return d, Sizes{UnitsPerGroup: sz.UnitsPerGroup * float64(k), EventsPerUnit: sz.EventsPerUnit}
	}
	okLonger := func(k int) bool {
		if c.Privacy.Horizon != 0 && (k > s.Budget.WindowsPerHorizon || s.Budget.WindowsPerHorizon%k != 0) {
			return false
		}
		d, dz := longer(k)
		r, ok := worst(d, dz)
		return ok && r <= target
	}
	if c.Privacy.Horizon != 0 {
		// Divisors of the windows per horizon, in order.
		for k := 2; k <= s.Budget.WindowsPerHorizon; k++ {
			if s.Budget.WindowsPerHorizon%k == 0 && okLonger(k) {
				d, dz := longer(k)
				r, _ := worst(d, dz)
				add(fmt.Sprintf("windows.size %s (%d× as long; assumes %d× the units per group, events per unit unchanged)", d.Windows.Size, k, k),
					"windows.size", d.Windows.Size.String(), r)
				break
			}
		}
	} else if k, ok := smallestInt(2, 1<<20, okLonger); ok {
		d, dz := longer(k)
		r, _ := worst(d, dz)
		add(fmt.Sprintf("windows.size %s (%d× as long; assumes %d× the units per group, events per unit unchanged)", d.Windows.Size, k, k),
			"windows.size", d.Windows.Size.String(), r)
	}
}

// suggestEpsilon is Suggest's change to a larger ε (the horizon's with a
// horizon budget), the smallest factor that reaches the target.
func (s *Sizing) suggestEpsilon(c Config, worst func(Config, Sizes) (float64, bool), add func(change, key, value string, rel float64)) {
	sz, target := s.Sizes, s.Target
	ekey := "privacy.epsilon"
	if c.Privacy.Horizon != 0 {
		ekey = "privacy.horizon_epsilon"
	}
	withEps := func(f float64) Config {
		d := c
		if c.Privacy.Horizon != 0 {
			d.Privacy.HorizonEpsilon = c.Privacy.HorizonEpsilon * f
		} else {
			d.Privacy.Epsilon = c.Privacy.Epsilon * f
		}
		return d
	}
	if f, ok := smallestFactor(func(f float64) bool { r, ok := worst(withEps(f), sz); return ok && r <= target }); ok {
		d := withEps(f)
		e := d.Privacy.Epsilon
		if c.Privacy.Horizon != 0 {
			e = d.Privacy.HorizonEpsilon
		}
		r, _ := worst(d, sz)
		add(fmt.Sprintf("%s %s (%.3g× the ε)", ekey, ceil3(e), f), ekey, ceil3(e), r)
	}
}

func joinKeys(keys []string) string {
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += " and "
		}
		out += k
	}
	return out
}

// smallestInt returns the smallest n in [lo, hi] with ok(n), for ok
// monotone (false then true), by doubling then bisection.
func smallestInt(lo, hi int, ok func(int) bool) (int, bool) {
	if ok(lo) {
		return lo, true
	}
	a, b := lo, lo
	for {
		if b >= hi {
			return 0, false
		}
		a, b = b, min(b*2, hi)
		if ok(b) {
			break
		}
	}
	for b-a > 1 {
		mid := a + (b-a)/2
		if ok(mid) {
			b = mid
		} else {
			a = mid
		}
	}
	return b, true
}

// smallestFactor returns the smallest factor f in (1, 10^4] with ok(f),
// for ok monotone, to 2% (rounded up).
func smallestFactor(ok func(float64) bool) (float64, bool) {
	hi := 2.0
	for !ok(hi) {
		hi *= 4
		if hi > 1e4 {
			return 0, false
		}
	}
	lo := 1.0
	for hi/lo > 1.02 {
		mid := math.Sqrt(lo * hi)
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, true
}
