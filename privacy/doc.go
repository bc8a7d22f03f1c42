// Package privacy calibrates and draws the noise that makes a release
// differentially private.
//
// A mechanism releases q(d) + scale·X, where X has a fixed standard density
// (Laplace, Logistic, Gaussian, Subbotin_R, symmetric α-stable, Cauchy, or
// their discrete counterparts for integer releases). Calibrate returns the
// smallest scale that makes the release (ε, δ)-differentially private for a
// query of sensitivity Δ, always rounded towards more noise.
//
// The one-dimensional conditions are exact (necessary and sufficient): Lemma 1
// of Vinterbo, "Differential privacy for symmetric log-concave mechanisms"
// (AISTATS 2022) for log-concave noise, the maximum privacy loss for the
// symmetric α-stable family. The paper's multidimensional extension (Lemma 8,
// Theorem 9) is invalid and is deliberately not implemented.
//
// The package and its subpackages are pure: they read no file, environment
// or clock, open no network connection and import no Kafka or operator
// code; TestPurity proves it from their imports. Randomness comes from an
// rng.Stream, a ChaCha8 generator keyed per release with
// HMAC-SHA256(secret key, release id).
//
// # Map
//
// This package: the mechanisms (one file per noise family: laplace.go,
// logistic.go, gaussian.go, gaussian_classic.go, subbotin.go, cauchy.go,
// stable.go, discrete_laplace.go, discrete_gaussian.go; mechanism.go for
// the Mechanism interface and Parse), their one-dimensional calibration
// (convex.go, the Lemma 1 solver; table.go and table_data.go, the
// precomputed scale tables built by table_build.go), their samplers
// (sample.go), the accounting of many releases (account.go; pld*.go, the
// privacy-loss-distribution accountant; compose.go, CalibrateHorizon and
// CalibrateParts; vector.go), the choice between mechanisms (choose.go,
// Compare and Choose) and the snapping of real-valued releases (snap.go,
// residual.go).
//
// Subpackages:
//
//   - privacy/rng: the keyed random stream (Key, Stream, NewStream) and the
//     samplers of standard variates, including the exact integer samplers;
//   - privacy/quantile: quantiles and their intervals from a noised
//     quantile tree (post-processing);
//   - privacy/continual: the error arithmetic of continual release
//     (running totals);
//   - privacy/internal/stable: the α-stable density, its fast interpolant
//     and the privacy-loss maximiser behind Stable;
//   - privacy/internal/stattest: goodness-of-fit helpers shared by the
//     statistical tests.
//
// Outside the DP core, operator/keyfile reads and generates key files and
// internal/tables writes table_data.go (`go generate ./privacy`).
package privacy
