package quantile

import (
	"math/big"
	"math/bits"
)

// jointDP holds a joint selection's groups, certified constants and
// backward messages (see Joint's doc comment, "Exact sampling").
//
// Groups: C(j) only changes after a non-empty leaf, so with non-empty
// leaves l_1 < … < l_m the edges fall into G = m+1 runs of equal C:
// group 0 = edges [0, l_1], group h = [l_h + 1, l_{h+1}], group m = [l_m
// + 1, L], of sizes s_h ≥ 1 and prefix counts C_h (strictly increasing).
// A tuple is a chain of blocks (r ≥ 1 consecutive ranks in one group,
// C(s_h + r − 1, r) edge tuples each), so π factorises along the chain.
//
// Messages: next[i][h] (i = 2 … k+1) is the total weight of placing
// ranks i … k after a block that ended at rank i−1 in group h (for i =
// k+1 the last term exp(−γ|N − C_h − τ_{k+1}|)); B_i(h) = Σ_r
// C(s_h+r−1, r)·inner(i, r)·next[i+r][h] is the weight of ranks i … k
// when rank i starts a block in group h, and next[i][h] = Σ_{h'>h}
// exp(−γ|C_{h'} − C_h − τ_i|)·B_i(h'). Each level's messages are stored
// as values (depth 0 for the level that uses them) with their largest
// depth in dN: the local depth the acceptance bound needs.
type jointDP struct {
	k     int
	n     int64   // N
	start []int64 // first edge of each group
	size  []int64 // s_h
	c     []int64 // C_h

	gamma      *big.Rat
	tauInt     []int64 // ⌊τ_i⌋, i = 1 … k+1
	tauFrac    []*big.Rat
	tauUp      []int64  // T' = the least integer ≥ τ_i
	rhoUp      []xfloat // exp(−γ(T' − τ_i)): 1 when τ_i is an integer
	rhoDown    []xfloat // exp(−γ(τ_i − ⌊τ_i⌋))
	betaPow    []xfloat // exp(−γ·2^j)
	powTab     []xfloat // pow(n) for n < powTabSize, memoised
	powHigh    []xfloat // pow(n·powTabSize) for n < powTabSize
	inner      [][]xfloat
	next       [][]xfloat // next[i], i = 2 … k+1
	dN         []int64    // the largest depth of next[i]
	dTerm      []int64    // the largest depth of a term at level i
	maxJump    int64      // a bound on jump's depth
	candidates int        // a bound on the candidates of one step
	slackNum   *big.Int   // the acceptance bound's factor F = slackNum/slackDen
	slackDen   *big.Int
}

// newJointDP builds the groups, certifies the constants and computes the
// messages for the prefix counts sc of L leaves and the ranks qs.
func newJointDP(sc *scores, leaves, k int, qs []float64, gamma *big.Rat) (*jointDP, error) {
	g := len(sc.leaves) + 1
	dp := &jointDP{k: k, n: sc.prefix[len(sc.prefix)-1], gamma: gamma,
		start: make([]int64, g), size: make([]int64, g), c: sc.prefix}
	prev := int64(-1)
	for h, l := range sc.leaves {
		dp.start[h], dp.size[h] = prev+1, int64(l.Leaf)-prev
		prev = int64(l.Leaf)
	}
	dp.start[g-1], dp.size[g-1] = prev+1, int64(leaves)-prev
	if err := dp.constants(qs); err != nil {
		return nil, err
	}
	dp.messages()
	dp.candidates = g * k
	return dp, nil
}

