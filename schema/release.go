package schema

import (
	"fmt"
	"strings"
)

// SchemaVersion is the version of the release message format that
// AppendRelease writes and DecodeRelease reads. Additive changes (new keys,
// which readers skip) keep the version; any other change increments it.
const SchemaVersion = 1

// Kind is the kind of an aggregate.
type Kind string

// The aggregate kinds, and the series each release of that kind carries,
// in this order.
const (
	KindHistogram Kind = "histogram" // series "counts", one value per bucket, with labels
	KindCount     Kind = "count"     // series "count", one value
	KindSum       Kind = "sum"       // series "sum", one value
	KindMean      Kind = "mean"      // series "sum", "count" and "mean", one value each
	// KindUnits: series "units", one value (distinct privacy units).
	KindUnits Kind = "units"
	// KindVariance: series "count", "sum" (centred), "sum_sq" (centred
	// squares), "variance" and "stddev", one value each.
	KindVariance Kind = "variance"
	// KindQuantiles: series "quantiles" and "rank_error", one value per
	// requested rank, labelled by the rank (e.g. "0.5").
	KindQuantiles Kind = "quantiles"
)

// Series names.
const (
	SeriesCounts = "counts" // noised histogram counts
	SeriesCount  = "count"  // noised count
	SeriesSum    = "sum"    // noised (clamped, for means: centred) sum
	SeriesMean   = "mean"   // mean derived from the noised sum and count
	// SeriesUnits is the noised number of distinct units.
	SeriesUnits = "units"
	// SeriesSumSq is the noised sum of squared centred values (variance).
	SeriesSumSq = "sum_sq"
	// SeriesVariance and SeriesStddev are derived from a variance
	// release's count, sum and sum_sq.
	SeriesVariance = "variance"
	SeriesStddev   = "stddev"
	// SeriesQuantiles are the quantiles derived from a noised quantile
	// tree (the tree itself is not published); its mechanism, scale and
	// sensitivity are the tree nodes'.
	SeriesQuantiles = "quantiles"
	// SeriesRankError bounds, per quantile, how far the true rank (in
	// values) of any value in the quantile's interval can be from rank·N
	// when the interval holds (derived). With the exponential mechanism
	// (mechanism "exponential" on the quantiles series, whose intervals
	// are the whole value range) it bounds how far the released value's
	// rank is from rank·N beyond the leaf resolution (the distance from
	// rank·N to the nearest leaf edge's rank), at the series' level.
	SeriesRankError = "rank_error"
)

// derivedSeries are the series computed from other series or from noise
// that is not published (post-processing, scale 0 unless stated), whose
// mechanism is DerivedMechanism; floatSeries must be float-valued;
// labelledKinds carry one labelled value per bucket or rank.
var (
	derivedSeries = map[string]bool{SeriesMean: true, SeriesVariance: true, SeriesStddev: true, SeriesRankError: true}
	floatSeries   = map[string]bool{SeriesMean: true, SeriesVariance: true, SeriesStddev: true, SeriesQuantiles: true, SeriesRankError: true}
	labelledKinds = map[Kind]bool{KindHistogram: true, KindQuantiles: true}
)

// DerivedMechanism is the mechanism name of a series computed from other
// series of the same release (post-processing, no noise of its own, scale
// 0): the "mean" series of a mean release.
const DerivedMechanism = "derived"

// EventLevel is the privacy_unit of a release under event-level privacy.
const EventLevel = "event"

// Release is one published message: one aggregate of one group in one
// window. Every release of a window is one mechanism's output and shares
// its budget (Budget is the window's, not this message's share).
type Release struct {
	// ReleaseID identifies the window's release; noise is derived from it,
	// so the same id always carries the same values.
	ReleaseID string
	// WindowStart and WindowEnd bound the window [start, end), unix ms.
	WindowStart, WindowEnd int64
	// Aggregate is the configured aggregate name, Kind its kind.
	Aggregate string
	Kind      Kind
	// Group holds the group-by field names and values, in configured order.
	Group []GroupValue
	// Series holds the noised value vectors (see Kind for which).
	Series []Series
	// Budget is the (ε, δ) of the window's release.
	Budget Budget
	// Spent is the budget spent in the horizon so far, this release
	// included; without a horizon it equals Budget.
	Spent Budget
	// Horizon is the accounting horizon; zero without one (per-window
	// budget).
	Horizon Horizon
	// Unit is the privacy-unit field, "" for event-level privacy.
	Unit string
	// Bounds are the contribution bounds enforced before aggregation.
	Bounds Bounds
	// Instance names the producing dpstream instance.
	Instance string
	// Note is a free-form accounting note, e.g. how the budget was split.
	Note string
}

