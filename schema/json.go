package schema

import (
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a small JSON (RFC 8259) scanner for input events. Its syntax
// is encoding/json's (FuzzDecodeJSON compares the two), it reads only the
// configured fields, recurses only along configured paths (at most
// MaxPathDepth deep, pathtree.go), and allocates only when a skipped
// container nesting depth exceeds what its reused stack has held before.
// Strings of configured fields must be valid UTF-8; skipped strings are
// not checked.

// jsonWS returns the position of the first non-whitespace byte from p.
func jsonWS(b []byte, p int) int {
	for p < len(b) {
		switch b[p] {
		case ' ', '\t', '\n', '\r':
			p++
		default:
			return p
		}
	}
	return p
}

// scanJSON reads the object in msg, storing the configured fields.
func (d *Decoder) scanJSON(msg []byte) Reason {
	p := jsonWS(msg, 0)
	if p >= len(msg) {
		return ReasonMalformed
	}
	if msg[p] != '{' {
		if _, ok := d.jsonSkip(msg, p); !ok {
			return ReasonMalformed
		}
		return ReasonNotAMap
	}
	p, r := d.jsonObject(msg, p, 0)
	if r != ReasonNone {
		return r
	}
	if jsonWS(msg, p) != len(msg) {
		return ReasonTrailingData
	}
	return ReasonNone
}

// jsonObject reads the object whose '{' is at p, the node ni of the
// configured paths, storing the configured fields; it returns the
// position after the closing '}'.
func (d *Decoder) jsonObject(msg []byte, p, ni int) (int, Reason) {
	keys := d.nodes[ni].keys
	p = jsonWS(msg, p+1)
	if p < len(msg) && msg[p] == '}' {
		return p + 1, ReasonNone
	}
	for {
		if p >= len(msg) || msg[p] != '"' {
			return p, ReasonMalformed
		}
		mark := len(d.scratch)
		key, next, _, ok := d.jsonStr(msg, p)
		if !ok {
			return p, ReasonMalformed
		}
		p = jsonWS(msg, next)
		if p >= len(msg) || msg[p] != ':' {
			return p, ReasonMalformed
		}
		p = jsonWS(msg, p+1)
		if len(key) > d.cfg.MaxKeyLen {
			return p, ReasonOversized
		}
		if ni == 0 && d.keyHook != nil {
			d.keyHook(key) // a top-level key (Keys)
		}
		ref := find(keys, key)
		d.scratch = d.scratch[:mark] // the key is no longer needed
		switch {
		case ref == unconfigured:
			p, ok = d.jsonSkip(msg, p)
		case ref < 0:
			var r Reason
			if p, r = d.jsonNested(msg, p, ^ref); r != ReasonNone {
				return p, r
			}
		case d.vals[ref].k != kAbsent:
			return p, ReasonDuplicateField
		default:
			p, ok = d.jsonScalar(msg, p, &d.vals[ref])
		}
		if !ok {
			return p, ReasonMalformed
		}
		p = jsonWS(msg, p)
		if p >= len(msg) {
			return p, ReasonMalformed
		}
		switch msg[p] {
		case ',':
			p = jsonWS(msg, p+1)
		case '}':
			return p + 1, ReasonNone
		default:
			return p, ReasonMalformed
		}
	}
}

// jsonStr reads the string starting with the quote at p. Without escapes
// it returns a slice of b; with escapes it unescapes into d.scratch. bad
// reports an escaped lone surrogate (decoded as U+FFFD, as encoding/json
// does).
func (d *Decoder) jsonStr(b []byte, p int) (s []byte, next int, bad, ok bool) {
	p++
	start := p
	for p < len(b) {
		c := b[p]
		if c == '"' {
			return b[start:p:p], p + 1, false, true
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, p, false, false
		}
		p++
	}
	if p >= len(b) {
		return nil, p, false, false
	}
	mark := len(d.scratch)
	d.scratch = append(d.scratch, b[start:p]...)
	for p < len(b) {
		c := b[p]
		switch {
		case c == '"':
			return d.scratch[mark:len(d.scratch):len(d.scratch)], p + 1, bad, true
		case c < 0x20:
			return nil, p, false, false
		case c != '\\':
			d.scratch = append(d.scratch, c)
			p++
			continue
		}
		if p+1 >= len(b) {
			return nil, p, false, false
		}
		var r rune
		switch b[p+1] {
		case '"', '\\', '/':
			r = rune(b[p+1])
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			var ok bool
			if r, ok = hex4(b, p+2); !ok {
				return nil, p, false, false
			}
			p += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if r < 0xdc00 && p+1 < len(b) && b[p] == '\\' && b[p+1] == 'u' {
					r2, ok = hex4(b, p+2)
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					p += 6
				} else {
					r, bad = utf8.RuneError, true
				}
			}
			d.scratch = utf8.AppendRune(d.scratch, r)
			continue
		default:
			return nil, p, false, false
		}
		d.scratch = append(d.scratch, byte(r))
		p += 2
	}
	return nil, p, false, false
}

