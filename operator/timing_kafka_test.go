package operator

import (
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator/kafkatest"
	"github.com/dpstream/dpstream/schema"
)

// TestKafkaReleaseTimingNeighbour (issue 18 §1): two runs on the same
// sparse one-partition input, except that in the second one extra event
// (a neighbour) arrives just after the first window's end + allowed
// lateness. That record closes the window at once, where without it the
// operator waits for idle_timeout. Both runs must publish the window no
// earlier than its schedule (end + allowed_lateness + idle_timeout) by the
// operator's clock, and its releases must carry the same record
// timestamps: the schedule. On the code before the change the second run
// published at once (before the schedule) and both runs' records carried
// the producer's clock. The operator's clock starts after the neighbour's
// arrival and runs at the real rate, so each run waits about
// idle_timeout − 0.5 s for the schedule. Single instance and scale-out
// (stage 2 holds the merged window to the same schedule).
func TestKafkaReleaseTimingNeighbour(t *testing.T) {
	t.Parallel() // waits on the broker mostly; own topics and groups (docs/development.md)
	brokers := kafkatest.Brokers(t)
	cl := testClients(t, brokers)
	size := testSize.Milliseconds()
	end := testBase + size // the first window [testBase, end)
	for _, scaleOut := range []bool{false, true} {
		var stamps [2]map[string]time.Time
		for run, neighbour := range []bool{false, true} {
			in, out := uniqueName("dpstream-timing-in"), uniqueName("dpstream-timing-out")
			createTopic(t, cl, in, 1)
			c := testConfig(brokers, in, out, uniqueName("dpstream-timing"))
			c.Kafka.CreateTopics = true
			c.Kafka.ScaleOut = scaleOut
			lateness := c.Windows.AllowedLateness.Milliseconds()
			var msgs []kafka.Message
			for i, r := range testRegions {
				e := testEvent{"user-" + r, r, "a", 1, testBase + 1000 + int64(i)}
				msgs = append(msgs, kafka.Message{Key: []byte(e.user), Value: e.encode(i), Time: time.UnixMilli(e.time + testArrivalDelay)})
			}
			if neighbour {
				// Arrives 100 ms after the window closed by the data's
				// clock: its record closes the window on arrival.
				at := end + lateness + 100
				e := testEvent{"user-neighbour", "north", "a", 1, at}
				msgs = append(msgs, kafka.Message{Key: []byte(e.user), Value: e.encode(len(msgs)), Time: time.UnixMilli(at)})
			}
			produce(t, brokers, in, msgs)

			// The operator's clock: 500 ms after the neighbour's arrival
			// (whether or not it was sent), at the real rate.
			start, t0 := time.UnixMilli(end+lateness+500), time.Now()
			clock := func() time.Time { return start.Add(time.Since(t0)) }
			schedule := scheduledAt(c, end)
			pub := make(chan int64, 64)
			publishedAt := make(chan time.Time, 64)
			op, err := New(c, WithKey(testKey()), WithRegistry(prometheus.NewRegistry()), WithClock(clock),
				WithLogger(slog.New(slog.DiscardHandler)),
				WithReleaseHook(func(p Published) {
					if p.Window.Start == testBase {
						publishedAt <- clock()
					}
					pub <- p.Window.Start
				}))
			if err != nil {
				t.Fatal(err)
			}
			if err := runUntil(t, op, testBase, pub, 90*time.Second); err != nil {
				t.Fatalf("Run: %v", err)
			}
			// Not a speed assertion: publishing before the schedule is
			// the leak.
			if at := <-publishedAt; at.Before(schedule) {
				t.Errorf("scale_out=%v neighbour=%v: window published at %v by the operator's clock, before its schedule %v",
					scaleOut, neighbour, at.UTC(), schedule.UTC())
			}
			stamps[run] = map[string]time.Time{}
			for _, m := range readAll(t, cl, out) {
				r, err := schema.DecodeRelease(m.Value)
				if err != nil {
					t.Fatal(err)
				}
				if r.WindowStart == testBase {
					stamps[run][string(m.Key)] = m.Time
				}
			}
			if want := len(c.Windows.Aggregates) * len(testRegions); len(stamps[run]) != want {
				t.Fatalf("scale_out=%v neighbour=%v: %d releases of the first window, want %d",
					scaleOut, neighbour, len(stamps[run]), want)
			}
			for k, ts := range stamps[run] {
				if !ts.Equal(schedule) {
					t.Errorf("scale_out=%v neighbour=%v: release %s has record timestamp %v, want the schedule %v",
						scaleOut, neighbour, k, ts.UTC(), schedule.UTC())
				}
			}
		}
		if !slices.Equal(slices.Sorted(maps.Keys(stamps[0])), slices.Sorted(maps.Keys(stamps[1]))) {
			t.Errorf("scale_out=%v: the runs released different keys: %v vs %v", scaleOut, stamps[0], stamps[1])
		}
		for k, ts := range stamps[0] {
			if other, ok := stamps[1][k]; ok && !other.Equal(ts) {
				t.Errorf("scale_out=%v: release %s: record timestamp %v without the neighbour, %v with it",
					scaleOut, k, ts.UTC(), other.UTC())
			}
		}
	}
}
