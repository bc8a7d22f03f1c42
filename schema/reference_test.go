package schema

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// This file is an independent first phase of Decode for the fuzz targets:
// it walks a message with msgpack/v5's decoder or encoding/json's
// tokenizer, follows the configured paths by comparing whole key lists
// (not the decoder's tree), and fills d.vals, returning the reason the
// decoder's own first phase should return.

// fieldIndex returns the index of the configured field spelled name, or −1.
func fieldIndex(d *Decoder, name string) int {
	for i, f := range d.fields {
		if f.name == name {
			return i
		}
	}
	return -1
}

// refPaths is the reference's view of the configured paths: each field's
// keys (ParsePath) and the nested maps met so far in a message.
type refPaths struct {
	d     *Decoder
	paths [][]string
	seen  map[string]bool
}

func newRefPaths(d *Decoder) *refPaths {
	for i := range d.vals {
		d.vals[i] = scalar{}
	}
	r := &refPaths{d: d, seen: map[string]bool{}}
	for _, f := range d.fields {
		keys, err := ParsePath(f.name)
		if err != nil {
			panic(err)
		}
		r.paths = append(r.paths, keys)
	}
	return r
}

// classify says what path is: the path of field i (i ≥ 0, inner false), a
// proper prefix of some field's path (inner true), or neither (−1, false).
func (r *refPaths) classify(path []string) (i int, inner bool) {
	for j, p := range r.paths {
		if slices.Equal(p, path) {
			return j, false
		}
	}
	for _, p := range r.paths {
		if len(p) > len(path) && slices.Equal(p[:len(path)], path) {
			return -1, true
		}
	}
	return -1, false
}

// enter reports whether the nested map at path is met for the first time.
func (r *refPaths) enter(path []string) bool {
	k := strings.Join(path, "\x00")
	if r.seen[k] {
		return false
	}
	r.seen[k] = true
	return true
}

// settle gives every field below path the kind k.
func (r *refPaths) settle(path []string, k kind) {
	for j, p := range r.paths {
		if len(p) > len(path) && slices.Equal(p[:len(path)], path) {
			r.d.vals[j] = scalar{k: k}
		}
	}
}

// refScanMsgpack is an independent first phase for msgpack messages: it
// walks the map with msgpack/v5's own decoder and fills d.vals, returning
// the reason as scanMsgpack would.
func refScanMsgpack(d *Decoder, data []byte) Reason {
	rp := newRefPaths(d)
	r := bytes.NewReader(data)
	dec := msgpack.NewDecoder(r)
	c, err := dec.PeekCode()
	if err != nil {
		return ReasonMalformed
	}
	if !msgpcode.IsFixedMap(c) && c != msgpcode.Map16 && c != msgpcode.Map32 {
		if dec.Skip() != nil {
			return ReasonMalformed
		}
		return ReasonNotAMap
	}
	if reason := rp.msgpackMap(dec, r, nil); reason != ReasonNone {
		return reason
	}
	if r.Len() > 0 {
		return ReasonTrailingData
	}
	return ReasonNone
}

// msgpackMap reads the map at the decoder's position, at path prefix.
func (rp *refPaths) msgpackMap(dec *msgpack.Decoder, r *bytes.Reader, prefix []string) Reason {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return ReasonMalformed
	}
	for ; n > 0; n-- {
		c, err := dec.PeekCode()
		if err != nil {
			return ReasonMalformed
		}
		if !msgpcode.IsString(c) {
			// A non-string key: skip it, then its value.
			for range 2 {
				if dec.Skip() != nil {
					return ReasonMalformed
				}
			}
			continue
		}
		key, err := dec.DecodeString()
		if err != nil {
			return ReasonMalformed
		}
		if len(key) > rp.d.cfg.MaxKeyLen {
			return ReasonOversized
		}
		path := append(slices.Clip(prefix), key)
		i, inner := rp.classify(path)
		switch {
		case inner:
			if reason := rp.msgpackNested(dec, r, path); reason != ReasonNone {
				return reason
			}
		case i < 0:
			if dec.Skip() != nil {
				return ReasonMalformed
			}
		default:
			v, ok := refScalar(dec, r)
			if !ok {
				return ReasonMalformed
			}
			if rp.d.vals[i].k != kAbsent {
				return ReasonDuplicateField
			}
			rp.d.vals[i] = v
		}
	}
	return ReasonNone
}

// msgpackNested reads the value at path, a proper prefix of a field path.
func (rp *refPaths) msgpackNested(dec *msgpack.Decoder, r *bytes.Reader, path []string) Reason {
	if !rp.enter(path) {
		return ReasonDuplicateField
	}
	c, err := dec.PeekCode()
	switch {
	case err != nil:
		return ReasonMalformed
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		return rp.msgpackMap(dec, r, path)
	case c == msgpcode.Nil:
		rp.settle(path, kNil)
	default:
		rp.settle(path, kOther)
	}
	if dec.Skip() != nil {
		return ReasonMalformed
	}
	return ReasonNone
}

