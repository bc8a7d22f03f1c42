// Package quantile turns a noised hierarchical histogram (a quantile tree)
// into quantiles with confidence intervals, or selects quantiles from the
// exact leaf histogram by permute-and-flip or the joint exponential
// mechanism: dpstream's quantiles aggregate.
//
// The tree (Tree) covers [Lower, Upper] with Branching^Depth leaves of
// equal width; the operator noises its nodes with an exact integer
// mechanism of package privacy, and everything here is post-processing of
// that noised vector, so it costs no privacy: the consistent estimator of
// Hay, Rastogi, Miklau & Suciu (PVLDB 2010), a top-down walk for the
// estimates, and union-bound intervals (RankBound, Intervals) that hold for
// every rank at once with probability at least 1 − β, with the rank error
// of any value in them bounded by RankError.
//
// Exponential is the alternative: every rank is one permute-and-flip
// selection (the exponential mechanism's ε-DP improvement) among the leaf
// edges, from the exact leaf counts, sampled exactly from the release's
// keyed stream; its rank error has a stated tail bound (RankError).
//
// Joint selects all ranks of a group in one draw by the joint exponential
// mechanism (Gillenwater, Joseph & Kulesza 2021) over non-decreasing
// tuples of leaf edges, at the selection's whole ε: sampled exactly by a
// float proposal over the histogram's groups of equal prefix count, with
// certified rounding bounds (xfloat, expNegBounds), corrected by an exact
// rejection whose coin compares a lazily drawn uniform with certified
// bounds of the acceptance probability (lazyBernoulli).
//
// The package is pure computation (no file, clock or network; privacy's
// TestPurity checks the imports).
package quantile
