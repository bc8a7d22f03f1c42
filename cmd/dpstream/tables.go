package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/dpstream/dpstream/internal/tables"
)

func init() { commands = append(commands, newTablesCmd) }

// errTablesStale is returned by `tables --check` when the checked-in file
// differs from a fresh generation.
var errTablesStale = errors.New("tables: the scale tables are out of date; run `dpstream tables` (or go generate ./privacy)")

func newTablesCmd() *cobra.Command {
	var (
		out   string
		check bool
	)
	cmd := &cobra.Command{
		Use:   "tables [--out privacy/table_data.go] [--check]",
		Short: "Regenerate the precomputed noise scale tables",
		Long: `Tables recomputes every precomputed scale table of package privacy with
its exact solver (Gaussian, Subbotin on its R grid, SαS on its α grid) and
writes the Go source file privacy/table_data.go, the same file that
"go generate ./privacy" writes. Run it from the repository root. It prints
the interpolation error measured on every table and fails, leaving the old
file in place, if a table is not accurate enough.

--check regenerates in memory and fails if the file on disk differs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			progress := cmd.ErrOrStderr()
			if check {
				old, err := os.ReadFile(out)
				if err != nil {
					return fmt.Errorf("tables: %w", err)
				}
				var b bytes.Buffer
				if err := tables.Generate(&b, progress); err != nil {
					return err
				}
				if !bytes.Equal(old, b.Bytes()) {
					return errTablesStale
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s is up to date\n", out)
				return nil
			}
			if err := tables.WriteFile(out, progress); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "privacy/table_data.go", "file to write (or check)")
	cmd.Flags().BoolVar(&check, "check", false, "only check that the file is up to date")
	return cmd
}
