package privacy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Choosing a mechanism.
//
// Compare calibrates a list of candidate mechanisms for one vector shape —
// a total budget over `windows` releases, in each of which one unit moves at
// most l0 coordinates by at most linf — with one accountant, and ranks them
// by the expected error of one coordinate. `dpstream compare` prints the
// ranking; the operator's `mechanism: auto` takes the winner (Choose).

// ErrorMeasure is how Compare ranks mechanisms: the expected error of one
// noised coordinate.
type ErrorMeasure string

// The error measures.
const (
	// ByVariance ranks by the noise variance; mechanisms with infinite
	// variance (Cauchy, SαS) cannot win.
	ByVariance ErrorMeasure = "variance"
	// ByMAE ranks by the mean absolute error E|noise| (finite for SαS with
	// α > 1, infinite for Cauchy).
	ByMAE ErrorMeasure = "mae"
)

// ParseErrorMeasure returns the measure named s ("" means ByVariance).
func ParseErrorMeasure(s string) (ErrorMeasure, error) {
	switch m := ErrorMeasure(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return ByVariance, nil
	case ByVariance, ByMAE:
		return m, nil
	}
	return "", fmt.Errorf("%w: error measure %q: want variance or mae", ErrInvalidParameter, s)
}

// CompareCandidates are the mechanisms `dpstream compare` lists: every named
// mechanism, Subbotin on a grid of R, and SαS at one α (its pure-ε solver is
// the slowest step).
var CompareCandidates = []string{
	"laplace", "logistic", "gaussian",
	"subbotin:1.25", "subbotin:1.5", "subbotin:3", "subbotin:4", "subbotin:6", "subbotin:8",
	"cauchy", "sas:1.5", "discrete-laplace", "discrete-gaussian",
}

// subbotinGrid is the grid of R that AutoCandidates offers (R = 1 is
// Laplace and R = 2 Gaussian, both listed by name).
var subbotinGrid = []string{"subbotin:1.25", "subbotin:1.5", "subbotin:3", "subbotin:4", "subbotin:6", "subbotin:8"}

// AutoCandidates returns the mechanisms an automatic choice considers for a
// total δ: Laplace, logistic, Gaussian and Subbotin_R on a grid of R, plus
// the heavy-tailed pure-ε mechanisms (Cauchy, SαS with α = 1.5) when δ = 0,
// that is when pure DP is required. (With δ > 0 they are never better than
// Laplace, whose pure-ε scale they share in spirit, and their solver is slow.)
func AutoCandidates(delta float64) []string {
	c := []string{"laplace", "logistic", "gaussian"}
	c = append(c, subbotinGrid...)
	if delta == 0 {
		c = append(c, "cauchy", "sas:1.5")
	}
	return c
}

// CompareOptions configures Compare. The zero value compares
// CompareCandidates by variance under the tightest accountant.
type CompareOptions struct {
	// Candidates are mechanism names (see Parse); nil means
	// CompareCandidates.
	Candidates []string
	// Measure ranks the candidates; "" means ByVariance.
	Measure ErrorMeasure
	// Accounting is the accountant every candidate is calibrated with; ""
	// means Tightest.
	Accounting Accounting
	// Theorems also computes, per candidate, the scale that basic and
	// advanced composition would need (Option.BasicScale, AdvancedScale).
	Theorems bool
}

// Option is one feasible candidate of a comparison.
type Option struct {
	// Mechanism is the candidate and Plan its calibration (per-coordinate
	// scale and the accountant that certified it).
	Mechanism Mechanism
	Plan      Plan
	// Variance and MeanAbsError are the expected error of one noised
	// coordinate, +Inf where infinite.
	Variance, MeanAbsError float64
	// BasicScale and AdvancedScale are the scales basic and advanced
	// composition would need; NaN unless CompareOptions.Theorems is set, or
	// when that theorem cannot meet the budget.
	BasicScale, AdvancedScale float64
}

// Error returns the option's error under measure m (variance or mean
// absolute error).
func (o Option) Error(m ErrorMeasure) float64 {
	if m == ByMAE {
		return o.MeanAbsError
	}
	return o.Variance
}

// Comparison is the result of Compare.
type Comparison struct {
	// Budget, Windows, L0 and Linf are the shape that was compared, and
	// Measure the ranking.
	Budget     Budget
	Windows    int
	L0         int
	Linf       float64
	Measure    ErrorMeasure
	Accounting Accounting
	// Options are the feasible candidates, best first (ties keep the
	// candidates' order).
	Options []Option
	// Infeasible names the candidates that cannot meet the budget (for
	// example Gaussian noise with δ = 0, or integer noise with a fractional
	// L∞).
	Infeasible []string
	// Winner is the name of Options[0], or "" when no candidate has a
	// finite error under Measure.
	Winner string
}