// hex4 reads four hex digits at p.
func hex4(b []byte, p int) (rune, bool) {
	if p+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[p : p+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// jsonSkipStr returns the position after the string starting at p.
func jsonSkipStr(b []byte, p int) (int, bool) {
	for p++; p < len(b); p++ {
		switch c := b[p]; {
		case c == '"':
			return p + 1, true
		case c < 0x20:
			return p, false
		case c == '\\':
			if p+1 >= len(b) {
				return p, false
			}
			switch b[p+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p++
			case 'u':
				if _, ok := hex4(b, p+2); !ok {
					return p, false
				}
				p += 5
			default:
				return p, false
			}
		}
	}
	return p, false
}

// jsonNumber returns the end of the number at p and whether it is an
// integer (no fraction, no exponent).
func jsonNumber(b []byte, p int) (end int, isInt, ok bool) {
	digits := func() int {
		s := p
		for p < len(b) && b[p] >= '0' && b[p] <= '9' {
			p++
		}
		return p - s
	}
	if p < len(b) && b[p] == '-' {
		p++
	}
	switch {
	case p < len(b) && b[p] == '0':
		p++
	case digits() == 0:
		return p, false, false
	}
	isInt = true
	if p < len(b) && b[p] == '.' {
		p++
		if digits() == 0 {
			return p, false, false
		}
		isInt = false
	}
	if p < len(b) && (b[p] == 'e' || b[p] == 'E') {
		p++
		if p < len(b) && (b[p] == '+' || b[p] == '-') {
			p++
		}
		if digits() == 0 {
			return p, false, false
		}
		isInt = false
	}
	return p, isInt, true
}

// jsonLiteral checks for lit at p.
func jsonLiteral(b []byte, p int, lit string) (int, bool) {
	if len(b)-p < len(lit) || string(b[p:p+len(lit)]) != lit {
		return p, false
	}
	return p + len(lit), true
}

// jsonScalar reads the value at p into v; objects and arrays are skipped
// and reported as kOther.
func (d *Decoder) jsonScalar(b []byte, p int, v *scalar) (int, bool) {
	if p >= len(b) {
		return p, false
	}
	switch c := b[p]; {
	case c == '"':
		s, next, bad, ok := d.jsonStr(b, p)
		v.k, v.s, v.badUTF8 = kStr, s, bad
		return next, ok
	case c == 't':
		v.k, v.b = kBool, true
		return jsonLiteral(b, p, "true")
	case c == 'f':
		v.k, v.b = kBool, false
		return jsonLiteral(b, p, "false")
	case c == 'n':
		v.k = kNil
		return jsonLiteral(b, p, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		end, isInt, ok := jsonNumber(b, p)
		if !ok {
			return end, false
		}
		if isInt && jsonInt(b[p:end], v) {
			return end, true
		}
		// Syntax is checked, so ParseFloat can only report a range error,
		// with ±Inf (rejected later as nan_or_inf) or a rounded value.
		f, _ := strconv.ParseFloat(string(b[p:end]), 64)
		v.k, v.f = kFloat, f
		return end, true
	}
	v.k = kOther
	return d.jsonSkip(b, p)
}

// jsonInt parses a JSON integer that fits in int64 or uint64 into v.
func jsonInt(s []byte, v *scalar) bool {
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) > 20 {
		return false
	}
	var u uint64
	for _, c := range s {
		d := uint64(c - '0')
		if u > (math.MaxUint64-d)/10 {
			return false
		}
		u = u*10 + d
	}
	switch {
	case !neg && u <= math.MaxInt64:
		v.k, v.i = kInt, int64(u)
	case !neg:
		v.k, v.u = kUint, u
	case u <= 1<<63:
		v.k, v.i = kInt, int64(-u) // two's complement: −2^63 maps to itself
	default:
		return false
	}
	return true
}

// jsonSkip returns the position after the JSON value at p, checking its
// syntax. Open containers are kept on d.stack instead of recursing.
func (d *Decoder) jsonSkip(b []byte, p int) (int, bool) {
	stack := d.stack[:0]
	defer func() { d.stack = stack[:0] }()
	var ok bool
	for {
		// A value starts at p.
		if p >= len(b) {
			return p, false
		}
		switch c := b[p]; {
		case c == '{' || c == '[':
			p = jsonWS(b, p+1)
			if p < len(b) && b[p] == c+2 { // '}' is '{'+2, ']' is '['+2
				p, ok = p+1, true
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if p, ok = jsonKey(b, p); !ok {
					return p, false
				}
			}
			continue
		case c == '"':
			p, ok = jsonSkipStr(b, p)
		case c == 't':
			p, ok = jsonLiteral(b, p, "true")
		case c == 'f':
			p, ok = jsonLiteral(b, p, "false")
		case c == 'n':
			p, ok = jsonLiteral(b, p, "null")
		default:
			p, _, ok = jsonNumber(b, p)
		}
		if !ok {
			return p, false
		}
		// After a value: close containers or move to the next element.
		for {
			if len(stack) == 0 {
				return p, true
			}
			p = jsonWS(b, p)
			if p >= len(b) {
				return p, false
			}
			top := stack[len(stack)-1]
			if b[p] == top+2 {
				stack = stack[:len(stack)-1]
				p++
				continue
			}
			if b[p] != ',' {
				return p, false
			}
			p = jsonWS(b, p+1)
			if top == '{' {
				if p, ok = jsonKey(b, p); !ok {
					return p, false
				}
			}
			break
		}
	}
}

// jsonKey skips `"key" :` and the whitespace after it.
func jsonKey(b []byte, p int) (int, bool) {
	if p >= len(b) || b[p] != '"' {
		return p, false
	}
	p, ok := jsonSkipStr(b, p)
	if !ok {
		return p, false
	}
	p = jsonWS(b, p)
	if p >= len(b) || b[p] != ':' {
		return p, false
	}
	return jsonWS(b, p+1), true
}
