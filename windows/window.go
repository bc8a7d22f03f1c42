package windows

import (
	"fmt"
	"slices"
	"strings"
)

// Event is one input event as the operator hands it over, already decoded
// and validated by the schema package.
type Event struct {
	// Partition and Offset locate the event in its input topic. Offset also
	// serves as the event's identity for the keyed sampling of values (see
	// Tumbling), so it must be the same on every replay.
	Partition int32
	Offset    int64
	// Time is the event time in Unix milliseconds: it decides the event's
	// window. It comes from the data, so a privacy unit controls it.
	Time int64
	// Arrival is when the event reached the input, in Unix milliseconds,
	// from a clock no privacy unit controls: the Kafka record timestamp of
	// a topic with message.timestamp.type=LogAppendTime (or CreateTime
	// set by a trusted producer). It drives the watermarks and the late
	// and too-far-ahead decisions (see Tumbling). It should not decrease
	// along a partition; if it does, an event may be dropped because its
	// window was already emitted, which depends on timing.
	Arrival int64
	// Unit is the privacy unit; "" makes the event its own unit
	// (event-level privacy for this event). Ignored with Config.EventLevel.
	Unit string
	// Group is the group key ("" is a valid key: the single group of an
	// aggregation without group-by).
	Group string
	// Bucket is the histogram cell in [0, NumBuckets), or −1 for none.
	Bucket int
	// Value is the numeric value for sums and means, used if HasValue.
	Value    float64
	HasValue bool
}

// Status says what Add did with an event.
type Status uint8

// The statuses Add returns. Every status but Accepted means the event was
// dropped; Stats counts each.
const (
	// Accepted: the event was added to its window (its contribution may
	// still be bounded away when the window closes; see Drops).
	Accepted Status = iota
	// Late: the event arrived at or after its window's end +
	// AllowedLateness, or its window was already emitted.
	Late
	// Unassigned: the event's partition was revoked and not assigned again.
	Unassigned
	// TooManyWindows: the event's window starts Config.MaxOpenWindows
	// windows or more after the first window not yet emitted.
	TooManyWindows
	// BadTime: the event time or the arrival time is outside ±2^61 ms.
	BadTime
	// BadBucket: the bucket is not −1 and not in [0, NumBuckets).
	BadBucket
	// BadValue: the value is NaN or infinite (checked only when Sum or Mean
	// is enabled).
	BadValue
	// TooFarAhead: the event time is more than Config.MaxSkew ahead of the
	// event's arrival time.
	TooFarAhead
	numStatus
)

var statusNames = [numStatus]string{"accepted", "late", "unassigned", "too_many_windows", "bad_time", "bad_bucket", "bad_value", "too_far_ahead"}

