// Package rng is the keyed random stream of dpstream and the samplers of
// the standard variates its noise is made of.
//
// A Stream is a ChaCha8 generator seeded per release with
// HMAC-SHA256(secret Key, release id): the same key and release id always
// give the same stream, bit for bit, so a re-published window gets the same
// noise, and without the key the stream cannot be predicted. (It is a
// random-number stream, not a stream of events: the name is kept from the
// package it came from, privacy.)
//
// On a Stream it draws full-precision uniforms (Float64), standard
// exponential, Laplace and normal variates (256-layer ziggurats with exact
// tails), logistic, Cauchy, symmetric α-stable and log-Gamma variates, and
// the exact integer samplers of Canonne, Kamath & Steinke (discrete Laplace,
// discrete Gaussian, rounded Laplace) that use integer arithmetic only and
// so reproduce on every platform.
//
// Guarantees: every variate is a deterministic function of the stream's
// words; the integer samplers' output distributions are exact up to the
// truncations each states; a Key never prints (every fmt verb, slog and
// text marshalling give "[redacted]"). The package is pure: it reads no
// file, environment or clock (privacy's TestPurity checks the imports);
// keys come from operator/keyfile.
package rng