// constants computes τ_i = (q_i − q_{i−1})·N exactly (q_0 = 0, q_{k+1} =
// 1) and certifies exp(−γ·2^j) for every bit of N, the per-rank factors
// and the within-block products inner(i, r) = Π_{l=i+1}^{i+r−1}
// exp(−γτ_l).
func (dp *jointDP) constants(qs []float64) error {
	k := dp.k
	dp.tauInt, dp.tauUp = make([]int64, k+2), make([]int64, k+2)
	dp.tauFrac = make([]*big.Rat, k+2)
	dp.rhoUp, dp.rhoDown = make([]xfloat, k+2), make([]xfloat, k+2)
	nbits := bits.Len64(uint64(dp.n))
	// exp(−γ·2^j) by squaring a bracket of exp(−γ) with directed rounding:
	// at 80 + 2·nbits bits the bracket's relative width stays below
	// 2^−78 after nbits squarings, so the float64 rounding of its lower
	// end is within (1±u)² of the value (depth 2; TestCertified).
	wp := uint(80 + 2*nbits)
	b, err := expNegBounds(dp.gamma, wp)
	if err != nil {
		return err
	}
	bj := b
	dp.betaPow = make([]xfloat, nbits)
	for j := range dp.betaPow {
		if j > 0 {
			bj = bj.mul(bj, wp)
		}
		dp.betaPow[j] = xfromBig(bj.lo, bj.exp, 2)
	}
	nb := new(big.Rat).SetInt64(dp.n)
	for i := 1; i <= k+1; i++ {
		q, p := 1.0, 0.0
		if i <= k {
			q = qs[i-1]
		}
		if i > 1 {
			p = qs[i-2]
		}
		tau := new(big.Rat).Sub(new(big.Rat).SetFloat64(q), new(big.Rat).SetFloat64(p))
		tau.Mul(tau, nb)
		t := new(big.Int).Quo(tau.Num(), tau.Denom())
		dp.tauInt[i], dp.tauUp[i] = t.Int64(), t.Int64()
		dp.tauFrac[i] = tau.Sub(tau, new(big.Rat).SetInt(t))
		dp.rhoUp[i], dp.rhoDown[i] = xone, xone
		if dp.tauFrac[i].Sign() == 0 {
			continue
		}
		dp.tauUp[i]++
		// ρ_down = exp(−γf) certified; ρ_up = exp(−γ(1−f)) = exp(−γ)/ρ_down
		// on the brackets (both relative widths below 2^−79).
		d, err := expNegBounds(new(big.Rat).Mul(dp.gamma, dp.tauFrac[i]), wp)
		if err != nil {
			return err
		}
		dp.rhoDown[i] = xfromBig(d.lo, d.exp, 2)
		u := b.quo(d, wp)
		dp.rhoUp[i] = xfromBig(u.lo, u.exp, 2)
	}
	dp.powTab = make([]xfloat, min(dp.n+1, powTabSize))
	for n := range dp.powTab {
		dp.powTab[n] = dp.powBits(int64(n))
	}
	dp.powHigh = make([]xfloat, min(dp.n/powTabSize+1, powTabSize))
	for n := range dp.powHigh {
		dp.powHigh[n] = dp.powBits(int64(n) * powTabSize)
	}
	// pow's depth: p ≤ nbits factors of depth 2 and p − 1 products; the
	// factor ρ adds 2 and one product.
	dp.maxJump = 3*int64(nbits) + 2
	dp.inner = make([][]xfloat, k+1)
	for i := 1; i <= k; i++ {
		dp.inner[i] = make([]xfloat, k-i+2)
		dp.inner[i][1] = xone
		for r := 2; r <= k-i+1; r++ {
			l := i + r - 1
			dp.inner[i][r] = xmul(dp.inner[i][r-1], xmulOne(dp.pow(dp.tauInt[l]), dp.rhoDown[l]))
		}
	}
	return nil
}

// xmulOne returns a·b, skipping the rounding when either is exactly 1.
func xmulOne(a, b xfloat) xfloat {
	if a == xone {
		return b
	}
	if b == xone {
		return a
	}
	return xmul(a, b)
}

// powTabSize is the number of powers in each of pow's two tables (most
// arguments are count differences between neighbouring groups).
const powTabSize = 1 << 12

