package privacy

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/dpstream/dpstream/privacy/continual"
)

// calComposedPLDSequential is calComposedPLD as it was before the parts
// were built concurrently: build, self-compose and compose one part after
// the other.
func calComposedPLDSequential(ps []calPart, scales []float64, o PLDOptions) (*PLD, error) {
	var total *PLD
	for i, p := range ps {
		base, err := calPartPLD(p, scales[i], o)
		if err != nil {
			return nil, err
		}
		c, err := base.SelfCompose(p.n)
		if err != nil {
			return nil, err
		}
		if total == nil {
			total = c
		} else {
			total = compose(total, c)
		}
	}
	return total, nil
}

// factorizedParts returns the calibration parts of one factorized count
// over T windows as the operator builds them (vectorNoise.calParts): part
// k a discrete Gaussian of shift r'_k (K = 2^20) and weight ‖r'‖₂/r'_k,
// so every part has the scale κ·‖r'‖₂.
func factorizedParts(tb testing.TB, T int) []calPart {
	tb.Helper()
	f, err := continual.NewFactorization(T, 20)
	if err != nil {
		tb.Fatal(err)
	}
	r := f.Coefficients()
	norm := f.ColumnNorm() * float64(r[0])
	ps := make([]calPart, T)
	for k, rk := range r {
		ps[k] = calPart{Part: Part{Mechanism: DiscreteGaussian{}, L0: 1, Linf: float64(rk)}, w: norm / float64(rk), n: 1, win: 1}
	}
	return ps
}

// TestComposedPLDChunksSequential: calComposedPLD, which builds the parts'
// PLDs concurrently in chunks, returns the sequential composition bit for
// bit (every field of the PLD, reflect.DeepEqual on the float64s) for 64
// factorized discrete Gaussian parts and for 37 mixed parts (several
// chunks, a partial last one, self-compositions), and the sequential
// error — the first failing part's — when parts 21 and 30 fail. This is an
// equivalence with the code before (it passes on it by construction); it
// fails if a chunk is composed out of order (checked by hand: composing
// each chunk in reverse fails the mixed case).
func TestComposedPLDChunksSequential(t *testing.T) {
	mixed := make([]calPart, 37)
	mechs := []Mechanism{DiscreteGaussian{}, Laplace{}, Gaussian{}, DiscreteLaplace{}}
	for i := range mixed {
		mixed[i] = calPart{Part: Part{Mechanism: mechs[i%len(mechs)], L0: 1, Linf: float64(1 + i%5)}, w: 1 + float64(i%7)/3, n: 1 + i%3, win: 1}
	}
	for name, ps := range map[string][]calPart{"factorized": factorizedParts(t, 64), "mixed": mixed} {
		scales := calScales(3*float64(len(ps)), ps)
		if name == "mixed" {
			scales = calScales(20, ps)
		}
		want, err := calComposedPLDSequential(ps, scales, PLDOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := calComposedPLD(ps, scales, PLDOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the chunked composition differs from the sequential one", name)
		}
		if d := got.Delta(1); !(d > 0 && d < 1) {
			t.Fatalf("%s: δ(1) = %v: the test composes nothing", name, d)
		}
		bad := append([]float64(nil), scales...)
		bad[21], bad[30] = math.NaN(), -1
		_, werr := calComposedPLDSequential(ps, bad, PLDOptions{})
		_, gerr := calComposedPLD(ps, bad, PLDOptions{})
		if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
			t.Fatalf("%s: error %v, sequential %v", name, gerr, werr)
		}
	}
}

// BenchmarkFactorizedComposedPLD is one evaluation of the calibration of a
// factorized count (T discrete Gaussian parts at σ_z = 4·‖r'‖₂):
// sequential (the code before) and chunked (calComposedPLD). Run with
//
//	go test -run '^$' -bench BenchmarkFactorizedComposedPLD -count 5 ./privacy
func BenchmarkFactorizedComposedPLD(b *testing.B) {
	for _, T := range []int{256, 1440} {
		ps := factorizedParts(b, T)
		scales := calScales(4, ps)
		for name, f := range map[string]func([]calPart, []float64, PLDOptions) (*PLD, error){
			"sequential": calComposedPLDSequential, "chunked": calComposedPLD,
		} {
			b.Run(fmt.Sprintf("T=%d/%s", T, name), func(b *testing.B) {
				for b.Loop() {
					if _, err := f(ps, scales, PLDOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