// String returns the status as a metrics label, e.g. "late".
func (s Status) String() string {
	if s < numStatus {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Stats are cumulative counters of a Tumbling since New.
type Stats struct {
	// Events counts Add calls by the status they returned, indexed by
	// Status.
	Events [numStatus]int64
	// Windows counts windows returned by Poll and PollPartials.
	Windows int64
}

// Drops counts, per window, what contribution bounding removed or changed.
// Every counter is a deterministic function of the window's accepted
// events: the same events give the same counts in any arrival order.
type Drops struct {
	// Groups: events of a unit in groups beyond its MaxGroups kept groups.
	Groups int64
	// Buckets: histogram events of a unit in cells beyond its MaxBuckets
	// kept cells of a kept group.
	Buckets int64
	// PerBucket: histogram events beyond MaxPerBucket in a kept cell.
	PerBucket int64
	// Values: values beyond MaxValues in a kept group.
	Values int64
	// Count: events beyond MaxValues in a kept group, for the count.
	Count int64
	// Total: histogram and count contributions beyond MaxContributions
	// (after the other bounds).
	Total int64
	// Clamped: kept values moved into [Lower, Upper] (changed, not dropped).
	Clamped int64
	// UnitCap: events of units not kept under MaxUnits.
	UnitCap int64
	// GroupCap: events of groups not kept under MaxOpenGroups. Non-zero
	// means the cap is too small for the data (see Config.MaxOpenGroups).
	GroupCap int64
}

func (d *Drops) add(o Drops) {
	d.Groups += o.Groups
	d.Buckets += o.Buckets
	d.PerBucket += o.PerBucket
	d.Values += o.Values
	d.Count += o.Count
	d.Total += o.Total
	d.Clamped += o.Clamped
	d.UnitCap += o.UnitCap
	d.GroupCap += o.GroupCap
}

// Window is the exact, bounded aggregate of one window [Start, End): what
// the operator noises and releases, or a partial aggregate from one
// instance that Merge combines with others. Nothing in it is private yet.
type Window struct {
	// Start and End are Unix milliseconds; the window is [Start, End).
	Start, End int64
	// Groups are the groups with at least one kept contribution, sorted
	// by Key. Which groups appear depends on the data: release only
	// groups from a public domain, or select them privately (Group.Units
	// and Sensitivity.Units serve DP partition selection).
	Groups []Group
	// Units is the number of privacy units with kept contributions (events,
	// with EventLevel).
	Units int64
	// Drops counts what contribution bounding removed.
	Drops Drops
	// EventLevel is true when every event was its own privacy unit.
	EventLevel bool
	// Sensitivity holds the sensitivity of every vector, from the bounds.
	Sensitivity Sensitivities
	// Partials is the number of instance partials merged into this window
	// (1 for a window from Poll).
	Partials int64
	// Lanes are the windows of the same span from other Tumbling
	// aggregators fed the same events (the operator's extra measures and
	// histograms), attached by their user. This package never sets, reads,
	// encodes or merges them.
	Lanes []Window
}

// Group holds the bounded aggregates of one group key in one window. Fields
// of disabled aggregates are zero (Histogram nil).
type Group struct {
	// Key is the group key.
	Key string
	// Units is the number of distinct units with kept contributions here.
	Units int64
	// Histogram holds one count per bucket (NumBuckets), each unit adding
	// at most MaxPerBucket to at most MaxBuckets cells.
	Histogram []int64
	// Count is the number of events, each unit adding at most MaxValues.
	Count int64
	// Values is the number of kept values (the mean's denominator).
	Values int64
	// Sum is the sum of kept values clamped to [Lower, Upper]: the exact
	// sum rounded once to float64 (to nearest), so the same values give the
	// same bits in any order. Because of that one rounding, the Sums of two
	// neighbouring datasets can differ by the sensitivity plus half an ulp
	// of each Sum; noise added at a granularity of at least ulp(|Sum|)
	// (the privacy package's snapping) covers it. The same holds for
	// CentredSum.
	Sum float64
	// CentredSum is Σ fl(v − mid) over the kept clamped values, mid =
	// Lower/2 + Upper/2: the exact sum rounded once. A mean estimate is
	// mid + noisy CentredSum / noisy Values.
	CentredSum float64
	// CentredSqSum is Σ fl(d²), d = fl(v − mid), over the kept clamped
	// values (with Variance): the exact sum rounded once, as Sum. A
	// variance estimate is (noisy CentredSqSum − noisy CentredSum²/n)/n,
	// n the noisy Values.
	CentredSqSum float64
	// Leaves are the non-empty leaves of the group's quantile tree (with
	// Quantiles), sorted by leaf: the kept clamped values counted per leaf
	// (LeafOf). The tree's inner nodes are sums of leaves.
	Leaves []LeafCount

	sum, csum, csq exactSum // exact partials behind Sum, CentredSum and CentredSqSum, for Merge
}

func (g *Group) finish() {
	g.sum.canon()
	g.csum.canon()
	g.csq.canon()
	g.Sum = g.sum.value()
	g.CentredSum = g.csum.value()
	g.CentredSqSum = g.csq.value()
}

// Merge adds the partial aggregate o of the same window into w. The
// instances that produced w and o must have seen disjoint privacy units
// (input keyed by unit), so that every unit's contribution stays bounded;
// Merge cannot check that: each window is already bounded per unit, so a
// unit present in both would contribute up to twice its bounds. When a
// unit's events may be on several partitions, merge Partials instead
// (MergePartials), which bound each unit across all of them. Sums are merged exactly, so the result does not
// depend on the order of merges. It returns an error wrapping ErrMismatch,
// leaving w unchanged, if the windows differ in extent, privacy level,
// sensitivities or histogram size.
func (w *Window) Merge(o *Window) error {
	switch {
	case w.Start != o.Start || w.End != o.End:
		return fmt.Errorf("%w: window [%d, %d) vs [%d, %d)", ErrMismatch, w.Start, w.End, o.Start, o.End)
	case w.EventLevel != o.EventLevel:
		return fmt.Errorf("%w: event-level privacy differs", ErrMismatch)
	case w.Sensitivity != o.Sensitivity:
		return fmt.Errorf("%w: bounds differ (sensitivities %+v vs %+v)", ErrMismatch, w.Sensitivity, o.Sensitivity)
	}
	nb := -1
	for _, gs := range [][]Group{w.Groups, o.Groups} {
		for i := range gs {
			if gs[i].Histogram == nil {
				continue
			}
			if nb >= 0 && len(gs[i].Histogram) != nb {
				return fmt.Errorf("%w: histogram sizes %d and %d", ErrMismatch, nb, len(gs[i].Histogram))
			}
			nb = len(gs[i].Histogram)
		}
	}
	out := make([]Group, 0, max(len(w.Groups), len(o.Groups)))
	i, j := 0, 0
	for i < len(w.Groups) || j < len(o.Groups) {
		var c int
		switch {
		case i == len(w.Groups):
			c = 1
		case j == len(o.Groups):
			c = -1
		default:
			c = strings.Compare(w.Groups[i].Key, o.Groups[j].Key)
		}
		switch {
		case c < 0:
			out = append(out, w.Groups[i])
			i++
		case c > 0:
			out = append(out, o.Groups[j].clone())
			j++
		default:
			g := w.Groups[i]
			g.mergeFrom(&o.Groups[j])
			out = append(out, g)
			i++
			j++
		}
	}
	w.Groups = out
	w.Units += o.Units
	w.Drops.add(o.Drops)
	w.Partials += o.Partials
	return nil
}

// clone returns a deep copy of g.
func (g Group) clone() Group {
	g.Histogram = slices.Clone(g.Histogram)
	g.sum = g.sum.clone()
	g.csum = g.csum.clone()
	g.csq = g.csq.clone()
	g.Leaves = slices.Clone(g.Leaves)
	return g
}

func (g *Group) mergeFrom(o *Group) {
	g.Units += o.Units
	g.Count += o.Count
	g.Values += o.Values
	if o.Histogram != nil {
		if g.Histogram == nil {
			g.Histogram = make([]int64, len(o.Histogram))
		} else {
			g.Histogram = slices.Clone(g.Histogram)
		}
		for k, v := range o.Histogram {
			g.Histogram[k] += v
		}
	}
	g.sum = g.sum.clone()
	g.csum = g.csum.clone()
	g.csq = g.csq.clone()
	g.sum.merge(&o.sum)
	g.csum.merge(&o.csum)
	g.csq.merge(&o.csq)
	g.Leaves = mergeLeaves(g.Leaves, o.Leaves)
	g.finish()
}