// GroupValue is one group-by field and its value.
type GroupValue struct {
	Name, Value string
}

// Budget is a privacy budget.
type Budget struct {
	Epsilon, Delta float64
}

// Horizon is the period a total budget covers.
type Horizon struct {
	// Start and End bound the horizon [start, end), unix ms; both 0 when
	// there is no horizon.
	Start, End int64
	// Budget is the horizon's total budget; zero when there is no horizon.
	Budget Budget
}

// Sensitivity is the sensitivity of a value vector: how far one privacy
// unit can move it.
type Sensitivity struct {
	L0   int64   // coordinates one unit can change
	L1   float64 // ℓ1 norm of the largest change
	L2   float64 // ℓ2 norm of the largest change
	LInf float64 // largest change of one coordinate
}

// Bounds are the contribution bounds per privacy unit and window. A zero
// count means the bound does not apply; Lower = Upper = 0 means no value
// field.
type Bounds struct {
	MaxGroups    int64   // group keys a unit may touch
	MaxBuckets   int64   // histogram cells per group (L0)
	MaxPerBucket int64   // contributions per cell (L∞)
	MaxValues    int64   // values per group for sums and means
	Lower, Upper float64 // value clamping range
}

// Series is one noised value vector with its mechanism. Exactly one of Ints
// (integer-valued noise, exact) and Floats is set.
type Series struct {
	Name        string      // SeriesCounts, SeriesCount, SeriesSum or SeriesMean
	Mechanism   string      // mechanism name, e.g. "laplace", or DerivedMechanism
	Scale       float64     // noise scale (0 for derived series)
	Sensitivity Sensitivity // of this vector
	Labels      []string    // bucket labels (histograms only)
	Ints        []int64     // noised values, integer noise
	Floats      []float64   // noised values, real noise
	Level       float64     // confidence level 1−β of the intervals
	Lo, Hi      []float64   // confidence interval of each value
	Windows     int64       // SeriesRunning only: the windows summed (encoded only then)
}

// Len returns the number of values in s.
func (s *Series) Len() int {
	if s.Ints != nil {
		return len(s.Ints)
	}
	return len(s.Floats)
}

// Value returns value i as a float64 (exact for integers up to 2^53).
func (s *Series) Value(i int) float64 {
	if s.Ints != nil {
		return float64(s.Ints[i])
	}
	return s.Floats[i]
}

// Key returns the Kafka message key of r (see ReleaseKey).
func (r *Release) Key() string {
	vals := make([]string, len(r.Group))
	for i, g := range r.Group {
		vals[i] = g.Value
	}
	return ReleaseKey(r.ReleaseID, r.Aggregate, vals...)
}

// ReleaseKey returns the Kafka message key of the release of one aggregate
// and group: the release id, the aggregate name and each group value,
// joined by "|", where each part has '%', '|' and the control bytes
// 0x00–0x1f, 0x7f percent-encoded (%XX, upper-case hex). With no group-by
// fields the key is "id|aggregate"; a group of one empty value gives
// "id|aggregate|". SplitKey inverts it.
func ReleaseKey(releaseID, aggregate string, group ...string) string {
	var b strings.Builder
	escapeKeyPart(&b, releaseID)
	b.WriteByte('|')
	escapeKeyPart(&b, aggregate)
	for _, g := range group {
		b.WriteByte('|')
		escapeKeyPart(&b, g)
	}
	return b.String()
}

func escapeKeyPart(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' || c == '|' || c < 0x20 || c == 0x7f {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		} else {
			b.WriteByte(c)
		}
	}
}

// SplitKey inverts ReleaseKey. Errors wrap ErrInvalidRelease.
func SplitKey(key string) (releaseID, aggregate string, group []string, err error) {
	parts := strings.Split(key, "|")
	if len(parts) < 2 {
		return "", "", nil, fmt.Errorf("%w: key has no aggregate part", ErrInvalidRelease)
	}
	for i, p := range parts {
		if parts[i], err = unescapeKeyPart(p); err != nil {
			return "", "", nil, err
		}
	}
	return parts[0], parts[1], parts[2:], nil
}

