package operator

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dpstream/dpstream/windows"
)

// factCacheWindows is the horizon of TestFactorizationCacheIsInvisible.
const factCacheWindows = 64

// factCachePinned is the SHA-256 of the message values of
// factCacheReference's run — 64 windows of a horizon of 64 and 16 of the
// next, 3 public groups, count and sum with running totals — computed by
// the code before the cache (commit 2866ffa, which regenerated z_0…z_t and
// decoded them at every release).
const factCachePinned = "8734b628fd47b676c12249ed63a152cd2e365c0e0ded700034d381aa07cbccea"

// factCacheReference returns the windows of the test (a whole horizon and
// the first quarter of the next) and the operator config.
func factCacheReference(t *testing.T) (Config, []windows.Window) {
	t.Helper()
	c := factConfig(factCacheWindows, "gaussian")
	o, hs := factOperator(t, c)
	ws := truthWindows(rand.New(rand.NewPCG(11, 12)), hs, o.plan.size, factCacheWindows+factCacheWindows/4, factTestGroups)
	return c, ws
}

// digestMsgs returns the SHA-256 of the concatenated message values.
func digestMsgs(msgs []outMsg) string {
	h := sha256.New()
	for _, m := range msgs {
		h.Write([]byte(m.key))
		h.Write(m.value)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestFactorizationCacheIsInvisible: the noise cache changes no released
// byte. Over a whole horizon of 64 windows and a quarter of the next (3
// groups, count and sum, running totals), the messages are identical
// with the cache, without it (nil: the pre-cache path, regenerate and
// decode at every release), with a cap of one series (the others
// regenerated), and with a restart after window 29 (a new operator, empty
// cache, the running record carried over: the first release regenerates
// z_0…z_30); their digest is the one the code before the cache produced
// (factCachePinned). A replay of window 40 after the next horizon began
// (its series dropped) and of window 70 (cached) gives the same bytes as
// their first release. It fails if a cached noise differs from the
// regenerated one (checked by hand: appending z instead of DecodeNext's
// value to the cache fails every comparison at window 1).
func TestFactorizationCacheIsInvisible(t *testing.T) {
	c, ws := factCacheReference(t)
	run := func(cache func(o *Operator), restartAfter int) []outMsg {
		t.Helper()
		o, _ := factOperator(t, c)
		cache(o)
		if restartAfter < 0 {
			msgs, _ := releaseRunning(t, o, ws, nil)
			return msgs
		}
		first, rec := releaseRunning(t, o, ws[:restartAfter+1], nil)
		o2, _ := factOperator(t, c)
		cache(o2)
		rest, _ := releaseRunning(t, o2, ws[restartAfter+1:], rec)
		return append(first, rest...)
	}
	ref := run(func(o *Operator) { o.plan.fcache = nil }, -1)
	if got := digestMsgs(ref); got != factCachePinned {
		t.Errorf("uncached releases: digest %s, the pre-cache code gave %s", got, factCachePinned)
	}
	for name, msgs := range map[string][]outMsg{
		"cached":         run(func(*Operator) {}, -1),
		"one series":     run(func(o *Operator) { o.plan.fcache = newFactCache(factCacheWindows) }, -1),
		"restart at 30":  run(func(*Operator) {}, 29),
		"restart, cap 0": run(func(o *Operator) { o.plan.fcache = newFactCache(0) }, 29),
	} {
		if len(msgs) != len(ref) {
			t.Fatalf("%s: %d messages, uncached %d", name, len(msgs), len(ref))
		}
		for i := range ref {
			if msgs[i].key != ref[i].key || !bytes.Equal(msgs[i].value, ref[i].value) {
				t.Fatalf("%s: message %d (%s) differs from the uncached release", name, i, ref[i].key)
			}
		}
	}
	// Replays: releaseWindow alone (no running record) against the same
	// window's first releaseWindow on an uncached plan.
	o, _ := factOperator(t, c)
	releaseRunning(t, o, ws, nil)
	if n := len(o.plan.fcache.series); n != 6 {
		t.Errorf("%d series cached after the next horizon began, want its 6 (3 groups × 2 aggregates)", n)
	}
	u, _ := factOperator(t, c)
	u.plan.fcache = nil
	for _, i := range []int{40, 70, 40} {
		got, _, _, err := o.plan.releaseWindow(&ws[i], o.key, c.Kafka.namespace(), o.instance, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, _, _, err := u.plan.releaseWindow(&ws[i], u.key, c.Kafka.namespace(), u.instance, nil)
		if err != nil {
			t.Fatal(err)
		}
		if digestMsgs(got) != digestMsgs(want) {
			t.Fatalf("replay of window %d differs from its uncached release", i)
		}
	}
}

// TestFactorizationCacheConcurrent: two goroutines releasing the same
// windows on one plan (as an input and a merge group could) get the
// uncached bytes; run under -race it checks the cache's locking (without
// the series' lock -race reports data races, checked by hand).
func TestFactorizationCacheConcurrent(t *testing.T) {
	c, ws := factCacheReference(t)
	u, _ := factOperator(t, c)
	u.plan.fcache = nil
	o, _ := factOperator(t, c)
	want := make([]string, len(ws))
	for i := range ws {
		msgs, _, _, err := u.plan.releaseWindow(&ws[i], u.key, c.Kafka.namespace(), u.instance, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = digestMsgs(msgs)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			for i := range ws {
				msgs, _, _, err := o.plan.releaseWindow(&ws[i], o.key, c.Kafka.namespace(), o.instance, nil)
				if err == nil && digestMsgs(msgs) != want[i] {
					err = fmt.Errorf("window %d differs from its uncached release", i)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
