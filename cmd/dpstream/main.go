// Command dpstream is a Kafka sidecar that publishes differentially private
// aggregates of event streams.
//
// Subcommands: run (the sidecar), demo (a self-contained run on an embedded
// broker), calibrate, compare, noise and tables.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// commands holds the constructors of the subcommands; each subcommand's file
// adds its own in an init function, so commands live one per file.
var commands []func() *cobra.Command

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "dpstream",
		Short:         "Differentially private aggregates of Kafka event streams",
		Version:       buildVersion(), // --version; see version.go
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, c := range commands {
		root.AddCommand(c())
	}
	registerCompletions(root) // flag values for shell completion (completion.go)
	return root
}

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "dpstream:", err)
		os.Exit(1)
	}
}