func unescapeKeyPart(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("%w: key has a truncated %%-escape", ErrInvalidRelease)
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("%w: key has a bad %%-escape", ErrInvalidRelease)
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// seriesOf lists the series names each kind carries, in order.
var seriesOf = map[Kind][]string{
	KindHistogram: {SeriesCounts},
	KindCount:     {SeriesCount},
	KindSum:       {SeriesSum},
	KindMean:      {SeriesSum, SeriesCount, SeriesMean},
	KindUnits:     {SeriesUnits},
	KindVariance:  {SeriesCount, SeriesSum, SeriesSumSq, SeriesVariance, SeriesStddev},
	KindQuantiles: {SeriesQuantiles, SeriesRankError},
}

// Validate checks that r can be published: every problem at once
// (errors.Join), each wrapping ErrInvalidRelease.
func (r *Release) Validate() error {
	p := &problems{sentinel: ErrInvalidRelease}
	r.validateHeader(p)
	r.validateSeries(p)
	r.validateRunning(p.bad)
	r.validateBudgets(p)
	return p.err()
}

// validateHeader checks the release's identity, window and group.
func (r *Release) validateHeader(p *problems) {
	p.text("release_id", r.ReleaseID, true)
	p.text("aggregate", r.Aggregate, true)
	p.text("privacy unit", r.Unit, false)
	p.text("instance", r.Instance, false)
	p.text("note", r.Note, false)
	if !(r.WindowStart < r.WindowEnd) {
		p.bad("window [%d, %d) is empty", r.WindowStart, r.WindowEnd)
	}
	names := make(map[string]bool, len(r.Group))
	for i, g := range r.Group {
		p.text(fmt.Sprintf("group[%d].name", i), g.Name, true)
		p.text(fmt.Sprintf("group[%d].value", i), g.Value, false)
		if names[g.Name] {
			p.bad("group field %q occurs twice", g.Name)
		}
		names[g.Name] = true
	}
}

// validateSeries checks that the series are those of the release's kind,
// and each of them.
func (r *Release) validateSeries(p *problems) {
	want, ok := seriesOf[r.Kind]
	want = withRunning(r, want)
	if !ok {
		p.bad("kind %q is not one of histogram, count, sum, mean, units, variance, quantiles", r.Kind)
	} else if len(r.Series) != len(want) {
		p.bad("a %s release has series %v, got %d series", r.Kind, want, len(r.Series))
	}
	for i := range r.Series {
		s := &r.Series[i]
		if ok && i < len(want) && s.Name != want[i] {
			p.bad("series %d of a %s release is %q, want %q", i, r.Kind, s.Name, want[i])
		}
		r.validateOneSeries(p, s)
	}
}

// validateOneSeries checks one series of r: its mechanism, scale,
// sensitivities, values, labels and intervals.
func (r *Release) validateOneSeries(p *problems, s *Series) {
	p.text("series mechanism", s.Mechanism, true)
	if (s.Mechanism == DerivedMechanism) != derivedSeries[s.Name] {
		p.bad("series %q: only the mean, variance, stddev and rank_error series are %q", s.Name, DerivedMechanism)
	}
	if !(s.Scale >= 0) || !finite(s.Scale) {
		p.bad("series %q: scale must be finite and ≥ 0", s.Name)
	}
	sens := s.Sensitivity
	if sens.L0 < 0 || !(sens.L1 >= 0 && sens.L2 >= 0 && sens.LInf >= 0) ||
		!finite(sens.L1) || !finite(sens.L2) || !finite(sens.LInf) {
		p.bad("series %q: sensitivities must be finite and ≥ 0", s.Name)
	}
	n := s.Len()
	switch {
	case (s.Ints == nil) == (s.Floats == nil):
		p.bad("series %q: set exactly one of Ints and Floats", s.Name)
	case n == 0:
		p.bad("series %q has no values", s.Name)
	case labelledKinds[r.Kind] && len(s.Labels) != n:
		p.bad("series %q: %d labels for %d values", s.Name, len(s.Labels), n)
	case !labelledKinds[r.Kind] && (n != 1 || len(s.Labels) != 0):
		p.bad("series %q: a %s release has one unlabelled value", s.Name, r.Kind)
	case floatSeries[s.Name] && s.Ints != nil:
		p.bad("series %q must be float-valued", s.Name)
	}
	for j, l := range s.Labels {
		p.text(fmt.Sprintf("series %q label %d", s.Name, j), l, false)
	}
	for _, f := range s.Floats {
		if !finite(f) {
			p.bad("series %q has a value that is not finite", s.Name)
			break
		}
	}
	if !(s.Level > 0 && s.Level < 1) {
		p.bad("series %q: confidence level must be in (0, 1)", s.Name)
	}
	if len(s.Lo) != n || len(s.Hi) != n {
		p.bad("series %q: %d values need %d intervals", s.Name, n, n)
	} else {
		for j := range s.Lo {
			if !finite(s.Lo[j]) || !finite(s.Hi[j]) || !(s.Lo[j] <= s.Hi[j]) {
				p.bad("series %q: interval %d is not finite with lo ≤ hi", s.Name, j)
				break
			}
		}
	}
}

// validateBudgets checks the budgets, the horizon and the bounds.
func (r *Release) validateBudgets(p *problems) {
	p.budget("budget", r.Budget)
	p.budget("spent budget", r.Spent)
	h := r.Horizon
	if h == (Horizon{}) {
		// no horizon
	} else if !(h.Start < h.End) {
		p.bad("horizon [%d, %d) is empty", h.Start, h.End)
	} else {
		p.budget("horizon budget", h.Budget)
	}
	b := r.Bounds
	if b.MaxGroups < 0 || b.MaxBuckets < 0 || b.MaxPerBucket < 0 || b.MaxValues < 0 {
		p.bad("bounds must be ≥ 0")
	}
	if !finite(b.Lower) || !finite(b.Upper) || !(b.Lower < b.Upper || (b.Lower == 0 && b.Upper == 0)) {
		p.bad("value bounds must be finite with lower < upper (or both 0)")
	}
}

// The release message keys, in the order AppendRelease writes them.
const (
	kVersion        = "schema_version"
	kReleaseID      = "release_id"
	kKey            = "key"
	kWindowStart    = "window_start"
	kWindowEnd      = "window_end"
	kAggregate      = "aggregate"
	kKind           = "kind"
	kGroup          = "group"
	kSeries         = "series"
	kEpsilon        = "epsilon"
	kDelta          = "delta"
	kSpentEpsilon   = "spent_epsilon"
	kSpentDelta     = "spent_delta"
	kHorizonStart   = "horizon_start"
	kHorizonEnd     = "horizon_end"
	kHorizonEpsilon = "horizon_epsilon"
	kHorizonDelta   = "horizon_delta"
	kPrivacyUnit    = "privacy_unit"
	kEventLevel     = "event_level"
	kBounds         = "bounds"
	kInstance       = "instance"
	kNote           = "note"

	kName        = "name"
	kValue       = "value"
	kMechanism   = "mechanism"
	kScale       = "scale"
	kSensitivity = "sensitivity"
	kValueType   = "value_type"
	kLabels      = "labels"
	kValues      = "values"
	kCILevel     = "ci_level"
	kCILo        = "ci_lo"
	kCIHi        = "ci_hi"
	kL0          = "l0"
	kL1          = "l1"
	kL2          = "l2"
	kLInf        = "linf"
	kMaxGroups   = "max_groups"
	kMaxBuckets  = "max_buckets"
	kMaxPerBkt   = "max_per_bucket"
	kMaxValues   = "max_values"
	kLower       = "lower"
	kUpper       = "upper"

	valueTypeInt   = "int"
	valueTypeFloat = "float"
)

// EncodeRelease returns the msgpack encoding of r (see AppendRelease).
func EncodeRelease(r *Release) ([]byte, error) { return AppendRelease(nil, r) }

// AppendRelease validates r and appends its msgpack encoding to dst. The
// encoding is deterministic: keys in a fixed order, integers in their
// shortest form, floats always as float64, so equal releases give equal
// bytes. Errors wrap ErrInvalidRelease.
func AppendRelease(dst []byte, r *Release) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return dst, err
	}
	b := mpAppendMapLen(dst, 22)
	b = mpAppendInt(mpAppendStr(b, kVersion), SchemaVersion)
	b = mpAppendStr(mpAppendStr(b, kReleaseID), r.ReleaseID)
	b = mpAppendStr(mpAppendStr(b, kKey), r.Key())
	b = mpAppendInt(mpAppendStr(b, kWindowStart), r.WindowStart)
	b = mpAppendInt(mpAppendStr(b, kWindowEnd), r.WindowEnd)
	b = mpAppendStr(mpAppendStr(b, kAggregate), r.Aggregate)
	b = mpAppendStr(mpAppendStr(b, kKind), string(r.Kind))
	b = mpAppendArrayLen(mpAppendStr(b, kGroup), len(r.Group))
	for _, g := range r.Group {
		b = mpAppendMapLen(b, 2)
		b = mpAppendStr(mpAppendStr(b, kName), g.Name)
		b = mpAppendStr(mpAppendStr(b, kValue), g.Value)
	}
	b = mpAppendArrayLen(mpAppendStr(b, kSeries), len(r.Series))
	for i := range r.Series {
		b = appendSeries(b, &r.Series[i])
	}
	b = mpAppendFloat(mpAppendStr(b, kEpsilon), r.Budget.Epsilon)
	b = mpAppendFloat(mpAppendStr(b, kDelta), r.Budget.Delta)
	b = mpAppendFloat(mpAppendStr(b, kSpentEpsilon), r.Spent.Epsilon)
	b = mpAppendFloat(mpAppendStr(b, kSpentDelta), r.Spent.Delta)
	b = mpAppendInt(mpAppendStr(b, kHorizonStart), r.Horizon.Start)
	b = mpAppendInt(mpAppendStr(b, kHorizonEnd), r.Horizon.End)
	b = mpAppendFloat(mpAppendStr(b, kHorizonEpsilon), r.Horizon.Budget.Epsilon)
	b = mpAppendFloat(mpAppendStr(b, kHorizonDelta), r.Horizon.Budget.Delta)
	unit := r.Unit
	if unit == "" {
		unit = EventLevel
	}
	b = mpAppendStr(mpAppendStr(b, kPrivacyUnit), unit)
	b = mpAppendBool(mpAppendStr(b, kEventLevel), r.Unit == "")
	b = mpAppendMapLen(mpAppendStr(b, kBounds), 6)
	b = mpAppendInt(mpAppendStr(b, kMaxGroups), r.Bounds.MaxGroups)
	b = mpAppendInt(mpAppendStr(b, kMaxBuckets), r.Bounds.MaxBuckets)
	b = mpAppendInt(mpAppendStr(b, kMaxPerBkt), r.Bounds.MaxPerBucket)
	b = mpAppendInt(mpAppendStr(b, kMaxValues), r.Bounds.MaxValues)
	b = mpAppendFloat(mpAppendStr(b, kLower), r.Bounds.Lower)
	b = mpAppendFloat(mpAppendStr(b, kUpper), r.Bounds.Upper)
	b = mpAppendStr(mpAppendStr(b, kInstance), r.Instance)
	b = mpAppendStr(mpAppendStr(b, kNote), r.Note)
	return b, nil
}

