package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dpstream/dpstream/privacy"
)

func init() { commands = append(commands, newCalibrateCmd) }

// allMechanisms is what `calibrate --mechanism all` compares: every named
// mechanism, Subbotin on a small R grid and SαS on a small α grid (the
// points with precomputed tables, so the comparison is fast).
var allMechanisms = []string{
	"laplace", "logistic", "gaussian", "gaussian-classic",
	"subbotin:1.25", "subbotin:1.5", "subbotin:3", "subbotin:4", "subbotin:8",
	"cauchy", "sas:1.25", "sas:1.5", "sas:1.75", "sas:1.9",
	"discrete-laplace", "discrete-gaussian",
}

// calibrateNames lists the mechanism names calibrate accepts, for errors
// and shell completion.
const calibrateNames = "laplace, logistic, gaussian, gaussian-classic, subbotin:R (1 ≤ R ≤ 50), cauchy, sas:A (1 ≤ A < 2), discrete-laplace, discrete-gaussian, all"

// calibration is the output of calibrate: exactly the keys of the JSON
// object, nulls for infinite values.
type calibration struct {
	Mechanism    string   `json:"mechanism"`
	Epsilon      float64  `json:"epsilon"`
	Delta        float64  `json:"delta"`
	Sensitivity  float64  `json:"sensitivity"`
	Scale        float64  `json:"scale"`
	Variance     *float64 `json:"variance"`
	StdDev       *float64 `json:"stddev"`
	MeanAbsError *float64 `json:"mean_abs_error"`
	Method       string   `json:"method"`

	variance, meanAbs float64 // for sorting, +Inf allowed
}

func newCalibrateCmd() *cobra.Command {
	var (
		mechanism                   string
		epsilon, delta, sensitivity float64
		asJSON                      bool
	)
	cmd := &cobra.Command{
		Use:   "calibrate --mechanism NAME --epsilon E [--delta D] [--sensitivity S] [--json]",
		Short: "Print the smallest noise scale for a mechanism and a privacy budget",
		Long: `Calibrate prints the smallest noise scale that makes one release of a query
with sensitivity S (ε, δ)-differentially private with the named mechanism,
with the variance, standard deviation and mean absolute error of the noise
and the method used (closed-form, table or solver). Scales are exact minima
rounded up (never less noise than the criterion allows).

Mechanisms: laplace, logistic, gaussian, gaussian-classic (the loose classic
bound, for comparison; ε < 1 only), subbotin:R (1 ≤ R ≤ 50), cauchy, sas:A
(1 ≤ A < 2), discrete-laplace, discrete-gaussian, or "all": every mechanism
that can meet the budget, sorted by error (variance, then mean absolute error
where the variance is infinite).

--json prints one JSON object (an array of them for "all") with the keys
mechanism, epsilon, delta, sensitivity, scale, variance, stddev,
mean_abs_error and method; infinite values are null. delta is the δ the
scale guarantees (0 for mechanisms that are always pure ε-DP).`,
		Example: `  dpstream calibrate --mechanism gaussian --epsilon 1 --delta 1e-6
  dpstream calibrate --mechanism subbotin:3 --epsilon 0.5 --delta 1e-9 --sensitivity 2 --json
  dpstream calibrate --mechanism all --epsilon 1 --delta 1e-6`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if strings.EqualFold(strings.TrimSpace(mechanism), "all") {
				return calibrateAll(out, epsilon, delta, sensitivity, asJSON)
			}
			m, err := privacy.Parse(mechanism)
			if err != nil {
				return fmt.Errorf("%w; valid names: %s", err, calibrateNames)
			}
			c, err := calibrateOne(m, epsilon, delta, sensitivity)
			if err != nil {
				if !cmd.Flags().Changed("delta") {
					// δ defaults to 0 (pure ε): say how to ask for δ > 0.
					return fmt.Errorf("%w (δ = 0: pure ε-DP, as no --delta was given; %s needs --delta > 0, e.g. --delta 1e-6)", err, m.Name())
				}
				return err
			}
			if asJSON {
				return writeJSON(out, c)
			}
			return writeText(out, c)
		},
	}
	f := cmd.Flags()
	f.StringVar(&mechanism, "mechanism", "", `mechanism name, or "all"`)
	f.Float64Var(&epsilon, "epsilon", 0, "ε of the budget (> 0)")
	f.Float64Var(&delta, "delta", 0, "δ of the budget (0 ≤ δ < 1; 0 asks for pure ε-DP)")
	f.Float64Var(&sensitivity, "sensitivity", 1, "sensitivity Δ of the query (> 0)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	// --delta is optional: 0 asks for pure ε-DP (laplace, discrete-laplace,
	// cauchy, sas:A need no δ).
	for _, name := range []string{"mechanism", "epsilon"} {
		_ = cmd.MarkFlagRequired(name) // the names exist: cannot fail
	}
	return cmd
}

