package operator

// plan_auto.go resolves `mechanism: auto` for one noised part: the
// candidates as they would run on its values (autoCandidates), each
// calibrated for the whole release, ranked by the error of one of the
// part's coordinates. Without L1 or L2 norms reaching the calibration the
// release is compared as its coordinates at the part's L∞ (autoChoose);
// with them every candidate is calibrated jointly with the norms it would
// actually use (autoChooseNormed).

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dpstream/dpstream/privacy"
)

// autoChoose resolves "auto" for one part: the candidate with the smallest
// error (measure) for the shape of the whole release (totalL0 coordinates
// per window, nw windows), among autoCandidates as they would run. Exact
// candidates are calibrated for `parts`; float candidates for `parts` less
// the δ their residual costs on all totalL0·nw coordinates (the
// scale-independent part of the reserve, privacy.FloatTail; the ε part,
// about 1e-6 per coordinate, is left out of the ranking). Real values are
// compared in grid units at the integer shift ⌊L∞/Λ⌋ + 1 (Λ = SnapStep(L∞)),
// where the lattice discrete Gaussian and the continuous mechanisms
// (whose scales are linear in the shift) meet on equal terms. It returns
// the mechanism and the sentence for the start log.
func autoChoose(parts privacy.Budget, nw, totalL0 int, s partSpec, measure privacy.ErrorMeasure, acct privacy.Accounting) (privacy.Mechanism, string, error) {
	cands := autoCandidates(parts.Delta, s.integer, s.exactAuto)
	linf := s.sens.Linf
	if !s.integer {
		linf = privacy.LatticeSensitivity(s.sens.Linf, privacy.SnapStep(s.sens.Linf))
	}
	// Group the candidates by the δ their residual costs.
	type group struct {
		tail  float64
		names []string
	}
	var groups []group
	for _, name := range cands {
		m, err := privacy.Parse(name)
		if err != nil {
			return nil, "", err
		}
		tail := privacy.FloatTail(m)
		k := slices.IndexFunc(groups, func(g group) bool { return g.tail == tail })
		if k < 0 {
			groups, k = append(groups, group{tail: tail}), len(groups)
		}
		groups[k].names = append(groups[k].names, name)
	}
	type scored struct {
		m   privacy.Mechanism
		err float64
		idx int
	}
	var opts []scored
	var infeasible []string
	for _, g := range groups {
		b := parts
		if g.tail > 0 {
			b.Delta = parts.Delta - float64(totalL0)*float64(nw)*g.tail*(1+math.Exp(parts.Epsilon))
			if !(b.Delta > 0) || math.IsInf(g.tail, 1) {
				infeasible = append(infeasible, g.names...)
				continue
			}
		}
		cmp, err := privacy.Compare(privacy.Horizon{Total: b, Windows: nw, L0: totalL0, Linf: linf}, privacy.CompareOptions{Candidates: g.names, Measure: measure, Accounting: acct})
		if err != nil {
			return nil, "", err
		}
		infeasible = append(infeasible, cmp.Infeasible...)
		for _, o := range cmp.Options {
			e := o.Error(measure)
			if math.IsNaN(e) || math.IsInf(e, 0) {
				continue
			}
			opts = append(opts, scored{m: o.Mechanism, err: e, idx: slices.Index(cands, o.Mechanism.Name())})
		}
	}
	if len(opts) == 0 {
		return nil, "", fmt.Errorf("%w: no candidate has a finite %s (infeasible: %s)", privacy.ErrInfeasible, measure, strings.Join(infeasible, ", "))
	}
	best := slices.MinFunc(opts, func(a, b scored) int {
		if c := cmp.Compare(a.err, b.err); c != 0 {
			return c
		}
		return a.idx - b.idx
	})
	return best.m, fmt.Sprintf("%s (smallest %s among %s for %d coordinates × %d windows)",
		best.m.Name(), measure, strings.Join(cands, ", "), totalL0, nw), nil
}

// autoCandidates are the mechanisms "auto" compares for one part, as they
// run on its values (see ReleaseMechanism), without repeats: heavy-tailed
// noise never (no residual bound), float noise only with δ > 0 (its
// residual needs δ). Parts that need exact integer noise (exact: group
// selection and the quantile tree, partSpec.exactAuto) use only the exact
// integer mechanisms.
func autoCandidates(delta float64, integer, exact bool) []string {
	if exact {
		if delta > 0 {
			return []string{"discrete-laplace", "discrete-gaussian"}
		}
		return []string{"discrete-laplace"}
	}
	var out []string
	for _, name := range privacy.AutoCandidates(delta) {
		m, err := ReleaseMechanism(name, integer)
		if err != nil || (!privacy.FloatExact(m) && !(delta > 0)) {
			continue
		}
		if !slices.Contains(out, m.Name()) {
			out = append(out, m.Name())
		}
	}
	return out
}

// normsReach reports whether the L1 or L2 of s can reach its calibration
// under a budget with the given δ (vectorNoise.totalNorms): a part that
// the total bound binds, or an integer part that carries norms by
// construction (the quantile tree) when δ > 0.
func (s partSpec) normsReach(delta float64) bool {
	return !s.selection && (s.sens.Total || (s.integer && s.norms && delta > 0))
}

