package quantile

import (
	"errors"
	"math/big"
	"testing"
)

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
			lo, hi, err := expNegBounds(big.NewRat(c.p, c.q), prec)
			if err != nil {
				t.Fatal(err)
			}
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
	if _, _, err := expNegBounds(big.NewRat(1<<41, 1), 64); !errors.Is(err, errExpRange) {
		t.Errorf("exp(−2^41): error %v", err)
	}
}

// TestCertified: the xfloat of exp(−x) is within (1±u)² of the mpmath
// value (its certified depth 2).
func TestCertified(t *testing.T) {
	for _, c := range expReference {
		x, err := certified(big.NewRat(c.p, c.q))
		if err != nil {
			t.Fatal(err)
		}
		ref, _, _ := big.ParseFloat(c.v, 10, 256, big.ToNearestEven)
		got := new(big.Float).SetPrec(256).SetMantExp(big.NewFloat(x.m), int(x.e))
		rel, _ := new(big.Float).Quo(new(big.Float).Sub(got, ref), ref).Float64()
		if x.d != 2 || rel > 2*unitRoundoff || rel < -2*unitRoundoff {
			t.Errorf("exp(−%d/%d): relative error %g (depth %d), want within 2u", c.p, c.q, rel, x.d)
		}
	}
}
