package privacy

import (
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/dpstream/dpstream/privacy/rng"
)

// BenchmarkSample measures samples per second of every mechanism's sampler
// through the Mechanism interface, next to insecure baselines in the same run:
// gonum's distuv.Laplace and distuv.Normal fed by math/rand/v2's PCG, and
// the raw ChaCha8 and PCG word rates. Compare ratios within one run, e.g.
//
//	go test -run '^$' -bench 'BenchmarkSample' -benchtime 2s ./privacy
//
// (the goal: Laplace and Gaussian ≥ 30 M samples/s and within 2× of
// the baselines).
func BenchmarkSample(b *testing.B) {
	key := rng.Key{1}
	mechs := []Mechanism{
		Laplace{}, Logistic{}, Gaussian{}, Subbotin{R: 1.5}, Subbotin{R: 4}, Cauchy{},
		Stable{Alpha: 1.5}, DiscreteLaplace{}, DiscreteGaussian{},
	}
	for _, m := range mechs {
		scale := 3.0
		b.Run(m.Name(), func(b *testing.B) {
			s := rng.NewStream(key, "bench")
			var sum float64
			for b.Loop() {
				sum += m.Sample(s, scale)
			}
			benchSink = sum
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
	b.Run("laplace-fill", func(b *testing.B) {
		s := rng.NewStream(key, "bench")
		buf := make([]float64, 1024)
		n := 0
		for b.Loop() {
			Laplace{}.Fill(s, 3, buf)
			n += len(buf)
		}
		benchSink = buf[0]
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "samples/s")
	})
	b.Run("gaussian-fill", func(b *testing.B) {
		s := rng.NewStream(key, "bench")
		buf := make([]float64, 1024)
		n := 0
		for b.Loop() {
			Gaussian{}.Fill(s, 3, buf)
			n += len(buf)
		}
		benchSink = buf[0]
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "samples/s")
	})
	b.Run("baseline-laplace-pcg", func(b *testing.B) {
		d := distuv.Laplace{Mu: 0, Scale: 3, Src: rand.NewPCG(1, 2)}
		var sum float64
		for b.Loop() {
			sum += d.Rand()
		}
		benchSink = sum
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	})
	b.Run("baseline-normal-pcg", func(b *testing.B) {
		d := distuv.Normal{Mu: 0, Sigma: 3, Src: rand.NewPCG(1, 2)}
		var sum float64
		for b.Loop() {
			sum += d.Rand()
		}
		benchSink = sum
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	})
	b.Run("baseline-words-chacha8", func(b *testing.B) {
		s := rng.NewStream(key, "bench")
		var sum uint64
		for b.Loop() {
			sum += s.Uint64()
		}
		benchSink = float64(sum)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	})
	b.Run("baseline-words-pcg", func(b *testing.B) {
		p := rand.NewPCG(1, 2)
		var sum uint64
		for b.Loop() {
			sum += p.Uint64()
		}
		benchSink = float64(sum)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	})
}

var benchSink float64