// pow returns β^n = exp(−γ·n) for 0 ≤ n ≤ N: the product of the certified
// exp(−γ·2^j) over n's bits (depth ≤ 3·bitlen(N) − 1), from two tables
// for n < 2²⁴: powTab[n mod 2¹²]·powHigh[n / 2¹²], each a product over
// its bits, so the depth bound holds for the product too (3p₁ − 1 + 3p₂
// − 1 + 1 = 3(p₁+p₂) − 1).
func (dp *jointDP) pow(n int64) xfloat {
	if n < int64(len(dp.powTab)) {
		return dp.powTab[n]
	}
	if hi := n / powTabSize; hi < int64(len(dp.powHigh)) {
		return xmulOne(dp.powTab[n%powTabSize], dp.powHigh[hi])
	}
	return dp.powBits(n)
}

// powBits is pow without the memo.
func (dp *jointDP) powBits(n int64) xfloat {
	r := xone
	for j := 0; n > 0; j, n = j+1, n>>1 {
		if n&1 == 1 {
			r = xmulOne(r, dp.betaPow[j])
		}
	}
	return r
}

// jump returns exp(−γ|δ − τ_i|) for a count δ ≥ 0 between two blocks:
// β^(δ−T')·exp(−γ(T'−τ_i)) when δ ≥ τ_i, else β^(⌊τ_i⌋−δ)·exp(−γ(τ_i −
// ⌊τ_i⌋)) (δ < τ_i means δ ≤ ⌊τ_i⌋, and δ ≤ ⌊τ_i⌋ − 1 when τ_i is an
// integer).
func (dp *jointDP) jump(i int, delta int64) xfloat {
	if delta >= dp.tauUp[i] {
		return xmulOne(dp.pow(delta-dp.tauUp[i]), dp.rhoUp[i])
	}
	return xmulOne(dp.pow(dp.tauInt[i]-delta), dp.rhoDown[i])
}

// terms calls fn(r, t) for r = 1 … k−i+1 with t = C(s_h+r−1, r)·inner(i,
// r)·next[i+r][h] (the messages at depth 0): the weight of a block of r
// ranks from rank i in group h, with what follows it. The multiset count
// is built as C(s, 1) = s (exact), C(s+r−1, r) = C(s+r−2, r−1)·((s+r−1)/r)
// (a division and a product: depth + 2).
func (dp *jointDP) terms(i, h int, fn func(r int, t xfloat)) {
	s := dp.size[h]
	mult := xfromFloat(float64(s), 0)
	for r := 1; r <= dp.k-i+1; r++ {
		if r > 1 {
			mult = xmulOne(mult, xfromFloat(float64(s+int64(r)-1)/float64(r), 1))
		}
		nx := dp.next[i+r][h]
		nx.d = 0
		fn(r, xmul(xmulOne(mult, dp.inner[i][r]), nx))
	}
}

// messages computes next[k+1] … next[2] and every level's depths.
func (dp *jointDP) messages() {
	k, g := dp.k, len(dp.c)
	dp.next = make([][]xfloat, k+2)
	dp.dN, dp.dTerm = make([]int64, k+2), make([]int64, k+2)
	last := make([]xfloat, g)
	for h := range last {
		last[h] = dp.jump(k+1, dp.n-dp.c[h])
		dp.dN[k+1] = max(dp.dN[k+1], int64(last[h].d))
	}
	dp.next[k+1] = last
	b := make([]xfloat, g)
	for i := k; i >= 1; i-- {
		for h := range b {
			b[h] = xfloat{}
			dp.terms(i, h, func(_ int, t xfloat) {
				b[h] = xadd(b[h], t)
				dp.dTerm[i] = max(dp.dTerm[i], int64(t.d))
			})
		}
		if i >= 2 {
			dp.next[i] = dp.transition(i, b)
			for _, x := range dp.next[i] {
				dp.dN[i] = max(dp.dN[i], int64(x.d))
			}
		}
	}
}
