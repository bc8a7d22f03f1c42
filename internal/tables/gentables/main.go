// Command gentables regenerates privacy/table_data.go, the precomputed
// scale tables of package privacy, from the exact solvers. It is run by
// `go generate ./privacy`; `dpstream tables` does the same.
//
// Usage (from the privacy directory):
//
//	go run ../internal/tables/gentables -o table_data.go
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dpstream/dpstream/internal/tables"
)

func main() {
	out := flag.String("o", "table_data.go", "output file")
	flag.Parse()
	if err := tables.WriteFile(*out, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gentables:", err)
		os.Exit(1)
	}
}
