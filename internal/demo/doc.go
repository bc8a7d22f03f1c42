// Package demo is dpstream demo: it runs the real operator (package
// operator, in-process) on a synthetic stream of smart-meter readings and
// prints, per window, the true values beside the private ones.
//
// A run ([Run]) starts an embedded Kafka-protocol broker (franz-go's kfake)
// unless [Options.Brokers] names real ones, creates fresh topics, produces
// the stream ([Generate]), reads the releases back with the schema
// package's decoder and prints them (tables, or JSON lines). The stream is
// a deterministic function of its [StreamConfig]; the demo computes the
// exact bounded aggregates of each window from it ([GroupTruth]) only
// because the data are synthetic: dpstream never publishes true values.
//
// The broker tests of cmd/dpstream reuse the stream, its topic helpers
// ([CreateTopic], [Produce], [TopicPartitions]) and the demo's operator
// configuration ([OperatorConfig]).
package demo
