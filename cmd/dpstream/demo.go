package main

import (
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dpstream/dpstream/internal/demo"
)

func init() { commands = append(commands, newDemoCmd) }

// newDemoCmd is dpstream demo: its flags fill a demo.Options, and
// demo.Run does the rest (internal/demo).
func newDemoCmd() *cobra.Command {
	o := demo.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "demo [--windows N] [--events-per-window N] [--seed S] [--epsilon E --delta D --mechanism M] [--json] [--brokers HOST:PORT,...]",
		Short: "Run the real operator on synthetic smart-meter readings and show true vs private results",
		Long: `Demo needs no setup. It starts an embedded in-process Kafka-protocol broker
(or uses --brokers), creates fresh topics, produces a synthetic stream of
smart-meter readings (meters as privacy units, grouped by region, a
histogram of the reading status, the watt-hours of each reading clamped to
[0, 300]; a little bad input and a few late readings mixed in), runs the real
dpstream operator on it in-process, reads the releases back from the output
topic with the schema package's decoder, and prints per window a table of
true versus private values with their confidence intervals, the mechanism,
the noise scale and the budget spent. It stops after --windows windows.

True values are printed only because this is a demo on synthetic data: the
demo computes them itself from the generated readings, with the operator's
contribution bounds. dpstream never publishes them.

--json prints one JSON object per release (true values beside the private
ones) on standard output and everything else on standard error.

The noise key is random for each run unless --key-file gives one. With
--brokers the demo's topics (dpstream-demo-<id>-readings, -releases and
-releases.state) are left on the cluster, e.g. for the Python consumer in
examples/python.`,
		Example: `  dpstream demo
  dpstream demo --windows 5 --events-per-window 10000 --epsilon 0.5 --mechanism gaussian
  dpstream demo --json | jq -c '{key, true: .series[0].true, private: .series[0].private}'
  dpstream demo --brokers 127.0.0.1:9092`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			_, err := demo.Run(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			return err
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Brokers, "brokers", nil, "use these Kafka brokers (host:port) instead of the embedded broker")
	f.IntVar(&o.Windows, "windows", o.Windows, "stop after this many closed windows")
	f.IntVar(&o.EventsPerWindow, "events-per-window", o.EventsPerWindow, "synthetic readings per window")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the synthetic stream (the noise comes from the key, not the seed)")
	f.Float64Var(&o.Epsilon, "epsilon", o.Epsilon, "per-window ε")
	f.Float64Var(&o.Delta, "delta", o.Delta, "per-window δ")
	f.StringVar(&o.Mechanism, "mechanism", o.Mechanism, "noise mechanism (see dpstream calibrate), or auto")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object per release instead of tables")
	f.StringVar(&o.KeyFile, "key-file", "", "secret noise key file (default: a random key for this run)")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "give up if the windows are not published within this time")
	f.StringVar(&o.LogLevel, "log-level", o.LogLevel, "operator log level on standard error: debug, info, warn or error")
	return cmd
}
