package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dpstream/dpstream/operator"
)

func init() { commands = append(commands, newPlanCmd) }

func newPlanCmd() *cobra.Command {
	var (
		file          string
		units, events float64
		target        float64
		asJSON        bool
	)
	cmd := &cobra.Command{
		Use:   "plan --config FILE [--units-per-group N] [--events-per-unit M] [--target R] [--json]",
		Short: "Show what a configuration releases and how large groups must be for useful values",
		Long: `Plan calibrates the configuration exactly as run does (no key or broker
needed) and prints, per aggregate, the mechanism that runs, the noise scale
and the half-width of the published confidence interval; the group selection
threshold (without privacy.public_groups) with the number of units a group
needs to be released; and the budget per window and over the horizon.

With --units-per-group (distinct privacy units per group and window) and
--events-per-unit (events one unit adds to a group per window) it also
prints the expected value of a typical group, the interval's half-width
relative to it, and the probability that such a group is released. With
--target (a relative half-width, e.g. 0.1 for ±10%) it prints the smallest
single changes that reach it: more units per group, a longer window, a
larger ε, tighter bounds, public groups.

run logs the same summary at start ("plan: ..." lines).`,
		Example: `  dpstream plan --config deploy/dpstream.example.yaml
  dpstream plan --config deploy/dpstream.example.yaml --units-per-group 50 --events-per-unit 4 --target 0.1
  dpstream plan --config deploy/dpstream.example.yaml --set privacy.epsilon=2 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := operator.Load(file, cmd.Flags())
			if err != nil {
				return err
			}
			s, err := operator.NewSizing(cfg, operator.Sizes{UnitsPerGroup: units, EventsPerUnit: events})
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("target") {
				if err := s.Suggest(cfg, target); err != nil {
					return err
				}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), s)
			}
			return writePlan(cmd.OutOrStdout(), s)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "config", "c", "", "YAML config file (as for run)")
	f.Float64Var(&units, "units-per-group", 0, "distinct privacy units per group and window (for relative errors)")
	f.Float64Var(&events, "events-per-unit", 0, "events one unit adds to a group per window (default 1)")
	f.Float64Var(&target, "target", 0, "target relative half-width, e.g. 0.1; prints the smallest changes that reach it")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	operator.AddFlags(f)
	return cmd
}

// writePlan prints s as text.
func writePlan(out io.Writer, s *operator.Sizing) error {
	b := s.Budget
	fmt.Fprintf(out, "privacy unit: %s; windows of %s\n", b.Unit, b.WindowSize)
	fmt.Fprintf(out, "budget per window: ε = %s, δ = %s (accounting %s)\n", g(b.WindowEpsilon), g(b.WindowDelta), b.Accounting)
	if len(b.Lanes) > 0 {
		fmt.Fprintf(out, "one joint calibration of all %d noised parts: the first measure and histogram and %s\n", b.Parts, strings.Join(b.Lanes, ", "))
	}
	if b.Horizon != "" {
		fmt.Fprintf(out, "budget per horizon of %s (%d windows): ε = %s, δ = %s\n", b.Horizon, b.WindowsPerHorizon, g(b.HorizonEpsilon), g(b.HorizonDelta))
		if b.Composition != "" {
			fmt.Fprintf(out, "composition: %s, every window spends the whole horizon budget (an event lies in one window only)\n", b.Composition)
		}
	}
	bd := s.Bounds
	fmt.Fprintf(out, "bounds per unit and window: max_groups %d, max_buckets %d, max_per_bucket %d, max_values %d", bd.MaxGroups, bd.MaxBuckets, bd.MaxPerBucket, bd.MaxValues)
	if bd.MaxContributions > 0 {
		fmt.Fprintf(out, ", max_contributions %d", bd.MaxContributions)
	}
	if bd.MaxUnits > 0 {
		fmt.Fprintf(out, ", max_units %d", bd.MaxUnits)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "aggregate\tseries\tmechanism\tscale\thalf-width\texpected\trelative\t")
	for _, a := range s.Aggregates {
		for _, r := range a.Series {
			mech := r.Mechanism
			if r.Auto {
				mech += " (auto)"
			}
			scale := "-"
			if r.Scale > 0 {
				scale = g(r.Scale)
			}
			half := "whole range"
			if r.HalfWidth != nil {
				half = fmt.Sprintf("±%s (%s%%)", g(*r.HalfWidth), g(100*r.Level))
				if r.CoversRange {
					half += " whole range"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", a.Aggregate, r.Series, mech, scale, half, opt(r.Expected, ""), opt(r.Relative, "%"))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeSensitivities(out, s); err != nil {
		return err
	}
	writeRunning(out, s)
	writeQuantiles(out, s)
	if sel := s.Selection; sel != nil {
		fmt.Fprintf(out, "\ngroup selection: a group is released in a window only if its units + noise ≥ %s (%s, scale %s)\n",
			g(sel.Threshold), sel.Mechanism, g(sel.Scale))
		fmt.Fprintf(out, "  released with probability ≥ 50%% from %d units per group and window, ≥ 95%% from %d\n", sel.Units50, sel.Units95)
		if sel.Release != nil {
			fmt.Fprintf(out, "  a group of %s units is released with probability %s\n", g(s.Sizes.UnitsPerGroup), pct(*sel.Release))
		}
		fmt.Fprintln(out, "  (list privacy.public_groups to release known groups in every window, without a threshold)")
	}
	if len(s.Assumptions) > 0 {
		fmt.Fprintln(out, "\nassumptions:")
		for _, a := range s.Assumptions {
			fmt.Fprintln(out, "  - "+a)
		}
	}
	if s.Target > 0 {
		fmt.Fprintf(out, "\ntarget: relative half-width ≤ %s; now %s\n", pct(s.Target), opt(s.Worst, "%"))
		if s.Worst != nil && *s.Worst <= s.Target {
			fmt.Fprintln(out, "  reached already")
		}
		for _, sg := range s.Suggestions {
			mark := "reaches it"
			if !sg.Reaches {
				mark = "not enough"
			}
			fmt.Fprintf(out, "  - %s: %s (%s)\n", sg.Change, pct(sg.Relative), mark)
		}
		if len(s.Suggestions) == 0 {
			fmt.Fprintln(out, "  no single change found; combine a longer window with a larger ε")
		}
	}
	return nil
}

// g formats a number with up to 6 significant digits.
func g(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// pct formats a fraction as a percentage.
func pct(v float64) string { return strconv.FormatFloat(100*v, 'g', 3, 64) + "%" }

// opt formats an optional number ("-" when unknown); unit "%" prints it as
// a percentage.
func opt(v *float64, unit string) string {
	if v == nil {
		return "-"
	}
	if unit == "%" {
		return pct(*v)
	}
	return g(*v)
}

// writeSensitivities prints how far one unit moves every noised series in
// a window, and which bounds give its L1 and L2.
func writeSensitivities(out io.Writer, s *operator.Sizing) error {
	fmt.Fprintln(out, "\nsensitivity (one unit, one window) and the bounds that bind L1 and L2:")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  aggregate\tseries\tL0\tL∞\tL1\tL2\t")
	for _, a := range s.Aggregates {
		for _, r := range a.Series {
			if e := r.Sensitivity; e != nil {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s (%s)\t%s (%s)\t\n", a.Aggregate, r.Series, g(e.L0), g(e.LInf), g(e.L1), e.L1Bound, g(e.L2), e.L2Bound)
			}
		}
	}
	return tw.Flush()
}

// writeQuantiles prints how the joint exponential mechanism releases the
// quantiles: one selection per group, its ε and the rank-error bound.
func writeQuantiles(out io.Writer, s *operator.Sizing) {
	for _, a := range s.Aggregates {
		for _, r := range a.Series {
			if q := r.Quantiles; q != nil {
				ranks := make([]string, len(q.Ranks))
				for i, x := range q.Ranks {
					ranks[i] = g(x)
				}
				fmt.Fprintf(out, "\n%s: %s exponential mechanism, %d selection of all ranks (%s) per group and window at ε = %s\n",
					a.Aggregate, q.Mechanism, q.Selections, strings.Join(ranks, ", "), g(q.Epsilon))
				fmt.Fprintf(out, "  with level %s for all ranks together, every released edge's rank is within %s of rank·N beyond the leaf resolution\n",
					pct(q.Level), g(q.RankError))
			}
		}
	}
}

// writeRunning prints how the running totals are released, per series.
func writeRunning(out io.Writer, s *operator.Sizing) {
	for _, a := range s.Aggregates {
		for _, r := range a.Series {
			rs := r.Running
			if rs == nil {
				continue
			}
			fmt.Fprintf(out, "\nrunning totals of %s: %s; RMSE of a window's value %s", a.Aggregate, rs.Mechanism, g(rs.WindowRMSE))
			if rs.WorstRMSE > 0 {
				fmt.Fprintf(out, ", of a running total at most %s (half-width ±%s at the horizon's end)", g(rs.WorstRMSE), g(rs.WorstHalfWidth))
			}
			fmt.Fprintln(out)
			if rs.Why != "" {
				fmt.Fprintf(out, "  not the square-root factorization: %s\n", rs.Why)
			}
		}
	}
}
