package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ReleaseRecord is one decoded JSON release record (ReleaseRecords): one
// released value with its release's metadata. Field meanings are those of
// Release and Series.
type ReleaseRecord struct {
	Key, ReleaseKey, ReleaseID string
	// WindowStart and WindowEnd bound the window [start, end), unix ms.
	WindowStart, WindowEnd int64
	Aggregate              string
	Kind                   Kind
	Group                  []GroupValue // in record order (the configured order)
	Series, Label          string
	Index                  int64
	// ValueType is "int" or "float"; Int holds the value exactly when
	// it is "int", Value always (as a float64).
	ValueType      string
	Int            int64
	Value          float64
	Level, Lo, Hi  float64
	Mechanism      string
	Scale          float64
	Sensitivity    Sensitivity
	Windows        int64
	Budget, Spent  Budget
	Horizon        Horizon
	PrivacyUnit    string
	EventLevel     bool
	Bounds         Bounds
	Instance, Note string

	version                        int64
	windowStartText, windowEndText string
	valueNumber                    json.Number
}

// fields maps each fixed record field to where it is decoded.
func (r *ReleaseRecord) fields() map[string]any {
	return map[string]any{
		"schema_version": &r.version, "key": &r.Key, "release_key": &r.ReleaseKey,
		"release_id": &r.ReleaseID, "window_start": &r.windowStartText, "window_end": &r.windowEndText,
		"window_start_ms": &r.WindowStart, "window_end_ms": &r.WindowEnd,
		"aggregate": &r.Aggregate, "kind": &r.Kind,
		"series": &r.Series, "label": &r.Label, "index": &r.Index,
		"value_type": &r.ValueType, "value": &r.valueNumber,
		"ci_level": &r.Level, "ci_lo": &r.Lo, "ci_hi": &r.Hi,
		"mechanism": &r.Mechanism, "scale": &r.Scale,
		"sensitivity_l0": &r.Sensitivity.L0, "sensitivity_l1": &r.Sensitivity.L1,
		"sensitivity_l2": &r.Sensitivity.L2, "sensitivity_linf": &r.Sensitivity.LInf,
		"windows": &r.Windows,
		"epsilon": &r.Budget.Epsilon, "delta": &r.Budget.Delta,
		"spent_epsilon": &r.Spent.Epsilon, "spent_delta": &r.Spent.Delta,
		"horizon_start_ms": &r.Horizon.Start, "horizon_end_ms": &r.Horizon.End,
		"horizon_epsilon": &r.Horizon.Budget.Epsilon, "horizon_delta": &r.Horizon.Budget.Delta,
		"privacy_unit": &r.PrivacyUnit, "event_level": &r.EventLevel,
		"max_groups": &r.Bounds.MaxGroups, "max_buckets": &r.Bounds.MaxBuckets,
		"max_per_bucket": &r.Bounds.MaxPerBucket, "max_values": &r.Bounds.MaxValues,
		"lower": &r.Bounds.Lower, "upper": &r.Bounds.Upper,
		"instance": &r.Instance, "note": &r.Note,
	}
}

// DecodeReleaseRecord decodes a JSON release record written by
// ReleaseRecords, with or without the Kafka Connect envelope. It is
// strict: schema_version must be JSONRecordVersion (else the error wraps
// ErrVersion), every field must be present once with its type, and the
// keys must match the other fields (the record key is ValueKey of the
// release key, which is ReleaseKey of the release id, aggregate and group
// values). Unknown fields are skipped. Other errors wrap
// ErrInvalidRelease; they never quote the record's values.
func DecodeReleaseRecord(b []byte) (ReleaseRecord, error) {
	var env struct {
		Schema  json.RawMessage `json:"schema"`
		Payload json.RawMessage `json:"payload"`
	}
	if bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte(`{"schema"`)) {
		if err := json.Unmarshal(b, &env); err != nil || env.Payload == nil {
			return ReleaseRecord{}, fmt.Errorf("%w: not a Connect envelope with a payload", ErrInvalidRelease)
		}
		b = env.Payload
	}
	var r ReleaseRecord
	if err := r.decode(b); err != nil {
		return ReleaseRecord{}, err
	}
	if r.version != JSONRecordVersion {
		return ReleaseRecord{}, fmt.Errorf("%w: JSON record version %d", ErrVersion, r.version)
	}
	if err := r.check(); err != nil {
		return ReleaseRecord{}, err
	}
	// The texts read are checked: clear them, so that records of equal
	// values compare equal whatever the spelling of their numbers.
	r.valueNumber, r.windowStartText, r.windowEndText = "", "", ""
	return r, nil
}

// decode reads the flat object b into r, field by field.
func (r *ReleaseRecord) decode(b []byte) error {
	bad := func(what string) error { return fmt.Errorf("%w: JSON record: %s", ErrInvalidRelease, what) }
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return bad("not a JSON object")
	}
	fields := r.fields()
	seen := make(map[string]bool, len(fields)+4)
	for d.More() {
		t, err := d.Token()
		name, ok := t.(string)
		if err != nil || !ok {
			return bad("malformed object")
		}
		if seen[name] {
			return bad(fmt.Sprintf("field %q occurs twice", name))
		}
		seen[name] = true
		var dst any
		if g, isGroup := strings.CutPrefix(name, GroupFieldPrefix); isGroup {
			r.Group = append(r.Group, GroupValue{Name: g})
			dst = &r.Group[len(r.Group)-1].Value
		} else if dst = fields[name]; dst == nil {
			var skip json.RawMessage
			dst = &skip
		}
		if err := d.Decode(dst); err != nil {
			return bad(fmt.Sprintf("field %q has the wrong type", name))
		}
	}
	if t, err := d.Token(); err != nil || t != json.Delim('}') {
		return bad("malformed object")
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return bad("trailing data after the object")
	}
	for name := range fields {
		if !seen[name] {
			return bad(fmt.Sprintf("field %q is missing", name))
		}
	}
	return nil
}

// check parses the value and checks that the keys and the window texts
// agree with the other fields.
func (r *ReleaseRecord) check() error {
	bad := func(what string) error { return fmt.Errorf("%w: JSON record: %s", ErrInvalidRelease, what) }
	var err error
	switch r.ValueType {
	case valueTypeInt:
		if r.Int, err = strconv.ParseInt(string(r.valueNumber), 10, 64); err != nil {
			return bad("value is not an int")
		}
		r.Value = float64(r.Int)
	case valueTypeFloat:
		if r.Value, err = r.valueNumber.Float64(); err != nil {
			return bad("value is not a float")
		}
	default:
		return bad("value_type is neither int nor float")
	}
	vals := make([]string, len(r.Group))
	for i, g := range r.Group {
		vals[i] = g.Value
	}
	if r.ReleaseKey != ReleaseKey(r.ReleaseID, r.Aggregate, vals...) {
		return bad("release_key does not match release_id, aggregate and group")
	}
	if r.Index < 0 || r.Key != ValueKey(r.ReleaseKey, r.Series, int(r.Index)) {
		return bad("key does not match release_key, series and index")
	}
	if r.windowStartText != rfc3339(r.WindowStart) || r.windowEndText != rfc3339(r.WindowEnd) {
		return bad("window_start or window_end does not match its _ms field")
	}
	return nil
}
