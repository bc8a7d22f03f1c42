package demo

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/dpstream/dpstream/schema"
)

// encodeReading encodes a reading as msgpack (sorted keys, so the bytes
// are deterministic) or JSON.
func encodeReading(rd Reading, asJSON bool) []byte {
	m := map[string]any{
		synthTimeField: rd.Time, synthUnitField: rd.Meter, synthRegionField: rd.Region,
		synthStatusField: rd.Status, synthValueField: rd.Wh, "firmware": "3.1.4",
	}
	return encodeMap(m, asJSON)
}

func encodeMap(m map[string]any, asJSON bool) []byte {
	if asJSON {
		b, err := json.Marshal(m) // sorted keys
		if err != nil {
			panic("demo: encoding a synthetic reading: " + err.Error()) // only NaN, never passed here
		}
		return b
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(m); err != nil {
		panic("demo: encoding a synthetic reading: " + err.Error()) // in-memory writer: cannot fail
	}
	return buf.Bytes()
}

// badReading returns bad input number i: one of five kinds, with the schema
// reason the operator must count it under.
func badReading(i int, t int64, meter, region string) (key, value []byte, reason string) {
	key = []byte(meter)
	ts := strconv.FormatInt(t, 10)
	switch i % 5 {
	case 0: // a truncated JSON message
		return key, []byte(`{"ts":` + ts + `,"meter":"` + meter + `","region":"` + region + `","wh":1`), schema.ReasonMalformed.String()
	case 1: // a status outside the categories
		return key, encodeMap(map[string]any{synthTimeField: t, synthUnitField: meter, synthRegionField: region,
			synthStatusField: "tampered", synthValueField: 10.0}, false), schema.ReasonUnknownCategory.String()
	case 2: // a NaN reading
		return key, encodeMap(map[string]any{synthTimeField: t, synthUnitField: meter, synthRegionField: region,
			synthStatusField: "ok", synthValueField: math.NaN()}, false), schema.ReasonNaNOrInf.String()
	case 3: // no meter id
		return key, encodeMap(map[string]any{synthTimeField: t, synthRegionField: region,
			synthStatusField: "ok", synthValueField: 10.0}, true), schema.ReasonMissingField.String()
	default: // the reading as a string
		return key, encodeMap(map[string]any{synthTimeField: t, synthUnitField: meter, synthRegionField: region,
			synthStatusField: "ok", synthValueField: "10.0"}, true), schema.ReasonWrongType.String()
	}
}
