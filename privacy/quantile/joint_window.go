package quantile

// transition returns next[i][h] = Σ_{h'>h} exp(−γ|C_{h'} − C_h − τ_i|)·b[h']
// for every group h in O(G) products and sums of positive numbers (no
// subtraction, so no cancellation). With T' the least integer ≥ τ_i and
// p(h) the first h' > h with C_{h'} ≥ C_h + T' (non-increasing as h
// decreases):
//
//   - the suffix h' ≥ p(h) contributes exp(−γ(C_p − C_h − T'))·ρ_up·U(p),
//     with U(h) = b[h] + β^(C_{h+1} − C_h)·U(h+1);
//   - the window h < h' < p(h) contributes ρ_down·Σ β^(C_h + ⌊τ_i⌋ −
//     C_{h'})·b[h'] (all exponents ≥ 0), kept in a two-stack queue
//     (window) that slides left as h decreases.
func (dp *jointDP) transition(i int, b []xfloat) []xfloat {
	g, c := len(b), dp.c
	u := make([]xfloat, g)
	u[g-1] = b[g-1]
	for h := g - 2; h >= 0; h-- {
		u[h] = xadd(b[h], xmulOne(dp.pow(c[h+1]-c[h]), u[h+1]))
	}
	out := make([]xfloat, g)
	w := &window{dp: dp, b: b, agg: make([]xfloat, g), fLo: 0, fHi: -1, bLo: 0, bHi: -1}
	p := g
	for h := g - 1; h >= 0; h-- {
		for p-1 > h && c[p-1] >= c[h]+dp.tauUp[i] {
			p--
		}
		if h+1 < g {
			w.pushLeft(h + 1)
		}
		for w.right() >= p {
			w.popRight()
		}
		var up xfloat
		if p < g {
			up = xmulOne(xmulOne(dp.pow(c[p]-c[h]-dp.tauUp[i]), u[p]), dp.rhoUp[i])
		}
		out[h] = xadd(up, w.sum(c[h]+dp.tauInt[i], dp.rhoDown[i]))
	}
	return out
}

// window is the contiguous range of groups [bLo, fHi] of a transition's
// window term as a queue of two stacks: the back [bLo, bHi] (pushed on the
// left, summed as bAgg = Σ β^(C_bHi − C_x)·b[x]) and the front [fLo, fHi]
// (popped on the right, agg[x] = Σ_{fLo ≤ y ≤ x} β^(C_x − C_y)·b[y]),
// bHi + 1 = fLo when both are non-empty. Every element is pushed, moved
// to the front and popped once, and every aggregate is a sum of positive
// terms with non-negative exponents.
type window struct {
	dp       *jointDP
	b        []xfloat
	agg      []xfloat
	bAgg     xfloat
	fLo, fHi int // empty when fLo > fHi
	bLo, bHi int // empty when bLo > bHi
}

// pushLeft adds group x, smaller than every group in the window.
func (w *window) pushLeft(x int) {
	if w.bLo > w.bHi {
		w.bLo, w.bHi, w.bAgg = x, x, w.b[x]
		return
	}
	w.bLo = x
	w.bAgg = xadd(w.bAgg, xmulOne(w.dp.pow(w.dp.c[w.bHi]-w.dp.c[x]), w.b[x]))
}

// right returns the window's largest group, or −1 when it is empty.
func (w *window) right() int {
	if w.fLo <= w.fHi {
		return w.fHi
	}
	if w.bLo <= w.bHi {
		return w.bHi
	}
	return -1
}

// popRight removes the window's largest group (the window is not empty).
func (w *window) popRight() {
	if w.fLo > w.fHi {
		w.fLo, w.fHi = w.bLo, w.bHi
		w.bLo, w.bHi, w.bAgg = 0, -1, xfloat{}
		w.agg[w.fLo] = w.b[w.fLo]
		for x := w.fLo + 1; x <= w.fHi; x++ {
			w.agg[x] = xadd(w.b[x], xmulOne(w.dp.pow(w.dp.c[x]-w.dp.c[x-1]), w.agg[x-1]))
		}
	}
	w.fHi--
}

// sum returns ρ·Σ_{x in the window} β^(top − C_x)·b[x] for top ≥ every
// C_x in the window.
func (w *window) sum(top int64, rho xfloat) xfloat {
	var s xfloat
	if w.fLo <= w.fHi {
		s = xmulOne(w.dp.pow(top-w.dp.c[w.fHi]), w.agg[w.fHi])
	}
	if w.bLo <= w.bHi {
		s = xadd(s, xmulOne(w.dp.pow(top-w.dp.c[w.bHi]), w.bAgg))
	}
	if s.m == 0 {
		return s
	}
	return xmulOne(s, rho)
}
