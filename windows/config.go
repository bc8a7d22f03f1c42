package windows

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Errors returned by this package. Every error wraps one of these.
var (
	// ErrConfig: a Config field is missing, out of range, NaN or infinite.
	ErrConfig = errors.New("windows: invalid config")
	// ErrRevoked: Advance on a partition that was revoked and not assigned
	// again.
	ErrRevoked = errors.New("windows: partition revoked")
	// ErrMismatch: Merge of windows with different bounds, extents or
	// histogram sizes; merging partials of different configurations,
	// seeds or windows.
	ErrMismatch = errors.New("windows: windows do not match")
	// ErrCorrupt: Unmarshal input that is not a valid encoded window or
	// partial, or a partial that no Tumbling with the merge's
	// configuration could have produced.
	ErrCorrupt = errors.New("windows: corrupt window encoding")
)

// Limits on configuration values. They keep every counter in its integer
// type, every sum finite and every per-unit structure small.
const (
	// MaxNumBuckets is the largest histogram size: each open group holds
	// NumBuckets int64 counters (8 bytes each), so this caps a group's
	// histogram at 512 KiB.
	MaxNumBuckets = 1 << 16
	// MaxBound is the largest MaxGroups, MaxBuckets and MaxValues: per-unit
	// kept sets are scanned linearly and their sizes are stored in 16 bits.
	MaxBound = 1<<16 - 1
	// MaxPerBucketLimit is the largest MaxPerBucket: per-unit cell counts
	// are uint32 (saturating), so the bound must fit below 2^31.
	MaxPerBucketLimit = 1<<31 - 1
	// MaxAbsValue is the largest |Lower| and |Upper| (2^53, the range in
	// which float64 holds every integer). With at most 2^63 values per
	// window a sum stays below 2^116, far from float64 overflow (≈ 2^1024).
	MaxAbsValue = 1 << 53
	// MaxTreeBranching, MaxTreeDepth and MaxTreeLeaves bound the quantile
	// tree: leaf indices fit in 32 bits, and the operator noises every node
	// of every group's tree (at most MaxTreeLeaves·B/(B−1) ≤ 2^21 nodes).
	MaxTreeBranching = 1 << 10
	MaxTreeDepth     = 20
	MaxTreeLeaves    = 1 << 20
	// DefaultTreeBranching and DefaultTreeDepth are the defaults of
	// Google's tree-based quantiles (differential-privacy library,
	// go/dpagg/quantiles.go: DefaultTreeHeight 4, DefaultBranchingFactor
	// 16): 16^4 = 65536 leaves, a resolution of (Upper − Lower)/65536.
	DefaultTreeBranching = 16
	DefaultTreeDepth     = 4
	// maxDuration is the largest Size, Offset or AllowedLateness (2^40 ms,
	// about 35 years). Event times are limited to ±2^61 ms, so window
	// arithmetic never overflows int64.
	maxDuration = (1 << 40) * time.Millisecond
	// minTime and maxTime bound event and arrival times and watermarks
	// (±2^61 ms, about 73 million years either side of the epoch).
	minTime = -(1 << 61)
	maxTime = 1 << 61
)

