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
// The package is pure: it reads no clock, opens no network connection and
// imports no Kafka code. Randomness comes from a Stream, a ChaCha8 generator
// keyed per release with HMAC-SHA256(secret key, release id).
package privacy
