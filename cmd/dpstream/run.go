package main

import (
	"errors"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dpstream/dpstream/operator"
)

func init() { commands = append(commands, newRunCmd) }

func newRunCmd() *cobra.Command {
	var (
		file    string
		check   bool
		connect bool
	)
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Run the sidecar: consume events, publish private window aggregates",
		Long: `Run consumes the input topics with a consumer group, aggregates events into
event-time windows with per-unit contribution bounds, and publishes every
closed window's noised aggregates to the output topic.

Configuration: a YAML file (--config), DPSTREAM_* environment variables
(kafka.group_id -> DPSTREAM_KAFKA_GROUP_ID) and flags, in increasing
precedence. --check-config validates and exits without connecting: it prints
every problem on its own line, or "config ok" followed by the calibration
(every part's mechanism, scale and derived sensitivity); with --connect it
then checks the brokers, topics, group and input shape as dpstream check
does. SIGTERM or SIGINT drains: closed windows are published, final offsets
committed, and the process exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if connect && !check {
				return errors.New("run: --connect needs --check-config (or use dpstream check)")
			}
			if check {
				cfg, err := configCheck(out, file, cmd.Flags())
				if err != nil || !connect {
					return err
				}
				return connectCheck(cmd.Context(), out, cfg, operator.CheckOptions{})
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
	cmd.Flags().BoolVar(&check, "check-config", false, "validate the configuration and exit (offline: nothing is connected)")
	cmd.Flags().BoolVar(&connect, "connect", false, "with --check-config: also connect and check the brokers, topics, group and input shape, as dpstream check")
	operator.AddFlags(cmd.Flags())
	return cmd
}
