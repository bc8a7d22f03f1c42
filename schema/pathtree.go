package schema

import "math"

// This file is the decoder's view of the configured field paths: a tree
// of the maps it reads (the message itself, and each nested map on a
// configured path) and the descent into a nested value. Keys that are not
// on a configured path are skipped unread, at any depth; the descent is
// one call per key of a path, so at most MaxPathDepth deep whatever the
// message nests.

// pathKey is one configured key of a map the decoder reads: the last key
// of a field's path or a key whose value is a map holding configured keys
// (never both: Validate rejects a path that lies inside another). It is as
// small as the flat decoder's entry was (24 bytes), so that flat events
// decode as fast.
type pathKey struct {
	name string
	sig  uint32 // sig(name)
	// ref is the index in Decoder.fields of the field the key ends, or
	// ^i for the node Decoder.nodes[i] under the key (so ref < 0).
	ref int32
}

// pathNode is one map the decoder reads: the message (node 0) or a map
// under a configured key.
type pathNode struct {
	keys []pathKey
	// fields lists every field whose path passes through this node, so
	// that a null or non-map value in its place settles all of them.
	fields []int
}

// unconfigured is what find returns for a key that is not configured:
// never a ref (refs are field indices ≥ 0 or ^node ≥ ^len(nodes)).
const unconfigured = math.MinInt

// find returns the ref of key among keys (a node's keys), or unconfigured.
// It takes the slice rather than the node so that the callers' loops keep
// it in registers: the flat decoder's lookup cost no more.
func find(keys []pathKey, key []byte) int {
	ks := sig(key)
	for j := range keys {
		if keys[j].sig == ks && string(key) == keys[j].name {
			return int(keys[j].ref)
		}
	}
	return unconfigured
}

// insert adds the path keys, ending in field fi, to the tree rooted at
// d.nodes[0]. The paths are valid and none lies inside another.
func (d *Decoder) insert(keys []string, fi int) {
	n := 0
	for depth, k := range keys {
		d.nodes[n].fields = append(d.nodes[n].fields, fi)
		ref := find(d.nodes[n].keys, []byte(k))
		if depth == len(keys)-1 {
			d.nodes[n].keys = append(d.nodes[n].keys, pathKey{name: k, sig: sig([]byte(k)), ref: int32(fi)})
			return
		}
		if ref == unconfigured {
			d.nodes = append(d.nodes, pathNode{})
			ref = ^(len(d.nodes) - 1)
			d.nodes[n].keys = append(d.nodes[n].keys, pathKey{name: k, sig: sig([]byte(k)), ref: int32(ref)})
		}
		n = ^ref
	}
}

// settle gives every field below node ni the kind k (kNil for a null in
// the place of the node's map, kOther for a value that is not a map): the
// fields are then missing or of the wrong type, reported in the fixed
// order of build.
func (d *Decoder) settle(ni int, k kind) {
	for _, fi := range d.nodes[ni].fields {
		d.vals[fi].k = k
	}
}

// enter marks node ni as met in this message; a second meeting is a
// duplicate key along a configured path.
func (d *Decoder) enter(ni int) bool {
	if d.seen[ni] {
		return false
	}
	d.seen[ni] = true
	return true
}

// mpNested reads the msgpack value at p of a key whose configured fields
// lie below, in node ni.
func (d *Decoder) mpNested(msg []byte, p, ni int) (int, Reason) {
	if !d.enter(ni) {
		return p, ReasonDuplicateField
	}
	n, next, isMap, ok := mpMapLen(msg, p)
	switch {
	case !ok:
		return p, ReasonMalformed
	case isMap && n > (len(msg)-next)/2: // every entry takes at least two bytes
		return p, ReasonMalformed
	case isMap:
		return d.mpMap(msg, next, n, ni)
	case msg[p] == 0xc0: // nil
		d.settle(ni, kNil)
		return p + 1, ReasonNone
	}
	d.settle(ni, kOther)
	if p, ok = mpSkip(msg, p); !ok {
		return p, ReasonMalformed
	}
	return p, ReasonNone
}

// jsonNested reads the JSON value at p of a key whose configured fields
// lie below, in node ni.
func (d *Decoder) jsonNested(msg []byte, p, ni int) (int, Reason) {
	if !d.enter(ni) {
		return p, ReasonDuplicateField
	}
	var ok bool
	switch {
	case p < len(msg) && msg[p] == '{':
		return d.jsonObject(msg, p, ni)
	case p < len(msg) && msg[p] == 'n':
		d.settle(ni, kNil)
		p, ok = jsonLiteral(msg, p, "null")
	default:
		d.settle(ni, kOther)
		p, ok = d.jsonSkip(msg, p)
	}
	if !ok {
		return p, ReasonMalformed
	}
	return p, ReasonNone
}
