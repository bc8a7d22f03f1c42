// Package windows aggregates events into event-time tumbling windows with
// per-unit contribution bounds. It is pure and clock-free: event times and
// arrival times come with the events, watermarks through Advance; it
// imports no Kafka, operator or privacy code.
//
// An event's time (from the data) decides its window; its arrival time
// (from the broker, a clock no privacy unit controls) decides whether it
// is accepted and when windows close, so that no unit can change which of
// another unit's events are accepted (see Tumbling).
//
// The operator converts each decoded event into an Event and calls
// Tumbling.Add; on rebalances it calls AssignPartitions and
// RevokePartitions; it calls Advance for partitions it has read to their
// end, and Poll to collect closed windows. Each Window holds exact aggregates per group —
// histogram counts, counts, sums of clamped values, and the centred sum and
// value count a mean needs — after contribution bounding, together with
// the sensitivity of every vector, derived from the bounds
// (Config.Sensitivities). Adding the noise is the privacy package's job.
//
// Contribution bounds are enforced per privacy unit and window before
// aggregation, by keyed bottom-k sampling: a unit keeps the k candidates
// (groups, cells, values) of smallest keyed priority, a uniformly random
// subset that does not depend on the order in which events arrive. Closing
// is deterministic: the same per-partition event sequences, with arrival
// times that do not decrease along each partition, give byte-identical
// windows however the partitions interleave and whenever Poll is called.
//
// To scale out, a first stage runs one Tumbling per input partition and
// emits each closed window as a Partial (Tumbling.PollPartials): the
// per-unit state before the contribution bounds are applied across
// partitions. MergePartials merges the partials of all partitions of a
// window and applies every bound per unit across the whole input, giving
// byte for byte the Window a single Tumbling over all partitions would
// emit, however a unit's events are spread over the partitions (see
// Partial). Window.Merge combines finished windows of instances that saw
// disjoint units, exactly (sums are kept as exact floating-point
// expansions), which is correct only if the input is keyed by unit.
// Windows and partials have deterministic binary encodings
// (MarshalBinary/UnmarshalBinary).
//
// Memory is bounded by Config.MaxUnits (per-unit state) and
// Config.MaxOpenGroups / MaxOpenWindows, and measured by Tumbling.Memory.
package windows