// calibrateOne calibrates m and computes its error figures.
func calibrateOne(m privacy.Mechanism, epsilon, delta, sensitivity float64) (calibration, error) {
	c, err := m.Calibrate(epsilon, delta, sensitivity)
	if err != nil {
		return calibration{}, err
	}
	r := calibration{
		Mechanism: c.Mechanism, Epsilon: c.Epsilon, Delta: c.Delta, Sensitivity: c.Sensitivity,
		Scale: c.Scale, Method: string(c.Method),
		variance: m.Variance(c.Scale), meanAbs: m.MeanAbsError(c.Scale),
	}
	r.Variance = finite(r.variance)
	r.StdDev = finite(math.Sqrt(r.variance))
	r.MeanAbsError = finite(r.meanAbs)
	return r, nil
}

// finite returns &v, or nil if v is infinite or NaN (JSON null).
func finite(v float64) *float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return nil
	}
	return &v
}

// calibrateAll calibrates every mechanism of allMechanisms that can meet the
// budget and prints them sorted by error. An invalid budget is an error; a
// mechanism that cannot meet a valid budget is listed (in text mode) as
// such.
func calibrateAll(out io.Writer, epsilon, delta, sensitivity float64, asJSON bool) error {
	// Laplace accepts every valid budget, so its error is the budget's.
	if _, err := (privacy.Laplace{}).Calibrate(epsilon, delta, sensitivity); err != nil {
		return err
	}
	var (
		rows    []calibration
		skipped []string
	)
	for _, name := range allMechanisms {
		m, err := privacy.Parse(name)
		if err != nil {
			return fmt.Errorf("calibrate: %w", err) // a bad entry in allMechanisms
		}
		c, err := calibrateOne(m, epsilon, delta, sensitivity)
		switch {
		case err == nil:
			rows = append(rows, c)
		case errors.Is(err, privacy.ErrInfeasible) || errors.Is(err, privacy.ErrInvalidParameter):
			// Cannot meet this budget (δ = 0 with Gaussian noise, ε ≥ 1
			// for the classic bound, a non-integer Δ for discrete noise).
			skipped = append(skipped, name+": "+err.Error())
		default:
			return err
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("%w: no mechanism meets ε = %v, δ = %v", privacy.ErrInfeasible, epsilon, delta)
	}
	slices.SortStableFunc(rows, func(a, b calibration) int {
		return cmp.Or(cmp.Compare(a.variance, b.variance), cmp.Compare(a.meanAbs, b.meanAbs))
	})
	if asJSON {
		return writeJSON(out, rows)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "mechanism\tscale\tvariance\tstddev\tmean_abs_error\tmethod\n")
	for _, r := range rows {
		name := r.Mechanism
		switch {
		case name == "gaussian-classic":
			name += " (loose)"
		case strings.HasPrefix(name, "discrete-"):
			name += " (integer queries)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, exact(r.Scale), optNum(r.Variance), optNum(r.StdDev), optNum(r.MeanAbsError), r.Method)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nε = %v, δ = %v, sensitivity = %v; sorted by variance, then mean absolute error.\n", epsilon, delta, sensitivity)
	if len(skipped) > 0 {
		fmt.Fprintln(out, "Cannot meet this budget:")
		for _, s := range skipped {
			fmt.Fprintln(out, "  "+s)
		}
	}
	return nil
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeText(out io.Writer, c calibration) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	name := c.Mechanism
	if name == "gaussian-classic" {
		name += " (loose: the classic bound, for comparison; gaussian is exact)"
	}
	for _, kv := range [][2]string{
		{"mechanism", name},
		{"epsilon", num(c.Epsilon)},
		{"delta", num(c.Delta)},
		{"sensitivity", num(c.Sensitivity)},
		{"scale", exact(c.Scale)},
		{"variance", optNum(c.Variance)},
		{"stddev", optNum(c.StdDev)},
		{"mean_abs_error", optNum(c.MeanAbsError)},
		{"method", c.Method},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	return tw.Flush()
}

// num formats a number with 10 significant digits.
func num(v float64) string { return strconv.FormatFloat(v, 'g', 10, 64) }

// exact formats a number so that it parses back to the same float64: scales
// are printed this way so that a copied scale is never smaller than the
// calibrated one.
func exact(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// optNum formats a possibly infinite value.
func optNum(v *float64) string {
	if v == nil {
		return "infinite"
	}
	return num(*v)
}
