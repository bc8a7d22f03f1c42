package schema

import (
	"errors"
	"fmt"
	"strconv"
)

// Errors returned by this package. Every error wraps exactly one of these.
var (
	// ErrInvalidConfig: a Config that Validate rejects.
	ErrInvalidConfig = errors.New("schema: invalid config")
	// ErrInvalidEvent: an input message that Decode rejects. The error is
	// an *Error that says why (ReasonOf).
	ErrInvalidEvent = errors.New("schema: invalid event")
	// ErrInvalidRelease: a Release that cannot be encoded, or bytes that
	// are not a well-formed release message.
	ErrInvalidRelease = errors.New("schema: invalid release")
	// ErrVersion: a release message with a schema version this package
	// does not read.
	ErrVersion = errors.New("schema: unsupported release schema version")
	// ErrInvalidGroup: a group string that MakeGroup did not produce.
	ErrInvalidGroup = errors.New("schema: invalid group encoding")
	// ErrSchemaMismatch: an Avro writer schema that is not a record, or an
	// Avro or Protobuf writer schema that lacks a configured field or
	// gives one a type its role cannot read.
	ErrSchemaMismatch = errors.New("schema: writer schema does not match the configuration")
	// ErrRegistryUnavailable: the schema registry could not say what a
	// framed Avro or Protobuf message's schema id is (unreachable, a timeout, a 5xx or
	// any answer other than the schema or a definite "no such schema").
	// A SchemaFetcher returns it (wrapped) for such a failure, and Decode
	// returns it for the message, which is not rejected: it carries no
	// Reason, and the caller decodes the message again later.
	ErrRegistryUnavailable = errors.New("schema: schema registry unavailable")
)

// Reason says why an input message was rejected. Each reason is a stable,
// low-cardinality name suitable as a metrics label.
type Reason uint8

// The reasons Decode reports.
const (
	// ReasonNone is the reason of a nil error or of an error that did not
	// come from Decode.
	ReasonNone Reason = iota
	// ReasonMalformed: not valid msgpack, JSON, Avro or Protobuf
	// (truncated, a reserved byte, bad JSON syntax, an Avro index or count
	// out of range, an empty message, a Protobuf field number 0 or a
	// configured field with another wire type than its schema's).
	ReasonMalformed
	// ReasonNotAMap: the message is well formed but is not a map/object.
	ReasonNotAMap
	// ReasonTrailingData: bytes follow the map.
	ReasonTrailingData
	// ReasonMissingField: a required field is absent or null (or, for the
	// privacy unit, the empty string).
	ReasonMissingField
	// ReasonDuplicateField: a configured field occurs more than once.
	ReasonDuplicateField
	// ReasonWrongType: a field has a type its role does not accept.
	ReasonWrongType
	// ReasonNaNOrInf: a number is NaN or ±Inf.
	ReasonNaNOrInf
	// ReasonBadTime: a time string or timestamp that does not parse.
	ReasonBadTime
	// ReasonTimeOutOfRange: the event time is outside the configured range
	// or overflows int64 milliseconds.
	ReasonTimeOutOfRange
	// ReasonUnknownCategory: a histogram category that is not declared,
	// with no "other" bucket.
	ReasonUnknownCategory
	// ReasonOversized: a map key longer than MaxKeyLen, or a configured
	// string value longer than MaxStringLen.
	ReasonOversized
	// ReasonInvalidUTF8: a configured string value that is not valid UTF-8
	// (or a JSON escape that encodes a lone surrogate).
	ReasonInvalidUTF8
	// ReasonUnknownSchema: a framed Avro or Protobuf message without the
	// magic byte and schema id, or whose id the registry does not have (a
	// definite answer; a registry that cannot be asked is
	// ErrRegistryUnavailable, not a reason), or whose Protobuf message
	// indexes name no message of the schema.
	ReasonUnknownSchema
	// ReasonSchemaMismatch: a framed Avro or Protobuf message whose
	// writer schema (for Protobuf, message type) lacks a configured field
	// or gives it a type its role cannot read (or is not a record, does
	// not parse, or is of the other format).
	ReasonSchemaMismatch

	numReasons // the number of reasons, for tables indexed by Reason

	// reasonUnavailable is what a scan returns when the registry could not
	// be asked for the message's schema; Decode turns it into
	// errUnavailable. It is past numReasons: never counted, never in an
	// *Error.
	reasonUnavailable = numReasons
)

// errUnavailable is Decode's error for a message whose schema the registry
// could not be asked for (one value: no allocation per blocked message).
var errUnavailable = fmt.Errorf("%w: the message's writer schema could not be fetched; decode it again later", ErrRegistryUnavailable)

// NumReasons is the number of distinct reasons, ReasonNone included; the
// reasons are 0 … NumReasons−1, so callers can keep counters in an array.
const NumReasons = int(numReasons)

var reasonNames = [numReasons]string{
	ReasonNone:            "none",
	ReasonMalformed:       "malformed",
	ReasonNotAMap:         "not_a_map",
	ReasonTrailingData:    "trailing_data",
	ReasonMissingField:    "missing_field",
	ReasonDuplicateField:  "duplicate_field",
	ReasonWrongType:       "wrong_type",
	ReasonNaNOrInf:        "nan_or_inf",
	ReasonBadTime:         "bad_time",
	ReasonTimeOutOfRange:  "time_out_of_range",
	ReasonUnknownCategory: "unknown_category",
	ReasonOversized:       "oversized",
	ReasonInvalidUTF8:     "invalid_utf8",
	ReasonUnknownSchema:   "unknown_schema",
	ReasonSchemaMismatch:  "schema_mismatch",
}

// String returns the snake_case name of r, e.g. "missing_field".
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Error is the error Decode returns for a rejected message. It names the
// configured field involved (empty when the problem is not about one field)
// and never carries any part of the message itself.
type Error struct {
	Reason Reason // why the message was rejected
	Field  string // the configured field name, or "" (never an input key)
}

// Error implements error: "schema: invalid event: wrong_type (field "ts")".
func (e *Error) Error() string {
	s := "schema: invalid event: " + e.Reason.String()
	if e.Field != "" {
		s += " (field " + strconv.Quote(e.Field) + ")"
	}
	return s
}

// Unwrap returns ErrInvalidEvent.
func (e *Error) Unwrap() error { return ErrInvalidEvent }

// ReasonOf returns the reason carried by err (or by any error it wraps), or
// ReasonNone.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ReasonNone
}
