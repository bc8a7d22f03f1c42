package schema

import (
	"fmt"
	"math"
)

// DecodeRelease decodes a release message written by AppendRelease. It is
// strict: the schema version must be SchemaVersion (else the error wraps
// ErrVersion), every key must be present once with its type, the key must
// match the other fields, and the release must pass Validate. Unknown keys
// are skipped, so later additive versions stay readable. Integers are
// accepted where floats are expected (some encoders shorten integral
// floats). Other errors wrap ErrInvalidRelease.
func DecodeRelease(b []byte) (Release, error) {
	if err := checkVersion(b); err != nil {
		return Release{}, err
	}
	d := relDecoder{b: b}
	r, key := d.release()
	if d.err != nil {
		return Release{}, d.err
	}
	if d.p != len(b) {
		return Release{}, fmt.Errorf("%w: trailing bytes after the message", ErrInvalidRelease)
	}
	if err := r.Validate(); err != nil {
		return Release{}, err
	}
	if key != r.Key() {
		return Release{}, fmt.Errorf("%w: key does not match release_id, aggregate and group", ErrInvalidRelease)
	}
	return r, nil
}

// checkVersion finds schema_version in the top-level map before anything
// else is interpreted, so a future layout fails with ErrVersion.
func checkVersion(b []byte) error {
	d := relDecoder{b: b}
	version, found := int64(0), false
	d.fields("release", func(key string) bool {
		if key != kVersion {
			return false
		}
		version, found = d.int(), true
		return true
	})
	switch {
	case d.err != nil:
		return d.err
	case !found:
		return fmt.Errorf("%w: missing %s", ErrInvalidRelease, kVersion)
	case version != SchemaVersion:
		return fmt.Errorf("%w: version %d, this package reads %d", ErrVersion, version, SchemaVersion)
	}
	return nil
}

// relDecoder reads msgpack with a sticky error.
type relDecoder struct {
	b   []byte
	p   int
	err error
}

func (d *relDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidRelease}, args...)...)
	}
}

// fields reads a map whose keys are strings, calling f for each key with
// the value at d.p; f returns false to have the value skipped. Keys must
// not repeat.
func (d *relDecoder) fields(what string, f func(key string) bool) {
	if d.err != nil {
		return
	}
	n, p, isMap, ok := mpMapLen(d.b, d.p)
	if !ok || !isMap || n > len(d.b)-p {
		d.fail("%s is not a map", what)
		return
	}
	d.p = p
	seen := make(map[string]bool, n)
	for ; n > 0 && d.err == nil; n-- {
		key, next, isStr, ok := mpStr(d.b, d.p)
		if !ok || !isStr {
			d.fail("%s has a key that is not a string", what)
			return
		}
		k := string(key)
		if seen[k] {
			d.fail("%s has key %q twice", what, k)
			return
		}
		seen[k] = true
		d.p = next
		if !f(k) {
			d.skip()
		}
	}
}

// require fails unless every key of want was seen by fields.
func (d *relDecoder) require(what string, seen map[string]bool, want ...string) {
	for _, k := range want {
		if !seen[k] {
			d.fail("%s is missing %q", what, k)
		}
	}
}

func (d *relDecoder) skip() {
	if d.err != nil {
		return
	}
	p, ok := mpSkip(d.b, d.p)
	if !ok {
		d.fail("truncated or malformed msgpack")
	}
	d.p = p
}

func (d *relDecoder) scalar(v *scalar) {
	if d.err != nil {
		return
	}
	p, ok := mpScalar(d.b, d.p, v)
	if !ok {
		d.fail("truncated or malformed msgpack")
	}
	d.p = p
}

func (d *relDecoder) str() string {
	var v scalar
	if d.scalar(&v); d.err == nil && v.k != kStr {
		d.fail("expected a string")
	}
	return string(v.s)
}

func (d *relDecoder) int() int64 {
	var v scalar
	if d.scalar(&v); d.err == nil && v.k != kInt {
		d.fail("expected an integer")
	}
	return v.i
}

func (d *relDecoder) float() float64 {
	var v scalar
	d.scalar(&v)
	switch {
	case d.err != nil:
	case v.k == kFloat:
		return v.f
	case v.k == kInt:
		return float64(v.i)
	default:
		d.fail("expected a number")
	}
	return math.NaN()
}

func (d *relDecoder) bool() bool {
	var v scalar
	if d.scalar(&v); d.err == nil && v.k != kBool {
		d.fail("expected a boolean")
	}
	return v.b
}

// array reads an array header and calls f for each element.
func (d *relDecoder) array(what string, f func()) int {
	if d.err != nil {
		return 0
	}
	n, p, ok := mpArrayLen(d.b, d.p)
	if !ok || n > len(d.b)-p {
		d.fail("%s is not an array", what)
		return 0
	}
	d.p = p
	for i := 0; i < n && d.err == nil; i++ {
		f()
	}
	return n
}

func (d *relDecoder) floats(what string) []float64 {
	var fs []float64
	d.array(what, func() { fs = append(fs, d.float()) })
	return fs
}

