package stable

import "math"

// Gauss–Kronrod 7/15-point rule on [−1, 1]: the abscissae and weights of
// QUADPACK's qk15 (Piessens et al., 1983). xgk15[1], xgk15[3], xgk15[5] and
// xgk15[7] are the 7-point Gauss–Legendre nodes with weights wg7. The Kronrod
// rule is exact for polynomials of degree ≤ 22, the Gauss rule for degree ≤ 13
// (TestGaussKronrodExact checks both).
var (
	xgk15 = [8]float64{
		0.991455371120812639206854697526329,
		0.949107912342758524526189684047851,
		0.864864423359769072789712788640926,
		0.741531185599394439863864773280788,
		0.586087235467691130294144845693013,
		0.405845151377397166906606412076961,
		0.207784955007898467600689403773245,
		0,
	}
	wgk15 = [8]float64{
		0.022935322010529224963732008058970,
		0.063092092629978553290700663189204,
		0.104790010322250183839876322541518,
		0.140653259715525918745189590510238,
		0.169004726639267902826583426598550,
		0.190350578064785409913256402421014,
		0.204432940075298892414161999234649,
		0.209482141084727828012999174891714,
	}
	wg7 = [4]float64{
		0.129484966168869693270611432679082,
		0.279705391489276667901467771423780,
		0.381830050505118944950369775488975,
		0.417959183673469387755102040816327,
	}
)

// gk15 integrates f over [a, b] with the Kronrod rule and returns the
// estimate and |Kronrod − Gauss| as an error estimate.
func gk15(f func(float64) float64, a, b float64) (sum, errEst float64) {
	c := 0.5 * (a + b)
	h := 0.5 * (b - a)
	fc := f(c)
	k := fc * wgk15[7]
	g := fc * wg7[3]
	for j := 0; j < 7; j++ {
		dx := h * xgk15[j]
		s := f(c-dx) + f(c+dx)
		k += wgk15[j] * s
		if j%2 == 1 {
			g += wg7[j/2] * s
		}
	}
	return k * h, math.Abs((k - g) * h)
}

// quadPiece is one subinterval of an adaptive integration.
type quadPiece struct{ a, b, sum, err float64 }

// maxQuadPieces bounds the work of one adaptive integration (each piece costs
// 15 integrand evaluations).
const maxQuadPieces = 200

// integrate is a globally adaptive Gauss–Kronrod integrator (the QAG scheme of
// QUADPACK without extrapolation) over the consecutive intervals given by the
// increasing breakpoints pts. It bisects the piece with the largest error
// estimate until the summed |Kronrod − Gauss| estimate is at most
// relTol·|integral|. It reports false if the budget of pieces ran out first.
// The integrand must be finite on the open intervals.
func integrate(f func(float64) float64, pts []float64, relTol float64, buf []quadPiece) (float64, bool) {
	pieces := buf[:0]
	var total, errSum float64
	for i := 0; i+1 < len(pts); i++ {
		if !(pts[i+1] > pts[i]) {
			continue
		}
		s, e := gk15(f, pts[i], pts[i+1])
		pieces = append(pieces, quadPiece{pts[i], pts[i+1], s, e})
		total += s
		errSum += e
	}
	for errSum > relTol*math.Abs(total) {
		if len(pieces) >= maxQuadPieces {
			return total, false
		}
		worst := 0
		for i := range pieces {
			if pieces[i].err > pieces[worst].err {
				worst = i
			}
		}
		p := pieces[worst]
		m := 0.5 * (p.a + p.b)
		if !(m > p.a && m < p.b) { // interval at floating-point resolution
			return total, false
		}
		s1, e1 := gk15(f, p.a, m)
		s2, e2 := gk15(f, m, p.b)
		pieces[worst] = quadPiece{p.a, m, s1, e1}
		pieces = append(pieces, quadPiece{m, p.b, s2, e2})
		// Re-sum rather than update incrementally so rounding does not
		// accumulate over many refinements.
		total, errSum = 0, 0
		for _, q := range pieces {
			total += q.sum
			errSum += q.err
		}
	}
	return total, true
}
