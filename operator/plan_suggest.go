package operator

// plan_suggest.go names, for a budget that cannot be calibrated, the
// smallest single change of the configuration that can.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// suggest finds the smallest single change that makes an infeasible budget
// feasible: a larger δ, a larger ε, fewer (longer) windows in the horizon,
// or fewer aggregates. It returns "" when none of these helps.
func suggest(c Config, dec *schema.Decoder, wcfg windows.Config) string {
	ok := func(c Config) bool {
		_, err := buildPlan(c, dec, windowsConfig(c, dec.NumBuckets()), nil)
		return err == nil
	}
	horizon := c.Privacy.Horizon != 0
	ekey, dkey := "privacy.epsilon", "privacy.delta"
	if horizon {
		ekey, dkey = "privacy.horizon_epsilon", "privacy.horizon_delta"
	}
	total, nw := c.TotalBudget()
	with := func(eps, delta float64) Config {
		d := c
		if horizon {
			d.Privacy.HorizonEpsilon, d.Privacy.HorizonDelta = eps, delta
		} else {
			d.Privacy.Epsilon, d.Privacy.Delta = eps, delta
		}
		return d
	}
	var hints []string
	// δ: with δ = 0 only the pure-ε mechanisms work; otherwise bisect on a
	// log scale between the configured δ and 0.5 (larger δ never needs
	// more noise, so every trial is cheaper than the configuration itself).
	if total.Delta == 0 {
		if ok(with(total.Epsilon, 1e-6)) {
			hints = append(hints, fmt.Sprintf("%s must be > 0 (δ = 0 needs exact pure-ε noise: laplace or discrete-laplace)", dkey))
		}
	} else if lo, hi := total.Delta, 0.5; lo < hi && ok(with(total.Epsilon, hi)) {
		hi = bisectLog(lo, hi, 40, func(d float64) bool { return ok(with(total.Epsilon, d)) })
		hints = append(hints, fmt.Sprintf("%s must be ≥ %s", dkey, ceil3(hi)))
	}
	// ε: bisect on a log scale up to 10^6 times the configured ε.
	if lo, hi := total.Epsilon, total.Epsilon*1e6; ok(with(hi, total.Delta)) {
		hi = bisectLog(lo, hi, 60, func(e float64) bool { return ok(with(e, total.Delta)) })
		hints = append(hints, fmt.Sprintf("%s must be ≥ %s", ekey, ceil3(hi)))
	}
	if h := suggestWindows(c, nw, ok); h != "" {
		hints = append(hints, h)
	}
	if h := suggestAggregates(c, ok); h != "" {
		hints = append(hints, h)
	}
	if len(hints) == 0 {
		return ""
	}
	return "smallest feasible change: " + strings.Join(hints, "; or ")
}

// bisectLog returns a point of (lo, hi] within 1% above the smallest x
// with ok(x), by bisection on a log scale in at most n steps (ok monotone:
// false at lo, true at hi).
func bisectLog(lo, hi float64, n int, ok func(float64) bool) float64 {
	for range n {
		mid := math.Sqrt(lo * hi)
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
		if hi/lo < 1.01 {
			break
		}
	}
	return hi
}

// ceil3 formats x > 0 with three significant digits, rounded up: the
// printed bound is never below x (a suggested minimum must be feasible).
func ceil3(x float64) string {
	p := math.Pow(10, math.Floor(math.Log10(x))-2)
	v := math.Ceil(x/p) * p
	for range 4 {
		str := strconv.FormatFloat(v, 'g', 3, 64)
		if y, err := strconv.ParseFloat(str, 64); err == nil && y >= x {
			return str
		}
		v += p
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// suggestWindows is suggest's hint on fewer, longer windows per horizon
// ("": none helps): the largest feasible number of windows among the
// divisors of the current number (each a whole multiple of the current
// window size), by bisection (fewer windows never need more noise). ok
// reports whether a configuration is feasible.
func suggestWindows(c Config, nw int, ok func(Config) bool) string {
	if c.Privacy.Horizon == 0 || nw < 2 {
		return ""
	}
	var divs []int
	for n := 1; n*n <= nw; n++ {
		if nw%n == 0 {
			divs = append(divs, n, nw/n)
		}
	}
	slices.Sort(divs)
	divs = slices.Compact(divs)
	feasible := func(n int) bool {
		d := c
		d.Windows.Size = c.Privacy.Horizon / time.Duration(n)
		return ok(d)
	}
	if !feasible(1) {
		return ""
	}
	lo, hi := 0, len(divs)-1 // feasible(divs[lo]), !feasible(divs[hi])
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if feasible(divs[mid]) {
			lo = mid
		} else {
			hi = mid
		}
	}
	n := divs[lo]
	return fmt.Sprintf("use windows.size of at least %s (%d window(s) per horizon)", c.Privacy.Horizon/time.Duration(n), n)
}

// suggestAggregates is suggest's hint on releasing fewer aggregates ("":
// none helps).
func suggestAggregates(c Config, ok func(Config) bool) string {
	if len(c.Windows.Aggregates) > 1 {
		var drop []string
		for _, a := range c.Windows.Aggregates {
			d := c
			d.Windows.Aggregates = slices.DeleteFunc(slices.Clone(c.Windows.Aggregates), func(x string) bool { return x == a })
			if ok(d) {
				drop = append(drop, a)
			}
		}
		if len(drop) > 0 {
			return fmt.Sprintf("release fewer aggregates (feasible without %s)", strings.Join(drop, " or without "))
		}
	}
	return ""
}