func appendSeries(b []byte, s *Series) []byte {
	n := 10
	if s.Windows != 0 {
		n++ // kWindows
	}
	b = mpAppendMapLen(b, n)
	b = mpAppendStr(mpAppendStr(b, kName), s.Name)
	b = mpAppendStr(mpAppendStr(b, kMechanism), s.Mechanism)
	b = mpAppendFloat(mpAppendStr(b, kScale), s.Scale)
	b = mpAppendMapLen(mpAppendStr(b, kSensitivity), 4)
	b = mpAppendInt(mpAppendStr(b, kL0), s.Sensitivity.L0)
	b = mpAppendFloat(mpAppendStr(b, kL1), s.Sensitivity.L1)
	b = mpAppendFloat(mpAppendStr(b, kL2), s.Sensitivity.L2)
	b = mpAppendFloat(mpAppendStr(b, kLInf), s.Sensitivity.LInf)
	if s.Ints != nil {
		b = mpAppendStr(mpAppendStr(b, kValueType), valueTypeInt)
	} else {
		b = mpAppendStr(mpAppendStr(b, kValueType), valueTypeFloat)
	}
	b = mpAppendArrayLen(mpAppendStr(b, kLabels), len(s.Labels))
	for _, l := range s.Labels {
		b = mpAppendStr(b, l)
	}
	b = mpAppendArrayLen(mpAppendStr(b, kValues), s.Len())
	for _, v := range s.Ints {
		b = mpAppendInt(b, v)
	}
	for _, v := range s.Floats {
		b = mpAppendFloat(b, v)
	}
	b = mpAppendFloat(mpAppendStr(b, kCILevel), s.Level)
	b = appendFloats(mpAppendStr(b, kCILo), s.Lo)
	b = appendFloats(mpAppendStr(b, kCIHi), s.Hi)
	return appendSeriesWindows(b, s)
}

func appendFloats(b []byte, fs []float64) []byte {
	b = mpAppendArrayLen(b, len(fs))
	for _, f := range fs {
		b = mpAppendFloat(b, f)
	}
	return b
}