// release reads the top-level map; it returns the release and its "key".
func (d *relDecoder) release() (r Release, key string) {
	seen := map[string]bool{}
	var unit string
	var eventLevel bool
	d.fields("release", func(k string) bool {
		seen[k] = true
		switch k {
		case kVersion:
			return false // checked by checkVersion
		case kReleaseID:
			r.ReleaseID = d.str()
		case kKey:
			key = d.str()
		case kWindowStart:
			r.WindowStart = d.int()
		case kWindowEnd:
			r.WindowEnd = d.int()
		case kAggregate:
			r.Aggregate = d.str()
		case kKind:
			r.Kind = Kind(d.str())
		case kGroup:
			d.array(kGroup, func() { r.Group = append(r.Group, d.group()) })
		case kSeries:
			d.array(kSeries, func() { r.Series = append(r.Series, d.series()) })
		case kEpsilon:
			r.Budget.Epsilon = d.float()
		case kDelta:
			r.Budget.Delta = d.float()
		case kSpentEpsilon:
			r.Spent.Epsilon = d.float()
		case kSpentDelta:
			r.Spent.Delta = d.float()
		case kHorizonStart:
			r.Horizon.Start = d.int()
		case kHorizonEnd:
			r.Horizon.End = d.int()
		case kHorizonEpsilon:
			r.Horizon.Budget.Epsilon = d.float()
		case kHorizonDelta:
			r.Horizon.Budget.Delta = d.float()
		case kPrivacyUnit:
			unit = d.str()
		case kEventLevel:
			eventLevel = d.bool()
		case kBounds:
			r.Bounds = d.bounds()
		case kInstance:
			r.Instance = d.str()
		case kNote:
			r.Note = d.str()
		default:
			return false
		}
		return true
	})
	d.require("release", seen, kVersion, kReleaseID, kKey, kWindowStart, kWindowEnd, kAggregate, kKind,
		kGroup, kSeries, kEpsilon, kDelta, kSpentEpsilon, kSpentDelta, kHorizonStart, kHorizonEnd,
		kHorizonEpsilon, kHorizonDelta, kPrivacyUnit, kEventLevel, kBounds, kInstance, kNote)
	switch {
	case d.err != nil:
	case eventLevel && unit != EventLevel:
		d.fail("event_level is true but privacy_unit is not %q", EventLevel)
	case !eventLevel && unit == "":
		d.fail("privacy_unit is empty")
	case !eventLevel:
		r.Unit = unit
	}
	return r, key
}

// group reads one group map.
func (d *relDecoder) group() GroupValue {
	var g GroupValue
	gs := map[string]bool{}
	d.fields(kGroup, func(k string) bool {
		gs[k] = true
		switch k {
		case kName:
			g.Name = d.str()
		case kValue:
			g.Value = d.str()
		default:
			return false
		}
		return true
	})
	d.require(kGroup, gs, kName, kValue)
	return g
}

// bounds reads the bounds map.
func (d *relDecoder) bounds() Bounds {
	var b Bounds
	bs := map[string]bool{}
	d.fields(kBounds, func(k string) bool {
		bs[k] = true
		switch k {
		case kMaxGroups:
			b.MaxGroups = d.int()
		case kMaxBuckets:
			b.MaxBuckets = d.int()
		case kMaxPerBkt:
			b.MaxPerBucket = d.int()
		case kMaxValues:
			b.MaxValues = d.int()
		case kLower:
			b.Lower = d.float()
		case kUpper:
			b.Upper = d.float()
		default:
			return false
		}
		return true
	})
	d.require(kBounds, bs, kMaxGroups, kMaxBuckets, kMaxPerBkt, kMaxValues, kLower, kUpper)
	return b
}

// series reads one series map.
func (d *relDecoder) series() Series {
	var s Series
	seen := map[string]bool{}
	var valueType string
	var ints []int64
	var floats []float64
	allInts := true
	d.fields(kSeries, func(k string) bool {
		seen[k] = true
		switch k {
		case kName:
			s.Name = d.str()
		case kMechanism:
			s.Mechanism = d.str()
		case kScale:
			s.Scale = d.float()
		case kSensitivity:
			ss := map[string]bool{}
			sens := &s.Sensitivity
			d.fields(kSensitivity, func(k string) bool {
				ss[k] = true
				switch k {
				case kL0:
					sens.L0 = d.int()
				case kL1:
					sens.L1 = d.float()
				case kL2:
					sens.L2 = d.float()
				case kLInf:
					sens.LInf = d.float()
				default:
					return false
				}
				return true
			})
			d.require(kSensitivity, ss, kL0, kL1, kL2, kLInf)
		case kValueType:
			valueType = d.str()
		case kLabels:
			d.array(kLabels, func() { s.Labels = append(s.Labels, d.str()) })
		case kValues:
			n := d.array(kValues, func() {
				var v scalar
				d.scalar(&v)
				switch {
				case d.err != nil:
				case v.k == kInt:
					ints = append(ints, v.i)
					floats = append(floats, float64(v.i))
				case v.k == kFloat:
					allInts = false
					floats = append(floats, v.f)
				default:
					d.fail("series values must be numbers")
				}
			})
			if n == 0 {
				floats = []float64{} // present but empty: Validate reports it
			}
		case kCILevel:
			s.Level = d.float()
		case kCILo:
			s.Lo = d.floats(kCILo)
		case kCIHi:
			s.Hi = d.floats(kCIHi)
		case kWindows:
			s.Windows = d.int()
		default:
			return false
		}
		return true
	})
	d.require(kSeries, seen, kName, kMechanism, kScale, kSensitivity, kValueType, kLabels, kValues, kCILevel, kCILo, kCIHi)
	switch {
	case d.err != nil:
	case valueType == valueTypeInt && !allInts:
		d.fail("series %q: value_type is int but a value is a float", s.Name)
	case valueType == valueTypeInt:
		s.Ints = ints
		if s.Ints == nil {
			s.Ints = []int64{}
		}
	case valueType == valueTypeFloat:
		s.Floats = floats
	default:
		d.fail("series %q: value_type must be %q or %q", s.Name, valueTypeInt, valueTypeFloat)
	}
	return s
}
