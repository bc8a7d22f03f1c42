// Package schema decodes input events and encodes and decodes the release
// messages that dpstream publishes. It is pure: no clock, no I/O, no Kafka.
//
// # Input events
//
// A Config names the fields of an input message (a msgpack map, a JSON
// object, an Avro record or a Protobuf message, plain or in the Confluent
// wire format with schemas from a registry: NewSchemas, NewFramedDecoder)
// that matter: the event time, the privacy unit, the group-by
// fields, a histogram field and a value field, each a key of the message
// or a path into nested maps ("user.id"; ParsePath has the syntax and its
// escapes). A Decoder built from it reads only those fields, straight from
// the message bytes, with small hand-written msgpack, JSON, Avro and
// Protobuf scanners (no reflection, no allocation except the unit string and new
// group strings):
//
//	d, err := schema.NewDecoder(cfg)
//	var e schema.Event
//	if err := d.Decode(msg, &e); err != nil {
//		metrics.skipped[schema.ReasonOf(err)]++ // a Reason, never message content
//	}
//
// Every rejected message has exactly one Reason (malformed, not_a_map,
// missing_field, wrong_type, nan_or_inf, time_out_of_range, …) and the
// error names at most the configured field involved. A configured field
// that occurs twice in one message is rejected (duplicate_field): parsers
// disagree on which copy wins, so accepting it would let a producer show
// different values to different consumers. Unconfigured keys are skipped
// unread and may repeat.
//
// # Release messages
//
// A Release is one published message: one aggregate of one group in one
// window, with its noised values, mechanisms, confidence intervals and
// privacy accounting. AppendRelease writes it as a msgpack map with a fixed
// key order, so the same release always gives the same bytes; DecodeRelease
// is the strict reader for downstream Go services; ReleaseKey is the Kafka
// message key.
package schema
