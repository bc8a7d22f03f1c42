// Package operator runs dpstream as a Kafka sidecar: it consumes events,
// aggregates them into event-time windows, adds calibrated noise when a
// window closes and publishes the releases.
package operator