// Config configures a Tumbling aggregator. Durations are time.Duration and
// must be whole milliseconds; event times and watermarks are int64 Unix
// milliseconds. The zero value is not valid; Validate says what is missing.
type Config struct {
	// Size is the window length. Windows are [start, start+Size) with start
	// = Offset + k·Size for an integer k (aligned to the Unix epoch).
	Size time.Duration
	// Offset shifts window boundaries from the epoch: 0 ≤ Offset < Size.
	Offset time.Duration
	// AllowedLateness keeps a window open after its end: it closes once
	// every partition's watermark (arrival time) is ≥ end +
	// AllowedLateness, and an event arriving at or after that is late.
	AllowedLateness time.Duration

	// EventLevel selects event-level privacy: every event is its own
	// privacy unit and Event.Unit is ignored. The per-unit bounds are then
	// all effectively 1 and the sensitivities describe one event.
	EventLevel bool

	// Histogram enables the histogram aggregate with NumBuckets cells per
	// group (Event.Bucket in [0, NumBuckets), or −1 for none).
	Histogram  bool
	NumBuckets int
	// Count enables the per-group event count.
	Count bool
	// Sum enables the per-group sum of clamped values.
	Sum bool
	// Mean enables the per-group centred sum Σ(v − mid) and value count
	// from which the operator forms a noisy mean; mid = (Lower+Upper)/2.
	Mean bool
	// Units enables the per-group number of distinct units as an aggregate
	// of its own (Group.Units is always computed; with this flag it is
	// released). It needs only MaxGroups.
	Units bool
	// Variance enables the per-group centred sum of squares Σ(v − mid)²
	// (Group.CentredSqSum) besides the centred sum and the value count,
	// from which the operator forms a noisy variance (see Sensitivities).
	Variance bool
	// Quantiles enables the per-group leaf histogram of a quantile tree
	// over [Lower, Upper] (Group.Leaves): TreeBranching^TreeDepth leaves of
	// equal width, each kept value counted in the leaf holding it. The
	// operator noises every node of the tree and derives any quantile from
	// it (see QuantileTree).
	Quantiles bool
	// TreeBranching and TreeDepth shape the quantile tree (needed with
	// Quantiles): every internal node has TreeBranching children and the
	// leaves are TreeDepth levels below the root. DefaultTreeBranching and
	// DefaultTreeDepth are Google's defaults.
	TreeBranching, TreeDepth int

	// MaxGroups is the number of group keys one unit may touch per window.
	MaxGroups int
	// MaxBuckets is the number of histogram cells one unit may touch per
	// group and window (the L0 bound per group). Needed with Histogram.
	MaxBuckets int
	// MaxPerBucket is the count one unit may add to one histogram cell
	// (the L∞ bound). Needed with Histogram.
	MaxPerBucket int
	// MaxValues is the number of contributions one unit may make per group
	// and window to Count (events) and to Sum and Mean (values). Needed
	// with Count, Sum or Mean.
	MaxValues int
	// MaxContributions is the most one unit may add per window in total
	// to the histogram (over all its cells in all groups) and, separately,
	// to the count and the values (over all groups: events for the count,
	// values for sums, means, variances and quantiles, a group keeping no
	// more values than events) — the L1 bound beside the L0 and L∞
	// ones (0: unset, only the per-cell and per-group bounds hold). When a
	// unit's bounded contributions exceed it, a uniformly random subset of
	// them is kept, chosen with the unit's keyed randomness (see
	// totalKeep), so the choice depends neither on arrival order nor on
	// other units. Ignored with EventLevel (every bound is then 1).
	MaxContributions int
	// Lower and Upper are the clamping range of values. Needed with Sum or
	// Mean; Lower < Upper, both finite with magnitude ≤ MaxAbsValue.
	Lower, Upper float64

	// MaxUnits caps the units tracked per window (0: no cap). When more
	// units appear, the MaxUnits units with the smallest keyed priority are
	// kept (a uniformly random, order-independent subset) and the others'
	// events are dropped and counted. A cap changes the neighbouring
	// relation from add/remove to replace-one, so the sensitivities of a
	// capped configuration are the replace-one ones (see Sensitivities).
	// Ignored with EventLevel.
	MaxUnits int
	// MaxOpenGroups caps the distinct group keys per window with
	// EventLevel (0: no cap); in unit mode open groups are already bounded
	// by MaxUnits × MaxGroups, and setting it is an error. The groups with
	// the smallest keyed hash are kept. This is a memory guard only: which
	// groups survive depends on which exist, which no per-unit bound
	// covers, so a cap that is ever reached must be raised (see
	// Drops.GroupCap).
	MaxOpenGroups int
	// MaxOpenWindows caps the windows open at once (0: no cap). An event
	// whose window starts MaxOpenWindows windows or more after the first
	// window not yet emitted is dropped with status TooManyWindows: the cap
	// is measured from the emission point, so no event can push another's
	// window out (see Tumbling). It is a memory guard; an in-sync
	// consumer never reaches it when it is at least ⌈(MaxSkew +
	// AllowedLateness + D)/Size⌉ + 2, D being how far the effective
	// watermark may lag an event's arrival.
	MaxOpenWindows int
	// MaxSkew is how far an event's time may be ahead of its arrival
	// (0: off): an event with Time > Arrival + MaxSkew is dropped with
	// status TooFarAhead. It bounds how far ahead one event can open a
	// window, and is measured against the event's own arrival, so a bogus
	// timestamp affects only its own event. Use the largest clock skew
	// expected between the event sources and the broker.
	MaxSkew time.Duration
}