// anyNorms reports whether the L1 or L2 of some part of specs reaches the
// calibration (normsReach).
func anyNorms(specs []partSpec, delta float64) bool {
	return slices.ContainsFunc(specs, func(s partSpec) bool { return s.normsReach(delta) })
}

// autoChooseNormed is autoChoose for a release in which some part's L1 or
// L2 reaches the calibration: a coordinate count at one L∞ misranks the
// candidates there (the quantile tree at ε = 4, δ = 1e-6, V = 5 is 20
// coordinates at 5, which favours the discrete Gaussian, σ ≈ 11.9; its L1
// of 20 gives the discrete Laplace scale 5, a third of the variance).
// Every candidate is calibrated jointly with the parts of all of specs as
// they would be calibrated with it (autoParts: its L1 for Laplace-type
// noise under the pure accountant, its L2 and worst shift pattern for the
// Gaussian), and ranked by the error (measure) of one coordinate of part
// i at the scale it gets; ties go to the earlier candidate. Float
// candidates are calibrated for `parts` less the δ their residual costs,
// as in autoChoose.
func autoChooseNormed(parts privacy.Budget, nw int, specs []partSpec, i int, measure privacy.ErrorMeasure, acct privacy.Accounting) (privacy.Mechanism, string, error) {
	s := specs[i]
	cands := autoCandidates(parts.Delta, s.integer, s.exactAuto)
	totalL0 := 0
	for _, sj := range specs {
		totalL0 += sj.coords(parts.Delta)
	}
	var best privacy.Mechanism
	bestErr := math.Inf(1)
	var infeasible []string
	for _, name := range cands {
		m, err := privacy.Parse(name)
		if err != nil {
			return nil, "", err
		}
		b := parts
		if tail := privacy.FloatTail(m); tail > 0 {
			b.Delta = parts.Delta - float64(totalL0)*float64(nw)*tail*(1+math.Exp(parts.Epsilon))
			if !(b.Delta > 0) || math.IsInf(tail, 1) {
				infeasible = append(infeasible, name)
				continue
			}
		}
		plans, err := privacy.CalibrateParts(acct, b, nw, autoParts(specs, name, parts.Delta))
		if errors.Is(err, privacy.ErrInfeasible) || errors.Is(err, privacy.ErrUnsupported) {
			infeasible = append(infeasible, name)
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("operator: comparing %s: %w", name, err)
		}
		e := m.Variance(plans[i].Scale)
		if measure == privacy.ByMAE {
			e = m.MeanAbsError(plans[i].Scale)
		}
		if e < bestErr { // NaN and +Inf never win
			best, bestErr = m, e
		}
	}
	if best == nil {
		return nil, "", fmt.Errorf("%w: no candidate has a finite %s (infeasible: %s)", privacy.ErrInfeasible, measure, strings.Join(infeasible, ", "))
	}
	return best, fmt.Sprintf("%s (smallest %s among %s, each calibrated with the parts' L1 and L2 norms, for %d coordinates × %d windows)",
		best.Name(), measure, strings.Join(cands, ", "), totalL0, nw), nil
}

// autoParts returns the calibration parts of specs when the automatic
// parts run candidate (a mechanism name of autoCandidates): each as
// vectorNoise.calPart would give it — the mechanism that runs on its values
// (the configured one for a part that is not automatic, the fixed
// selection for a selection part), its coordinates under a budget with δ
// delta, its L∞ (real values in grid units at the integer shift ⌊L∞/Λ⌋ + 1,
// Λ = SnapStep(L∞), as autoChoose compares them) and its L1 and L2 where
// they reach the calibration (normsReach; for real values the L1 of
// Laplace-type noise only, in grid units, as totalNorms gives it).
func autoParts(specs []partSpec, candidate string, delta float64) []privacy.Part {
	out := make([]privacy.Part, len(specs))
	for j, sj := range specs {
		pt := privacy.Part{L0: sj.coords(delta), Linf: sj.sens.Linf}
		switch {
		case sj.selection:
			pt.Mechanism = privacy.Selection{}
		case sj.configured != Auto:
			if m, err := ReleaseMechanism(sj.configured, sj.integer); err == nil {
				pt.Mechanism = m
			}
		}
		if pt.Mechanism == nil {
			pt.Mechanism, _ = ReleaseMechanism(candidate, sj.integer) // a name autoCandidates produced
		}
		switch {
		case sj.integer || sj.selection:
			if sj.normsReach(delta) {
				pt.L1, pt.L2 = sj.sens.L1, sj.sens.L2
			}
		default:
			step := privacy.SnapStep(sj.sens.Linf)
			pt.Linf = privacy.LatticeSensitivity(sj.sens.Linf, step)
			if sj.normsReach(delta) && !isDiscrete(pt.Mechanism) {
				// totalNorms in grid units: L1/step + L0 (the division by
				// a power of two is exact).
				if l1 := math.Nextafter(sj.sens.L1/step+math.Ceil(sj.sens.L0), math.Inf(1)); l1 < float64(pt.L0)*pt.Linf {
					pt.L1 = l1
				}
			}
		}
		out[j] = pt
	}
	return out
}
