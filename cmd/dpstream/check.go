package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/operator/keyfile"
)

func init() { commands = append(commands, newCheckCmd) }

// errCheckFailed is returned by --check-config when the config has problems
// (they are printed first, one per line).
var errCheckFailed = errors.New("config has problems")

func newCheckCmd() *cobra.Command {
	var (
		file string
		opts operator.CheckOptions
	)
	cmd := &cobra.Command{
		Use:   "check --config FILE",
		Short: "Validate the configuration, connect to the brokers and check topics, group and input shape; create and write nothing",
		Long: `Check does what run --check-config does (every problem of the
configuration on its own line, or "config ok" and the calibration), then
connects to the brokers as run would (TLS, SASL) and checks, one line each:

  connect          the brokers answer (an unreachable broker fails within --timeout)
  input topics     each exists (never created), and its message.timestamp.type
  output, state,   each exists, or may be created (a create request that only
  partials and     validates: the state and partials topics always, the output
  dead-letter      and dead-letter topics with kafka.create_topics)
  consumer group   its committed offsets can be read
  input shape      the latest records (--sample, spread over the partitions)
                   carry every configured field with a type its role accepts;
                   prints field names only, never values

It writes no record (a test record would be visible to the output's readers)
and creates nothing. Each line starts with ok, warn, FAIL or skip; the exit
status is 1 when a line says FAIL.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			cfg, err := configCheck(out, file, cmd.Flags())
			if err != nil {
				return err
			}
			return connectCheck(cmd.Context(), out, cfg, opts)
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "YAML config file (optional: environment and flags suffice)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", operator.DefaultCheckTimeout, "time limit of the checks that talk to the brokers")
	cmd.Flags().IntVar(&opts.Sample, "sample", 1000, "most input records read for the input-shape check (the latest ones)")
	operator.AddFlags(cmd.Flags())
	return cmd
}

// connectCheck runs operator.Check and prints a line per check; it fails
// when one failed.
func connectCheck(ctx context.Context, out io.Writer, cfg operator.Config, opts operator.CheckOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	failed := 0
	for _, r := range operator.Check(ctx, cfg, opts) {
		fmt.Fprintln(out, r)
		if r.Status == operator.CheckFail {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("check: %w (%d)", operator.ErrCheckFailed, failed)
	}
	fmt.Fprintln(out, "check ok")
	return nil
}

// configCheck validates the configuration of file and flags, every
// problem at once (types and unknown keys, the settings, the files, the
// key, then the calibration), and prints each on its own line of out, or
// "config ok" and the calibration. It returns errCheckFailed when there
// are problems.
func configCheck(out io.Writer, file string, flags *pflag.FlagSet) (operator.Config, error) {
	cfg, problems, err := operator.LoadAll(file, flags)
	if err != nil {
		return cfg, err
	}
	for _, p := range cfg.Problems() {
		// A bad value was reset to its default: its own line above says
		// what is wrong with it.
		if !slices.ContainsFunc(problems, func(q string) bool { k, _, _ := strings.Cut(p, ":"); return strings.HasPrefix(q, k+":") }) {
			problems = append(problems, p)
		}
	}
	fileProblems := cfg.FileProblems()
	problems = append(problems, fileProblems...)
	if len(fileProblems) == 0 {
		// The key must be loadable too (never printed).
		if _, _, err := keyfile.Load(cfg.Privacy.KeyFile, cfg.Privacy.KeyEnv, false); err != nil {
			problems = append(problems, err.Error())
		}
	}
	var note string
	if len(problems) == 0 {
		// Calibration of every vector (infeasible budgets).
		op, err := operator.New(cfg)
		if err != nil {
			problems = append(problems, err.Error())
		} else {
			note = op.Note()
		}
	}
	for _, p := range problems {
		fmt.Fprintln(out, p)
	}
	if len(problems) > 0 {
		return cfg, fmt.Errorf("%w (%d)", errCheckFailed, len(problems))
	}
	fmt.Fprintln(out, "config ok")
	// What the plan derived: every part's mechanism, scale and
	// sensitivity, and the budget (also in every release's note;
	// dpstream plan says more).
	fmt.Fprintln(out, "calibration:", note)
	return cfg, nil
}