// refScalar reads one value with msgpack/v5 and classifies it.
func refScalar(dec *msgpack.Decoder, r *bytes.Reader) (scalar, bool) {
	c, err := dec.PeekCode()
	if err != nil {
		return scalar{}, false
	}
	if msgpcode.IsExt(c) {
		id, n, err := dec.DecodeExtHeader()
		if err != nil || n > r.Len() {
			return scalar{}, false
		}
		buf := make([]byte, n)
		if err := dec.ReadFull(buf); err != nil {
			return scalar{}, false
		}
		isTS := id == -1 && (c == msgpcode.FixExt4 || c == msgpcode.FixExt8 || (c == msgpcode.Ext8 && n == 12))
		if !isTS {
			return scalar{k: kOther}, true
		}
		// The timestamp extension as the msgpack spec defines it.
		var sec int64
		var nsec int64
		switch n {
		case 4:
			sec = int64(binary.BigEndian.Uint32(buf))
		case 8:
			x := binary.BigEndian.Uint64(buf)
			sec, nsec = int64(x&0x3ffffffff), int64(x>>34)
		case 12:
			nsec, sec = int64(binary.BigEndian.Uint32(buf)), int64(binary.BigEndian.Uint64(buf[4:]))
		}
		switch {
		case nsec >= 1e9:
			return scalar{k: kBadTime}, true
		case sec > math.MaxInt64/1000-1 || sec < -(math.MaxInt64/1000-1):
			return scalar{k: kTime, i: math.MaxInt64}, true
		}
		return scalar{k: kTime, i: time.Unix(sec, nsec).UnixMilli()}, true
	}
	if c == msgpcode.Bin8 || c == msgpcode.Bin16 || c == msgpcode.Bin32 ||
		msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32 ||
		msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32 {
		return scalar{k: kOther}, dec.Skip() == nil
	}
	v, err := dec.DecodeInterface()
	if err != nil {
		return scalar{}, false
	}
	return fromAny(v), true
}

// fromAny classifies a value decoded by msgpack/v5 or encoding/json (with
// UseNumber).
func fromAny(v any) scalar {
	switch v := v.(type) {
	case nil:
		return scalar{k: kNil}
	case bool:
		return scalar{k: kBool, b: v}
	case int8:
		return scalar{k: kInt, i: int64(v)}
	case int16:
		return scalar{k: kInt, i: int64(v)}
	case int32:
		return scalar{k: kInt, i: int64(v)}
	case int64:
		return scalar{k: kInt, i: v}
	case uint8:
		return scalar{k: kInt, i: int64(v)}
	case uint16:
		return scalar{k: kInt, i: int64(v)}
	case uint32:
		return scalar{k: kInt, i: int64(v)}
	case uint64:
		if v <= math.MaxInt64 {
			return scalar{k: kInt, i: int64(v)}
		}
		return scalar{k: kUint, u: v}
	case float32:
		return scalar{k: kFloat, f: float64(v)}
	case float64:
		return scalar{k: kFloat, f: v}
	case string:
		return scalar{k: kStr, s: []byte(v)}
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return scalar{k: kInt, i: i}
			}
			if u, err := strconv.ParseUint(s, 10, 64); err == nil {
				return scalar{k: kUint, u: u}
			}
		}
		f, _ := strconv.ParseFloat(s, 64)
		return scalar{k: kFloat, f: f}
	}
	return scalar{k: kOther}
}

// refScanJSON is an independent first phase for JSON messages, with
// encoding/json's tokenizer. uncertain reports a decoded string holding
// U+FFFD, where encoding/json hides whether the input was valid UTF-8.
func refScanJSON(d *Decoder, data []byte) (r Reason, uncertain bool) {
	rp := newRefPaths(d)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return ReasonMalformed, false
	}
	if tok != json.Delim('{') {
		if _, ok := tok.(json.Delim); ok {
			// Consume the rest of the array; any syntax error is malformed.
			depth := 1
			for depth > 0 {
				t, err := dec.Token()
				if err != nil {
					return ReasonMalformed, false
				}
				if t == json.Delim('[') || t == json.Delim('{') {
					depth++
				} else if t == json.Delim(']') || t == json.Delim('}') {
					depth--
				}
			}
		}
		return ReasonNotAMap, false
	}
	if r := rp.jsonObject(dec, nil, &uncertain); r != ReasonNone {
		return r, uncertain
	}
	if len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 {
		return ReasonTrailingData, uncertain
	}
	return ReasonNone, uncertain
}

// jsonObject reads the members and the closing brace of an object whose
// opening brace dec has read, at path prefix.
func (rp *refPaths) jsonObject(dec *json.Decoder, prefix []string, uncertain *bool) Reason {
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ReasonMalformed
		}
		key := tok.(string)
		*uncertain = *uncertain || strings.ContainsRune(key, utf8.RuneError)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return ReasonMalformed
		}
		if len(key) > rp.d.cfg.MaxKeyLen {
			return ReasonOversized
		}
		path := append(slices.Clip(prefix), key)
		i, inner := rp.classify(path)
		if inner {
			if r := rp.jsonNested(raw, path, uncertain); r != ReasonNone {
				return r
			}
			continue
		}
		if i < 0 {
			continue
		}
		var v any
		vd := json.NewDecoder(bytes.NewReader(raw))
		vd.UseNumber()
		if err := vd.Decode(&v); err != nil {
			return ReasonMalformed
		}
		if s, ok := v.(string); ok && strings.ContainsRune(s, utf8.RuneError) {
			*uncertain = true
		}
		if rp.d.vals[i].k != kAbsent {
			return ReasonDuplicateField
		}
		rp.d.vals[i] = fromAny(v)
	}
	if _, err := dec.Token(); err != nil {
		return ReasonMalformed
	}
	return ReasonNone
}

// jsonNested reads raw, the value at path, a proper prefix of a field
// path.
func (rp *refPaths) jsonNested(raw []byte, path []string, uncertain *bool) Reason {
	if !rp.enter(path) {
		return ReasonDuplicateField
	}
	switch raw[0] {
	case '{':
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if _, err := dec.Token(); err != nil {
			return ReasonMalformed
		}
		return rp.jsonObject(dec, path, uncertain)
	case 'n':
		rp.settle(path, kNil)
	default:
		rp.settle(path, kOther)
	}
	return ReasonNone
}