// Best returns the winning option and true, or false when there is none.
func (c Comparison) Best() (Option, bool) {
	if c.Winner == "" || len(c.Options) == 0 {
		return Option{}, false
	}
	return c.Options[0], true
}

// Compare calibrates every candidate for a release in which one unit moves
// at most h.L0 coordinates by at most h.Linf, published h.Windows times, so
// that the whole horizon meets the total budget h.Total under the chosen
// accountant, and
// ranks the candidates by the error of one coordinate. Candidates that
// cannot meet the budget (errors wrapping ErrInfeasible or ErrUnsupported,
// or integer noise with a fractional linf) are listed in Infeasible; any
// other error is returned. Calibrations are cached per configuration (see
// CalibrateParts), so comparing again is cheap.
func Compare(h Horizon, o CompareOptions) (Comparison, error) {
	total, windows, l0, linf := h.Total, h.Windows, h.L0, h.Linf
	measure, err := ParseErrorMeasure(string(o.Measure))
	if err != nil {
		return Comparison{}, err
	}
	acct, err := ParseAccounting(string(o.Accounting))
	if err != nil {
		return Comparison{}, err
	}
	if err := total.Validate(); err != nil {
		return Comparison{}, err
	}
	if windows < 1 || l0 < 1 {
		return Comparison{}, fmt.Errorf("%w: windows %d and l0 %d: want both ≥ 1", ErrInvalidParameter, windows, l0)
	}
	if !(linf > 0) || math.IsInf(linf, 0) {
		return Comparison{}, fmt.Errorf("%w: L∞ %v: want a finite L∞ > 0", ErrInvalidParameter, linf)
	}
	names := o.Candidates
	if names == nil {
		names = CompareCandidates
	}
	res := Comparison{Budget: total, Windows: windows, L0: l0, Linf: linf, Measure: measure, Accounting: acct,
		Options: []Option{}, Infeasible: []string{}}
	for _, name := range names {
		m, err := Parse(name)
		if err != nil {
			return Comparison{}, err
		}
		if pldDiscrete(m) && linf != math.Trunc(linf) {
			res.Infeasible = append(res.Infeasible, m.Name())
			continue // integer noise needs an integer L∞
		}
		p, err := CalibrateWith(acct, m, h)
		if err != nil {
			if errors.Is(err, ErrInfeasible) || errors.Is(err, ErrUnsupported) {
				res.Infeasible = append(res.Infeasible, m.Name())
				continue
			}
			return Comparison{}, fmt.Errorf("privacy: comparing %s: %w", m.Name(), err)
		}
		opt := Option{Mechanism: m, Plan: p, Variance: m.Variance(p.Scale), MeanAbsError: m.MeanAbsError(p.Scale),
			BasicScale: math.NaN(), AdvancedScale: math.NaN()}
		if o.Theorems {
			if b, err := CalibrateWith(AccountBasic, m, h); err == nil {
				opt.BasicScale = b.Scale
			}
			if a, err := CalibrateWith(AccountAdvanced, m, h); err == nil {
				opt.AdvancedScale = a.Scale
			}
		}
		res.Options = append(res.Options, opt)
	}
	key := func(x Option) float64 {
		if e := x.Error(measure); !math.IsNaN(e) {
			return e
		}
		return math.Inf(1)
	}
	slices.SortStableFunc(res.Options, func(a, b Option) int {
		ka, kb := key(a), key(b)
		switch {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	if len(res.Options) > 0 && !math.IsInf(key(res.Options[0]), 1) {
		res.Winner = res.Options[0].Mechanism.Name()
	}
	return res, nil
}

// Choose returns the candidate of Compare with the smallest error, or an
// error wrapping ErrInfeasible when no candidate meets the budget with a
// finite error.
func Choose(h Horizon, o CompareOptions) (Option, error) {
	c, err := Compare(h, o)
	if err != nil {
		return Option{}, err
	}
	best, ok := c.Best()
	if !ok {
		return Option{}, fmt.Errorf("%w: no candidate has a finite %s (infeasible: %s)", ErrInfeasible, c.Measure,
			strings.Join(c.Infeasible, ", "))
	}
	return best, nil
}
