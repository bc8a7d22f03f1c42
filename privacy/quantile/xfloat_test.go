package quantile

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// xbig returns x exactly as a big.Float.
func xbig(x xfloat) *big.Float {
	return new(big.Float).SetPrec(0).SetMantExp(big.NewFloat(x.m), int(x.e))
}

// exactBits holds any of TestXfloatDepth's exact values: at most 40
// operations, each adding at most 4053 bits (a 53-bit mantissa 4000
// binades away).
const exactBits = 1 << 18

// TestXfloatDepth checks the depth rule on random expressions: 2000
// random sums and products of positive numbers with exponents spread
// over ±2000 (beyond float64's range) and ±70 (the dropped-term case of
// xadd), evaluated alongside exactly in big.Float; each result must lie
// within (1±u)^d of the exact value (checked as |x̃/x − 1| ≤ d·u·(1 +
// 1e-6), which (1±u)^d implies to first order; d ≤ 200 here). A dropped
// rounding count or a wrong normalisation fails it.
func TestXfloatDepth(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		spread := []int{2000, 70}[trial%2]
		x := xfromFloat(0.5+r.Float64()/2, 0)
		x.e = int64(r.IntN(2*spread) - spread)
		exact := xbig(x)
		for range 1 + r.IntN(40) {
			y := xfromFloat(0.5+r.Float64()/2, 0)
			y.e = int64(r.IntN(2*spread) - spread)
			if r.IntN(2) == 0 {
				x = xmul(x, y)
				exact = new(big.Float).SetPrec(exactBits).Mul(exact, xbig(y))
			} else {
				x = xadd(x, y)
				exact = new(big.Float).SetPrec(exactBits).Add(exact, xbig(y))
			}
			if exact.Acc() != big.Exact {
				t.Fatal("the reference rounded")
			}
		}
		ratio, _ := new(big.Float).SetPrec(256).Quo(xbig(x), exact).Float64()
		if d := float64(x.d); math.Abs(ratio-1) > d*unitRoundoff*(1+1e-6) {
			t.Fatalf("trial %d: relative error %g beyond depth %d", trial, ratio-1, x.d)
		}
	}
}

// TestXceilScaled: ⌈x·2^shift⌉ exactly, against big.Float, including
// tiny values (1) and exact integers (no increment).
func TestXceilScaled(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		x := xfromFloat(0.5+r.Float64()/2, 0)
		x.e = int64(r.IntN(200) - 100)
		shift := int64(62 - int(x.e) - r.IntN(120))
		got := xceilScaled(x, shift)
		v := new(big.Float).SetPrec(0).SetMantExp(xbig(x), int(shift))
		i, acc := v.Int(nil)
		if acc == big.Below {
			i.Add(i, big.NewInt(1))
		}
		if !i.IsUint64() || i.Uint64() != got {
			t.Fatalf("⌈%v·2^%d⌉ = %v, got %d", xbig(x), shift, i, got)
		}
	}
}
