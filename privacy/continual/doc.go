// Package continual is the arithmetic of continual release — running
// totals (prefix sums) of a stream of per-window values — for dpstream:
//
//   - the error of the three ways of releasing prefix sums under a total
//     budget (Errors): summing the per-window releases (the identity
//     factorization, R = I), the binary-tree mechanism (with the plain and
//     Honaker's variance-optimal estimator) and the square-root
//     factorization of the prefix-sum matrix (Fichtenberger, Henzinger &
//     Upadhyay 2023; Henzinger, Upadhyay & Upadhyay 2023), each calibrated
//     with the sensitivity of the neighbouring relation at hand; and
//   - a valid confidence half-width for a sum of independent noises of
//     known mechanisms and scales (SumHalfWidth), the interval of a running
//     total obtained by summing released values; and
//   - the integer square-root factorization (Factorization): integer
//     coefficients r'_k ≈ 2^bits·C(2k, k)/4^k, the exact integer decoding
//     of the noised vector R'x + z into per-window values (Decode), the
//     weights and rounding bounds of their noise and the intervals.
//
// dpstream's neighbouring relation lets one privacy unit contribute to
// every window of a horizon (within per-window bounds c per coordinate),
// and its horizon accounting composes the windows: under that relation
// summing the per-window releases is optimal for the running total at the
// horizon's end (see Errors), so the operator releases running totals as
// post-processing of the released per-window values and spends no budget
// on them. The factorizations win only when a unit appears in few windows
// (event-level privacy with parallel composition, or a per-unit bound on
// the windows it appears in); the generated table in
// testdata/error_table.md shows by how much. At event level with a horizon
// budget the operator uses Factorization.
//
// Like package privacy, this package is pure: no clock, no I/O.
package continual
