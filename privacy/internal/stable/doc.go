// Package stable holds the numerics behind package privacy's symmetric
// α-stable (SαS) mechanism: the standard SαS density and tail probability
// for 1 < α < 2 (power series, Zolotarev's integral with adaptive
// Gauss–Kronrod quadrature, asymptotic series), a cached fast interpolant of
// the log-density, and the maximiser of the privacy loss of a
// location-shifted density (LossBound) with the scale solver built on it.
//
// Guarantees: every density value comes with a relative error bound
// (Density.RelErr, Fast.RelErr) that the loss bound adds to its result, so
// that a calibration built on these functions errs towards more noise; a
// failed evaluation is NaN or an error, never a silently smaller loss.
// The package is pure computation: it is internal to privacy, which owns the
// privacy semantics.
package stable
