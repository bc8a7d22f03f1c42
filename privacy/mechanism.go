package privacy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dpstream/dpstream/privacy/rng"
)

// Mechanism is an additive noise mechanism: it releases q(d) + scale·X,
// where X has a fixed standard distribution.
//
// Implementations are small value types that are safe for concurrent use.
type Mechanism interface {
	// Name is the canonical name as the command line spells it, for example
	// "laplace" or "subbotin:3".
	Name() string

	// Calibrate returns the smallest scale for which adding scale·X to a
	// query with the given sensitivity is (epsilon, delta)-differentially
	// private. The returned scale is never below the exact minimum.
	Calibrate(epsilon, delta, sensitivity float64) (Calibration, error)

	// Variance is the variance of scale·X, +Inf where it is infinite.
	Variance(scale float64) float64

	// MeanAbsError is E|scale·X|, +Inf where it is infinite.
	MeanAbsError(scale float64) float64

	// HalfWidth is the smallest h with P(|scale·X| > h) ≤ beta, rounded up:
	// the half-width of a two-sided (1−beta) confidence interval for one
	// noised value.
	HalfWidth(scale, beta float64) float64

	// Sample draws one variate of scale·X from s.
	Sample(s *rng.Stream, scale float64) float64
}

// Criterion is implemented by mechanisms whose exact guarantee at a given
// scale can be evaluated (Laplace, Logistic, Gaussian, GaussianClassic,
// Subbotin, Convex, and the discrete mechanisms), for verification and
// accounting.
type Criterion interface {
	// Delta returns the smallest δ for which adding scale·X to a query with
	// the given sensitivity is (ε, δ)-differentially private, rounded
	// upwards (for log-concave noise: the left side of Lemma 1 of Vinterbo
	// 2022). It is NaN for invalid arguments.
	Delta(epsilon, scale, sensitivity float64) float64
}

// Distribution is implemented by mechanisms with a continuous standard
// variate X.
type Distribution interface {
	// CDF returns P(X ≤ x), accurate to a small relative error in both
	// tails.
	CDF(x float64) float64
}

// Method says how a scale was obtained.
type Method string

// The methods a Calibration may report.
const (
	// ClosedForm: an exact formula, rounded up.
	ClosedForm Method = "closed-form"
	// Table: a precomputed scale table, verified against the exact criterion.
	Table Method = "table"
	// Solver: a numerical solver of the exact criterion, returning the upper
	// end of its bracket.
	Solver Method = "solver"
)

// Calibration is the result of calibrating a mechanism to a budget.
type Calibration struct {
	Mechanism   string  // canonical mechanism name
	Epsilon     float64 // ε of the guarantee
	Delta       float64 // δ of the guarantee
	Sensitivity float64 // Δ the scale was calibrated for
	Scale       float64 // the noise scale, ≥ the exact minimum
	Method      Method  // how Scale was obtained
}

// Errors returned by this package. Calibration errors wrap one of these.
var (
	// ErrInvalidParameter: ε, δ, Δ, a scale, or a mechanism parameter is out
	// of range, NaN or infinite.
	ErrInvalidParameter = errors.New("privacy: invalid parameter")
	// ErrUnknownMechanism: a mechanism name that Parse does not know.
	ErrUnknownMechanism = errors.New("privacy: unknown mechanism")
	// ErrInfeasible: no finite scale meets the requested budget with this
	// mechanism (for example δ = 0 with Gaussian noise).
	ErrInfeasible = errors.New("privacy: budget cannot be met")
)

// Parse returns the mechanism named by s: laplace, logistic, gaussian,
// gaussian-classic, subbotin:R, cauchy, sas:A, discrete-laplace,
// discrete-gaussian.
func Parse(s string) (Mechanism, error) {
	name, param, hasParam := strings.Cut(strings.ToLower(strings.TrimSpace(s)), ":")
	simple := map[string]Mechanism{
		"laplace":           Laplace{},
		"logistic":          Logistic{},
		"gaussian":          Gaussian{},
		"gaussian-classic":  GaussianClassic{},
		"cauchy":            Cauchy{},
		"discrete-laplace":  DiscreteLaplace{},
		"discrete-gaussian": DiscreteGaussian{},
	}
	if m, ok := simple[name]; ok {
		if hasParam {
			return nil, fmt.Errorf("%w: %q takes no parameter", ErrUnknownMechanism, name)
		}
		return m, nil
	}
	if !hasParam {
		return nil, fmt.Errorf("%w: %q", ErrUnknownMechanism, s)
	}
	v, err := strconv.ParseFloat(param, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: parameter is not a number", ErrUnknownMechanism, s)
	}
	switch name {
	case "subbotin":
		return NewSubbotin(v)
	case "sas":
		return NewStable(v)
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownMechanism, s)
}
