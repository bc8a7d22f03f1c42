// Package windows aggregates events into event-time tumbling windows with
// per-unit contribution bounds. It is pure and clock-free: event times come
// with the events, watermarks through Advance, processing time through
// Tick; it imports no Kafka, operator or privacy code.
//
// The operator converts each decoded event into an Event and calls
// Tumbling.Add; on rebalances it calls AssignPartitions and
// RevokePartitions; periodically it calls Tick with its clock and Poll to
// collect closed windows. Each Window holds exact aggregates per group —
// histogram counts, counts, sums of clamped values, and the centred sum and
// value count a mean needs — after contribution bounding, together with
// the sensitivity of every vector, derived from the bounds
// (Config.Sensitivities). Adding the noise is the privacy package's job.
//
// Contribution bounds are enforced per privacy unit and window before
// aggregation, by keyed bottom-k sampling: a unit keeps the k candidates
// (groups, cells, values) of smallest keyed priority, a uniformly random
// subset that does not depend on the order in which events arrive. Closing
// is deterministic: the same per-partition event sequences give
// byte-identical windows however the partitions interleave.
//
// Window.Merge combines partial windows of several instances that saw
// disjoint units, exactly (sums are kept as exact floating-point
// expansions), and MarshalBinary/UnmarshalBinary encode a window as a
// msgpack map for the merge stage.
//
// Memory is bounded by Config.MaxUnits (per-unit state) and
// Config.MaxOpenGroups / MaxOpenWindows, and measured by Tumbling.Memory.
package windows
