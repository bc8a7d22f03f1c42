package main

// completion.go completes flag values in the shells cobra's `completion`
// command supports (bash, zsh, fish, powershell): mechanism names,
// log levels and formats, error measures, config keys for --set, and YAML
// files for --config.

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/dpstream/dpstream/operator"
)

// mechanismValues are the completions of --mechanism (calibrate also
// takes "all"; the operator refuses cauchy and sas:A with a message).
var mechanismValues = []string{
	"laplace", "gaussian", "logistic", "discrete-laplace", "discrete-gaussian",
	"subbotin:1.5", "subbotin:3", "cauchy", "sas:1.5", "gaussian-classic", "auto", "all",
}

// flagValues are the fixed completions per flag name.
var flagValues = map[string][]string{
	"mechanism":  mechanismValues,
	"log-level":  {"debug", "info", "warn", "error"},
	"log-format": {"json", "text"},
	"error":      {"variance", "mae"},
}

// registerCompletions adds value completions to every flag of root's
// subcommands that has fixed values, --set (config keys) and --config.
func registerCompletions(root *cobra.Command) {
	for _, c := range root.Commands() {
		fs := c.Flags()
		for name, vals := range flagValues {
			if fs.Lookup(name) == nil {
				continue
			}
			_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(vals, cobra.ShellCompDirectiveNoFileComp))
		}
		if fs.Lookup("set") != nil {
			_ = c.RegisterFlagCompletionFunc("set", func(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
				var out []string
				for _, k := range operator.ConfigKeys() {
					if strings.HasPrefix(k, prefix) {
						out = append(out, k+"=")
					}
				}
				return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
			})
		}
		if fs.Lookup("config") != nil {
			_ = c.MarkFlagFilename("config", "yaml", "yml")
		}
	}
}
