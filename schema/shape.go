package schema

// shape.go tells, by configured field name only, whether the message of
// the last Decode carried each configured field with a type its roles
// accept, and lists a message's top-level key names: the input-shape
// check of the operator (a misspelt field name makes every event fail
// with missing_field; this says which field, and which names there are).

// FieldInfo is one distinct configured field (a name, or a path into
// nested maps) and the roles it serves.
type FieldInfo struct {
	// Name is the field's path, as configured.
	Name string
	// Roles are the configuration keys that name the field: time_field,
	// unit_field, group_by, histogram.field, value_field.
	Roles []string
}

// roleKeys are the configuration keys of the field roles, by bit.
var roleKeys = []struct {
	role uint8
	key  string
}{
	{roleTime, "time_field"}, {roleUnit, "unit_field"}, {roleGroup, "group_by"},
	{roleHist, "histogram.field"}, {roleValue, "value_field"},
	{roleMeasure, "measures.field"}, {roleHistNum | roleHistCat, "histograms.field"},
}

// Fields returns the distinct configured field names in the order of the
// bits of Shape: the time field, the unit field, the group-by fields, the
// histogram field, the value field (a name serving several roles once).
func (d *Decoder) Fields() []FieldInfo {
	out := make([]FieldInfo, len(d.fields))
	for i, f := range d.fields {
		out[i].Name = f.name
		for _, r := range roleKeys {
			if f.roles&r.role != 0 {
				out[i].Roles = append(out[i].Roles, r.key)
			}
		}
	}
	return out
}

// ShapeFields is the most fields Shape reports (bits of a uint64); a
// Config has at most MaxGroupBy+4 distinct field names, fewer than this.
const ShapeFields = 64

// Shape returns, for the message of the last Decode, which configured
// fields were absent (or null) and which were present with a type their
// roles do not accept, as bit masks over Fields (bit i: Fields()[i]). A
// message that was not a well-formed map (malformed, not a map, an
// oversized key, a field twice) has every field absent. Only types are
// judged, never values (an out-of-range time or an undeclared category is
// a value, not a shape). An optional value field may be absent. After a
// successful Decode both masks are zero.
func (d *Decoder) Shape() (absent, wrongType uint64) {
	for i := range min(len(d.fields), ShapeFields) {
		f := &d.fields[i]
		switch k := d.vals[i].k; {
		case !d.scanned:
			absent |= 1 << i
		case k == kAbsent || k == kNil:
			if f.required {
				absent |= 1 << i
			}
		case !d.typeOK(k, f.roles):
			wrongType |= 1 << i
		}
	}
	return absent, wrongType
}

// typeOK reports whether a present value of kind k suits every role in
// roles (as build reads them).
func (d *Decoder) typeOK(k kind, roles uint8) bool {
	numeric := k == kInt || k == kUint || k == kFloat
	text := k == kStr || k == kInt || k == kUint
	if roles&roleTime != 0 {
		tf := d.cfg.TimeFormat
		ok := k == kTime || k == kBadTime ||
			(k == kStr && (tf == TimeRFC3339 || tf == TimeAuto)) || (numeric && tf != TimeRFC3339)
		if !ok {
			return false
		}
	}
	if roles&roleUnit != 0 && !text {
		return false
	}
	if roles&roleGroup != 0 && !text && k != kBool {
		return false
	}
	if roles&roleHist != 0 && ((d.hist.edges != nil && !numeric) || (d.hist.edges == nil && !text)) {
		return false
	}
	if roles&roleHistCat != 0 && !text {
		return false
	}
	if roles&(roleValue|roleMeasure|roleHistNum) != 0 && !numeric {
		return false
	}
	return true
}

// Keys calls fn with every top-level string key of msg (not the keys of
// nested maps), a JSON object or msgpack map as Decode reads it, in message order, until the message ends
// or a key shows it malformed (keys longer than MaxKeyLen are not
// reported). For Avro and Protobuf it calls fn with the top-level field
// names of the record or message msg is (shape_schema.go: schemaKeys).
// fn must not keep key. Keys may change what Shape reports.
func (d *Decoder) Keys(msg []byte, fn func(key []byte)) {
	if d.cfg.Format == FormatAvro || d.cfg.Format == FormatProtobuf {
		d.schemaKeys(msg, fn)
		return
	}
	d.keyHook = fn
	defer func() { d.keyHook = nil }()
	var e Event
	_ = d.Decode(msg, &e)
}
