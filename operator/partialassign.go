package operator

// partialassign.go: what an instance without kafka.scale_out does when the
// consumer group gives it only part of the input partitions (another
// instance joined the same group): it does not consume, says why and what
// to change, and rejoins after a pause that grows while the cause lasts.

import "time"

// Pauses before an instance with a partial assignment rejoins the group:
// the first is partialWaitBase (or kafka.retry_backoff_max if shorter),
// each next one twice the last, up to partialWaitMax. A pause ends early
// when the group rebalances (the other instance left, or partitions
// appeared), so a long one delays nothing that could be consumed; short
// ones would make both instances rebalance the group every few seconds.
const (
	partialWaitBase = 5 * time.Second
	partialWaitMax  = time.Minute
)

// partialLogEvery: the ERROR is logged at the first partial assignment in
// a row and then at every partialLogEvery-th (the others at debug level),
// about every 10 minutes once the pause has grown to partialWaitMax.
const partialLogEvery = 10

// partialAssignmentMsg is the ERROR's message: the cause and the two ways
// out, by their configuration keys.
const partialAssignmentMsg = "this instance was assigned only part of the input partitions: another dpstream instance is in the same consumer group " +
	"and kafka.scale_out is off, so this one will not consume. Without kafka.scale_out exactly one instance may serve a kafka.group_id " +
	"(two would publish different releases of the same window): stop the other instances or give each its own kafka.group_id, " +
	"or run them all with kafka.scale_out: true and the same windows.start (docs/scale-out.md)"

// reportPartialAssignment logs the n-th partial assignment in a row
// (assigned of total input partitions, generation gen) and returns how
// long to wait before rejoining.
func (o *Operator) reportPartialAssignment(n, assigned, total int, gen int32) time.Duration {
	base := min(partialWaitBase, o.cfg.Kafka.RetryBackoffMax)
	wait := base
	for i := 1; i < n && wait < partialWaitMax; i++ {
		wait *= 2
	}
	wait = min(wait, max(base, partialWaitMax))
	args := []any{"assigned", assigned, "partitions", total, "group_id", o.cfg.Kafka.GroupID, "generation", gen,
		"times_in_a_row", n, "rejoin_in", wait, "setting", "kafka.scale_out"}
	if n == 1 || n%partialLogEvery == 0 {
		o.log.Error(partialAssignmentMsg, args...)
	} else {
		o.log.Debug(partialAssignmentMsg, args...)
	}
	return wait
}
