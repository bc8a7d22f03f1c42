package quantile

import (
	"testing"

	"github.com/dpstream/dpstream/privacy/rng"
)

// BenchmarkJointSmall is one selection on a 12-leaf histogram (the
// per-call overhead: constants and the acceptance coin).
func BenchmarkJointSmall(b *testing.B) {
	c := jointCases[6]
	e := Joint{Leaves: c.leaves, Lower: 0, Upper: 1}
	s := rng.NewStream(rng.Key{}, "bench")
	for b.Loop() {
		if _, err := e.Select(s, c.hist, c.o); err != nil {
			b.Fatal(err)
		}
	}
}
