package operator

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dpstream/dpstream/schema"
)

// factBenchGroups is the number of public groups of
// BenchmarkFactorizedRelease.
const factBenchGroups = 10

// BenchmarkFactorizedRelease measures the release of the last window
// (t = T − 1, the costliest) of a horizon of T windows for 10 public
// groups, count and sum by the factorization (20 series), through
// releaseWindow (noise, decoding, intervals and encoding; no running
// record). "uncached" is the code before the noise cache (regenerate
// z_0…z_t and decode them: O(t) exact draws and O(t²) integer steps per
// series); "cached" holds z_0…z_{t−1} decoded (the steady state: every
// series is cut back to t values before each release), so a release
// draws z_t and decodes one step. Run with
//
//	go test -run '^$' -bench BenchmarkFactorizedRelease -benchtime 3x -count 5 ./operator
func BenchmarkFactorizedRelease(b *testing.B) {
	for _, T := range []int{16, 256, 1440} {
		c := factConfig(T, "gaussian")
		c.Privacy.PublicGroups = nil
		var groups []string
		for i := range factBenchGroups {
			g := fmt.Sprintf("g%02d", i)
			c.Privacy.PublicGroups = append(c.Privacy.PublicGroups, []string{g})
			groups = append(groups, schema.MakeGroup(g))
		}
		o, err := New(c, WithKey(testKey()))
		if err != nil {
			b.Fatal(err)
		}
		hs, _ := o.plan.horizonOf(testBase)
		ws := truthWindows(rand.New(rand.NewPCG(1, 2)), hs, o.plan.size, T, groups)
		last := &ws[T-1]
		release := func() {
			if _, _, _, err := o.plan.releaseWindow(last, o.key, c.Kafka.namespace(), o.instance, nil); err != nil {
				b.Fatal(err)
			}
		}
		for _, cached := range []bool{false, true} {
			name := fmt.Sprintf("T=%d/uncached", T)
			if cached {
				name = fmt.Sprintf("T=%d/cached", T)
			}
			b.Run(name, func(b *testing.B) {
				o.plan.fcache = nil
				if cached {
					o.plan.fcache = newFactCache(factCacheMaxValues)
					release() // fills z_0…z_{T−1} of every series
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if cached {
						for _, s := range o.plan.fcache.series {
							s.e = s.e[:T-1]
						}
					}
					release()
				}
			})
		}
	}
}