// Validate reports every problem with the configuration, one line each, all
// wrapping ErrConfig; nil if the configuration is usable.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	wholeMs := func(name string, d time.Duration) bool {
		if d%time.Millisecond != 0 {
			bad("%s %v is not a whole number of milliseconds", name, d)
			return false
		}
		return true
	}
	switch {
	case c.Size <= 0:
		bad("size must be positive")
	case c.Size > maxDuration:
		bad("size must be at most %v", maxDuration)
	default:
		wholeMs("size", c.Size)
	}
	if c.Offset < 0 || (c.Size > 0 && c.Offset >= c.Size) {
		bad("offset must be in [0, size)")
	} else {
		wholeMs("offset", c.Offset)
	}
	switch {
	case c.AllowedLateness < 0:
		bad("allowed lateness must not be negative")
	case c.AllowedLateness > maxDuration:
		bad("allowed lateness must be at most %v", maxDuration)
	default:
		wholeMs("allowed lateness", c.AllowedLateness)
	}
	c.validateAggregates(bad)
	if c.MaxContributions < 0 || c.MaxContributions > MaxPerBucketLimit {
		bad("max contributions must be in [0, %d] (0: unset), got %d", MaxPerBucketLimit, c.MaxContributions)
	}
	if c.MaxUnits < 0 {
		bad("max units must not be negative (0: no cap)")
	}
	if c.MaxOpenGroups < 0 {
		bad("max open groups must not be negative (0: no cap)")
	} else if c.MaxOpenGroups > 0 && !c.EventLevel {
		bad("max open groups applies to event-level privacy only; with units, open groups are bounded by max units × max groups")
	}
	if c.MaxOpenWindows < 0 {
		bad("max open windows must not be negative (0: no cap)")
	}
	switch {
	case c.MaxSkew < 0:
		bad("max skew must not be negative (0: off)")
	case c.MaxSkew > maxDuration:
		bad("max skew must be at most %v", maxDuration)
	default:
		wholeMs("max skew", c.MaxSkew)
	}
	return errors.Join(errs...)
}

// validateAggregates is the part of Validate about the aggregates: at
// least one, the quantile tree's shape, the histogram's and the values'
// bounds and the clamping range. bad records a problem.
func (c Config) validateAggregates(bad func(format string, args ...any)) {
	if !c.Histogram && !c.Count && !c.Sum && !c.Mean && !c.Units && !c.Variance && !c.Quantiles {
		bad("at least one aggregate (histogram, count, sum, mean, units, variance, quantiles) is required")
	}
	if c.Quantiles {
		if c.TreeBranching < 2 || c.TreeBranching > MaxTreeBranching {
			bad("quantiles need tree branching in [2, %d], got %d", MaxTreeBranching, c.TreeBranching)
		}
		if c.TreeDepth < 1 || c.TreeDepth > MaxTreeDepth {
			bad("quantiles need tree depth in [1, %d], got %d", MaxTreeDepth, c.TreeDepth)
		}
		if c.TreeBranching >= 2 && c.TreeDepth >= 1 && treeLeavesOver(c.TreeBranching, c.TreeDepth) {
			bad("quantile tree of branching %d and depth %d has more than %d leaves", c.TreeBranching, c.TreeDepth, MaxTreeLeaves)
		}
	}
	if c.Histogram {
		if c.NumBuckets < 1 || c.NumBuckets > MaxNumBuckets {
			bad("histogram needs num buckets in [1, %d], got %d", MaxNumBuckets, c.NumBuckets)
		}
		if c.MaxBuckets < 1 || c.MaxBuckets > MaxBound {
			bad("histogram needs max buckets in [1, %d], got %d", MaxBound, c.MaxBuckets)
		}
		if c.MaxPerBucket < 1 || c.MaxPerBucket > MaxPerBucketLimit {
			bad("histogram needs max per bucket in [1, %d], got %d", MaxPerBucketLimit, c.MaxPerBucket)
		}
	}
	if c.MaxGroups < 1 || c.MaxGroups > MaxBound {
		bad("max groups must be in [1, %d], got %d", MaxBound, c.MaxGroups)
	}
	if (c.Count || c.Sum || c.Mean || c.Variance || c.Quantiles) && (c.MaxValues < 1 || c.MaxValues > MaxBound) {
		bad("count, sum, mean, variance and quantiles need max values in [1, %d], got %d", MaxBound, c.MaxValues)
	}
	if c.valued() {
		okL := !math.IsNaN(c.Lower) && math.Abs(c.Lower) <= MaxAbsValue
		okU := !math.IsNaN(c.Upper) && math.Abs(c.Upper) <= MaxAbsValue
		if !okL {
			bad("lower must be finite with magnitude at most 2^53")
		}
		if !okU {
			bad("upper must be finite with magnitude at most 2^53")
		}
		if okL && okU && !(c.Lower < c.Upper) {
			bad("lower must be below upper")
		}
	}
}

// valued reports whether an aggregate needs the events' values (clamped
// to [Lower, Upper]).
func (c *Config) valued() bool { return c.Sum || c.Mean || c.Variance || c.Quantiles }

// treeLeavesOver reports whether branching^depth exceeds MaxTreeLeaves.
func treeLeavesOver(branching, depth int) bool {
	n := 1
	for range depth {
		n *= branching
		if n > MaxTreeLeaves {
			return true
		}
	}
	return false
}

// ms converts a validated duration to milliseconds.
func ms(d time.Duration) int64 { return int64(d / time.Millisecond) }
