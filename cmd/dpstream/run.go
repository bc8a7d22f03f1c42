package main

import (
	"errors"
	"fmt"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/operator/keyfile"
)

func init() { commands = append(commands, newRunCmd) }

// errCheckFailed is returned by --check-config when the config has problems
// (they are printed first, one per line).
var errCheckFailed = errors.New("config has problems")

func newRunCmd() *cobra.Command {
	var (
		file  string
		check bool
	)
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Run the sidecar: consume events, publish private window aggregates",
		Long: `Run consumes the input topics with a consumer group, aggregates events into
event-time windows with per-unit contribution bounds, and publishes every
closed window's noised aggregates to the output topic.

Configuration: a YAML file (--config), DPSTREAM_* environment variables
(kafka.group_id -> DPSTREAM_KAFKA_GROUP_ID) and flags, in increasing
precedence. --check-config validates and exits: it prints every problem on
its own line, or "config ok" followed by the calibration (every part's mechanism,
scale and derived sensitivity). SIGTERM or SIGINT drains: closed windows are
published, final offsets committed, and the process exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if check {
				// Every problem at once: types and unknown keys, the
				// settings, the files, the key, then the calibration.
				cfg, problems, err := operator.LoadAll(file, cmd.Flags())
				if err != nil {
					return err
				}
				for _, p := range cfg.Problems() {
					// A bad value was reset to its default: its own
					// line above says what is wrong with it.
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
					return fmt.Errorf("%w (%d)", errCheckFailed, len(problems))
				}
				fmt.Fprintln(out, "config ok")
				// What the plan derived: every part's mechanism, scale and
				// sensitivity, and the budget (also in every release's
				// note; dpstream plan says more).
				fmt.Fprintln(out, "calibration:", note)
				return nil
			}
			cfg, err := operator.Load(file, cmd.Flags())
			if err != nil {
				return err
			}
			op, err := operator.New(cfg, testClockOptions()...)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return op.Run(ctx)
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "YAML config file (optional: environment and flags suffice)")
	cmd.Flags().BoolVar(&check, "check-config", false, "validate the configuration and exit")
	operator.AddFlags(cmd.Flags())
	return cmd
}
