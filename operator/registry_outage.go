package operator

// registry_outage.go is backpressure on a schema registry outage. A
// framed Avro message whose schema the registry cannot be asked for
// (unreachable, a timeout, a 5xx or 429, any answer but the schema or a
// definite "no such schema") is not skipped: its partition's fetcher
// stops at it — no later message of the partition is decoded, so no
// offset moves past it — waits the Kafka retry backoff
// (kafka.retry_backoff, doubling up to kafka.retry_backoff_max) and
// decodes it again, until the registry answers. Only a 404 with the
// Confluent error code 40403 skips a message, as unknown_schema. The
// windows of that partition wait meanwhile, as they do for a broker
// outage, and nothing is lost.
//
// The instance's other partitions wait too (hold) while one waits: no
// window can be released before the waiting partition moves on (it is
// not read to its end, so its watermark stays), and on a single instance
// reading on would only open windows until windows.max_open_windows skips
// events as too_many_windows. Held, their events stay in Kafka. (With
// scale_out each partition's stage-1 windows close on their own and stage
// 2 waits for the partials, so there the hold only delays; other
// instances keep reading.)
//
// What is observable: one WARN per outage with the registry's URL and the
// error (never message content), one INFO when it answers again,
// dpstream_registry_errors_total (failed requests),
// dpstream_registry_blocked_partitions (partitions waiting) and /readyz
// answering 503 with the cause while the outage lasts. A request is made
// at the first message of a schema id not yet cached, so when these move
// depends on which schema ids the input carries (the producers'
// configuration, not the units' values) and on the registry.

import (
	"context"
	"errors"
	"strings"

	"github.com/dpstream/dpstream/schema"
)

// errRegistryBlocked is readBatch's error when it stopped at a message
// whose schema the registry could not be asked for.
var errRegistryBlocked = errors.New("operator: decoding waits for the schema registry")

// registryAnswered records the outcome of one registry request: a failure
// to ask counts in registry_errors_total and, when no outage is on,
// starts one (one WARN with the URL, /readyz 503); any answer ends the
// outage (one INFO).
func (o *Operator) registryAnswered(c *registryClient, err error) {
	if errors.Is(err, schema.ErrRegistryUnavailable) {
		o.m.registryErrors.Inc()
		o.health.registryProblem("schema registry unavailable, decoding waits: " + strings.ReplaceAll(err.Error(), "\n", "; "))
		if !o.registryDown.Swap(true) {
			o.log.Warn("schema registry unavailable: decoding waits (the partition that needs a schema from it, and the others with it), nothing is skipped; retrying with kafka.retry_backoff",
				"url", c.shown, "err", err)
		}
		return
	}
	if o.registryDown.Swap(false) {
		o.health.registryProblem("")
		o.log.Info("schema registry answers again; decoding resumes", "url", c.shown)
	}
}

// waitRegistry is the fetcher's wait after readBatch stopped at a message
// whose schema the registry could not be asked for: the partition counts
// as blocked until a message decodes (unblock), and the same message is
// read again after the backoff. False when ctx ended.
func (f *fetcher) waitRegistry(ctx context.Context) bool {
	if !f.blocked {
		f.blocked = true
		f.o.m.registryBlocked.Inc()
		f.o.registryHeld.Add(1)
	}
	if !sleep(ctx, f.backoff) {
		return false
	}
	f.backoff = min(2*f.backoff, f.o.cfg.Kafka.RetryBackoffMax)
	return true
}

// unblock ends the partition's wait for the registry, if any: a message
// of it decoded (or was rejected for a reason).
func (f *fetcher) unblock() {
	if f.blocked {
		f.blocked = false
		f.o.m.registryBlocked.Dec()
		f.o.registryHeld.Add(-1)
	}
}

// hold is the wait of a partition that does not need the registry while
// another one of the instance waits for it: kafka.retry_backoff, then the
// fetcher looks again (its offset and connection stay). False when ctx
// ended.
func (f *fetcher) hold(ctx context.Context) bool {
	return sleep(ctx, f.o.cfg.Kafka.RetryBackoff)
}
