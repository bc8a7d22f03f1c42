package operator

// plan_note.go writes the accounting note every release carries: the
// budget, the calibration, every noised part's mechanism and scale, the
// floating-point reserve and the selection threshold. The aggregates add
// their own sentences (aggregator.note), and running totals theirs
// (runningNote).

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dpstream/dpstream/privacy"
)

// describe is the accounting note every release carries.
func (p *plan) describe(c Config, used privacy.Accounting, parts, ideal privacy.Budget, pw, shift float64, noises []vectorNoise) string {
	var b strings.Builder
	if c.Privacy.Horizon != 0 {
		fmt.Fprintf(&b, "budget ε=%g, δ=%g per horizon of %s (%d windows)", p.total.Epsilon, p.total.Delta, c.Privacy.Horizon, p.windows)
		if p.parallel {
			b.WriteString("; parallel composition (event-level): an event lies in one window only, so every window spends the whole budget")
		}
	} else {
		fmt.Fprintf(&b, "budget ε=%g, δ=%g per window", p.total.Epsilon, p.total.Delta)
	}
	if p.sens.ReplaceOne {
		fmt.Fprintf(&b, "; at most %d units per window (a random subset beyond), so sensitivities for replacing one unit", c.Bounds.MaxUnits)
	}
	fmt.Fprintf(&b, "; one calibration of all %d noised parts", len(noises)+btoi(p.sel != nil))
	if p.compose > 1 {
		fmt.Fprintf(&b, " over all %d windows", p.compose)
	}
	fmt.Fprintf(&b, ", accounting %s", p.accounting)
	if used != p.accounting {
		fmt.Fprintf(&b, " (certified by %s)", used)
	}
	if p.sel != nil {
		fmt.Fprintf(&b, "; group selection reserves δ=%.3g and ε=%.3g", float64(p.compose)*pw, shift)
	}
	all := noises
	if p.sel != nil {
		all = append(slices.Clone(noises), p.sel.noise)
	}
	for _, n := range all {
		fmt.Fprintf(&b, "; %s: %s", n.part, n.mech.Name())
		if n.auto {
			b.WriteString(" (auto)")
		}
		step := int(math.Round(math.Log2(n.step)))
		switch {
		case n.kind == selectExact:
			fmt.Fprintf(&b, " selection (exact), %d selections each ε=%.6g", n.coords, n.sens.Linf/n.scale)
			switch {
			case float64(n.coords) < n.sens.L0 && parts.Delta > 0:
				fmt.Fprintf(&b, " (a unit moves %g selections; by bounds.max_contributions they pack into %d groups of at most one selection's ε)", n.sens.L0, n.coords)
			case float64(n.coords) < n.sens.L0 && n.sens.Total:
				fmt.Fprintf(&b, " (a unit moves %g selections, by bounds.max_contributions at most %d selections' ε in all)", n.sens.L0, n.coords)
			case float64(n.coords) < n.sens.L0:
				fmt.Fprintf(&b, " (replacing a unit moves %g selections, at most %d selections' ε in all)", n.sens.L0, n.coords)
			}
			continue
		case n.kind == intExact:
			b.WriteString(" integer noise")
		case n.kind == intRounded:
			b.WriteString(" float noise rounded to integers")
		case n.kind == realLattice:
			fmt.Fprintf(&b, " on the lattice 2^%d (exact)", step)
		case n.float():
			fmt.Fprintf(&b, " float noise rounded to step 2^%d", step)
		default:
			fmt.Fprintf(&b, " snapped to step 2^%d (exact)", step)
		}
		fmt.Fprintf(&b, ", scale %.6g per coordinate (L0=%g, L∞=%g", n.scale, n.sens.L0, n.sens.Linf)
		if n.kind == realSnapped || n.kind == realLattice {
			b.WriteString("+step")
		}
		b.WriteString(n.totalNote())
		b.WriteString(")")
	}
	if parts != ideal {
		var names []string
		coords, kappa := 0, 0.0
		for _, n := range all {
			if n.float() {
				names = append(names, n.part)
				coords += int(math.Ceil(n.sens.L0)) * p.compose
				kappa = math.Max(kappa, n.res.Kappa)
			}
		}
		fmt.Fprintf(&b, "; floating-point residual of the float noise (%s: %d coordinates, κ ≤ %.2g) reserved: ε=%.3g, δ=%.3g",
			strings.Join(names, ", "), coords, kappa, parts.Epsilon-ideal.Epsilon, parts.Delta-ideal.Delta)
	}
	if p.sel != nil {
		fmt.Fprintf(&b, "; groups released if units + noise ≥ %g", p.sel.threshold)
	}
	return b.String()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
