package quantile

import (
	"errors"
	"math"
	"math/big"
	"testing"
)

// value returns the bracket's ends as big.Floats (in range for the tests'
// arguments).
func (b bracket) value() (lo, hi *big.Float) {
	lo = new(big.Float).SetMantExp(b.lo, int(b.exp))
	return lo, new(big.Float).SetMantExp(b.hi, int(b.exp))
}

// expReference holds exp(−p/q) to 60 significant digits from mpmath at
// 400 bits (testdata/certexp_gen.py prints these lines).
var expReference = []struct {
	p, q int64
	v    string
}{
	{0, 1, "1.0"},
	{1, 7, "8.66877899750181627502932476581602563196531947954813339558845e-1"},
	{1, 1, "3.67879441171442321595523770161460867445811131031767834507837e-1"},
	{1, 3, "7.1653131057378925042560409692537966745311205982147915714087e-1"},
	{5, 2, "8.20849986238987951695286744671598078378041210154366488457584e-2"},
	{1000, 3, "1.71859165605623154036626570725666012240294484614045465717075e-145"},
	{123457, 1024, "4.36462976283987037982007016187199291319179777840456309128791e-53"},
	{3, 4096, "9.99267846280429859382634481917482668077133070620202874026543e-1"},
	{1048576, 1, "1.69567967974683518361922920385450927544048881098011699139988e-455391"},
}

// TestExpNegBounds: at 64, 128 and 180 bits the bracket [lo, hi] of
// exp(−p/q) contains the mpmath value (whose own rounding, a relative
// 1e-59 ≈ 2⁻¹⁹⁶, is allowed for), is at most 2^(3−prec) wide relative to
// it (so refining the coin converges), and an argument beyond 2⁴⁰ is an
// error. A wrong series sign, remainder or rounding direction fails the
// containment.
func TestExpNegBounds(t *testing.T) {
	for _, c := range expReference {
		ref, _, err := big.ParseFloat(c.v, 10, 256, big.ToNearestEven)
		if err != nil {
			t.Fatal(err)
		}
		slack := new(big.Float).SetPrec(256).Mul(ref, big.NewFloat(1e-59))
		for _, prec := range []uint{64, 128, 180} {
			b, err := expNegBounds(big.NewRat(c.p, c.q), prec)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := b.value()
			if new(big.Float).Sub(lo, slack).Cmp(ref) > 0 || new(big.Float).Add(hi, slack).Cmp(ref) < 0 {
				t.Errorf("exp(−%d/%d) at %d bits: [%.30g, %.30g] misses %.30g", c.p, c.q, prec, lo, hi, ref)
			}
			w := new(big.Float).Sub(hi, lo)
			limit := new(big.Float).SetMantExp(ref, 3-int(prec))
			if w.Cmp(limit) > 0 {
				t.Errorf("exp(−%d/%d) at %d bits: width %.3g above 2^(3−prec)·value", c.p, c.q, prec, w)
			}
		}
	}
	if _, err := expNegBounds(new(big.Rat).SetFrac(new(big.Int).Lsh(big.NewInt(1), 63), big.NewInt(1)), 64); !errors.Is(err, errExpRange) {
		t.Errorf("exp(−2^63): error %v", err)
	}
	// exp(−2⁴⁰) = 2^(−1.59·10¹²): beyond big.Float, within the bracket's
	// int64 exponent; its exponent is ⌊−2⁴⁰/ln 2⌋ + 1 (mantissa in [1/2, 1)).
	b, err := expNegBounds(new(big.Rat).SetInt64(1<<40), 64)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(math.Floor(-0x1p40/math.Ln2)) + 1; b.exp != want {
		t.Errorf("exp(−2^40): binary exponent %d, want %d", b.exp, want)
	}
}

// TestCertified: the float64 rounding of the lower end of an 80-bit
// bracket (as the joint sampler's constants) is within (1±u)² of the
// mpmath value: the depth 2 they are given.
func TestCertified(t *testing.T) {
	for _, c := range expReference {
		b, err := expNegBounds(big.NewRat(c.p, c.q), 80)
		if err != nil {
			t.Fatal(err)
		}
		x := xfromBig(b.lo, b.exp, 2)
		ref, _, _ := big.ParseFloat(c.v, 10, 256, big.ToNearestEven)
		got := new(big.Float).SetPrec(256).SetMantExp(big.NewFloat(x.m), int(x.e))
		rel, _ := new(big.Float).Quo(new(big.Float).Sub(got, ref), ref).Float64()
		if x.d != 2 || rel > 2*unitRoundoff || rel < -2*unitRoundoff {
			t.Errorf("exp(−%d/%d): relative error %g (depth %d), want within 2u", c.p, c.q, rel, x.d)
		}
	}
}
