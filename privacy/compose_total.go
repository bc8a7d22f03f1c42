package privacy

import (
	"math"
)

// Worst-case shift patterns of a part with an L1 bound (a per-unit total
// bound), for the PLD accountant.
//
// A part of a discrete mechanism noises integers (counts, or values on a
// lattice), so one unit changes it by an integer vector c with at most L0
// non-zero coordinates, |cᵢ| ≤ Linf and Σ|cᵢ| ≤ L1. With independent noise
// per coordinate, the pair of output distributions is the product of the
// one-dimensional pairs at shifts cᵢ, and
//
//  1. the sign of a shift does not matter (the noise is symmetric), nor
//     the order of the coordinates;
//  2. a larger shift dominates a smaller one in every coordinate (vector.go,
//     step 1: discrete log-concave noise), and dominance survives products
//     (step 2);
//
// so every neighbour is dominated by one of the maximal vectors: the
// partitions of L1 into at most L0 parts, each at most Linf (when L1 <
// L0·Linf; otherwise L0 parts of Linf, the usual case). In ONE release the
// guarantee is the worst over the neighbours, so a release is (ε, δ)-DP
// if δ(ε) of every combination of the parts' patterns is at most δ: that
// is what calibratePLD checks. Over several windows a unit may choose a
// different pattern in each; that composition is not covered here, so the
// patterns are used only when the calibration covers one window (a
// per-window budget, or parallel composition).

// maxPatterns bounds the patterns of one part and the combinations of all
// parts' patterns that calibratePLD evaluates at every noise level; beyond
// it the part is composed as L0 coordinates at Linf (valid, looser).
// Partitions of L1 = 12 number 77, of 20 number 627.
const maxPatterns = 256

// shiftPattern is one maximal shift vector: count coordinates at each
// shift, largest shift first.
type shiftPattern []shiftRun

type shiftRun struct {
	shift float64
	count int
}

// totalPatterns returns the worst-case shift patterns of p (see above), or
// nil when they do not apply: more than one window, no L1 bound below
// L0·Linf, a mechanism that is not discrete, non-integer bounds, or more
// than maxPatterns patterns.
func (p calPart) totalPatterns() []shiftPattern {
	if p.win != 1 || !(p.L1 > 0) || !pldDiscrete(p.Mechanism) || p.Linf != math.Trunc(p.Linf) || p.L1 != math.Trunc(p.L1) ||
		p.L1 >= float64(p.L0)*p.Linf || p.L1 > 1<<20 {
		return nil
	}
	var out []shiftPattern
	parts := make([]int, 0, p.L0)
	var rec func(left, largest int) bool
	rec = func(left, largest int) bool {
		if left == 0 {
			out = append(out, runsOf(parts))
			return len(out) <= maxPatterns
		}
		if len(parts) == p.L0 {
			return true // L1 does not fit: a larger pattern covers this one
		}
		for x := min(left, largest); x >= 1; x-- {
			parts = append(parts, x)
			ok := rec(left-x, x)
			parts = parts[:len(parts)-1]
			if !ok {
				return false
			}
		}
		return true
	}
	if !rec(int(p.L1), int(p.Linf)) || len(out) == 0 {
		return nil
	}
	return out
}

// runsOf groups a non-increasing partition into runs of equal parts.
func runsOf(parts []int) shiftPattern {
	var s shiftPattern
	for _, x := range parts {
		if n := len(s); n > 0 && s[n-1].shift == float64(x) {
			s[n-1].count++
			continue
		}
		s = append(s, shiftRun{shift: float64(x), count: 1})
	}
	return s
}

// patternCombos returns every part's patterns (a part without patterns has
// the single pattern of n coordinates at Linf) when at least one part has
// patterns and their combinations number at most maxPatterns; nil
// otherwise.
func patternCombos(ps []calPart) [][]shiftPattern {
	out := make([][]shiftPattern, len(ps))
	any, combos := false, 1
	for i, p := range ps {
		if pt := p.totalPatterns(); pt != nil {
			out[i], any = pt, true
		} else {
			out[i] = []shiftPattern{{{shift: p.Linf, count: p.n}}}
		}
		if combos *= len(out[i]); combos > maxPatterns {
			return nil
		}
	}
	if !any {
		return nil
	}
	return out
}

// patternDelta returns the largest δ(ε) over every combination of the
// parts' patterns at the given scales: the certificate of one release
// (see above).
func patternDelta(ps []calPart, pats [][]shiftPattern, scales []float64, eps float64, o PLDOptions) (float64, error) {
	// One PLD per part and pattern, composed from one PLD per distinct
	// shift.
	per := make([][]*PLD, len(ps))
	for i, p := range ps {
		base := map[float64]*PLD{}
		for _, pat := range pats[i] {
			var acc *PLD
			for _, r := range pat {
				b, ok := base[r.shift]
				if !ok {
					q := p
					q.Linf = r.shift
					var err error
					if b, err = calPartPLD(q, scales[i], o); err != nil {
						return 0, err
					}
					base[r.shift] = b
				}
				c, err := b.SelfCompose(r.count)
				if err != nil {
					return 0, err
				}
				if acc == nil {
					acc = c
				} else {
					acc = compose(acc, c)
				}
			}
			per[i] = append(per[i], acc)
		}
	}
	worst := 0.0
	idx := make([]int, len(ps))
	for {
		var total *PLD
		for i := range ps {
			if total == nil {
				total = per[i][idx[i]]
			} else {
				total = compose(total, per[i][idx[i]])
			}
		}
		worst = math.Max(worst, total.Delta(eps))
		// Next combination (odometer).
		i := 0
		for ; i < len(idx); i++ {
			if idx[i]++; idx[i] < len(per[i]) {
				break
			}
			idx[i] = 0
		}
		if i == len(idx) {
			return worst, nil
		}
	}
}
