package operator

import (
	"context"
	"testing"
	"time"
)

// TestRegistryHoldsOtherPartitions: while one partition of the instance
// waits for the schema registry, a fetcher of another partition does not
// fetch (it has no connection and no client here: a fetch would panic);
// it waits kafka.retry_backoff and looks again, and fetches once the wait
// is over. The waiting partition itself is not held. On the code before
// the hold, the first step connects.
func TestRegistryHoldsOtherPartitions(t *testing.T) {
	c := testConfig([]string{"127.0.0.1:1"}, "in", "out", "g")
	c.Kafka.RetryBackoff = time.Millisecond
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	waiting := &fetcher{o: o}
	held := &fetcher{o: o}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	waiting.waitRegistry(ctx) // the bookkeeping of a partition that starts to wait
	for range 3 {
		if !held.step(context.Background()) {
			t.Fatal("a held fetcher stopped")
		}
	}
	if held.conn != nil {
		t.Fatal("a held fetcher connected")
	}
	if held.step(ctx) {
		t.Error("a held fetcher went on after its context ended")
	}
	if got := o.registryHeld.Load(); got != 1 {
		t.Errorf("registryHeld = %d with one partition waiting, want 1", got)
	}
	waiting.unblock()
	if got := o.registryHeld.Load(); got != 0 {
		t.Errorf("registryHeld = %d after the wait ended, want 0", got)
	}
	held.unblock() // not waiting: no change
	if got := o.registryHeld.Load(); got != 0 {
		t.Errorf("registryHeld = %d after unblocking a partition that did not wait, want 0", got)
	}
}
