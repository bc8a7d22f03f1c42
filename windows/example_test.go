package windows_test

import (
	"fmt"
	"time"

	"github.com/dpstream/dpstream/windows"
)

// A minute-window histogram of page views per country, where each user may
// add at most one view to one page bucket in one country per window.
func Example() {
	cfg := windows.Config{
		Size: time.Minute, AllowedLateness: 10 * time.Second,
		Histogram: true, NumBuckets: 3, Count: true,
		MaxGroups: 1, MaxBuckets: 1, MaxPerBucket: 1, MaxValues: 1,
	}
	var seed [32]byte // in production: secret, e.g. HMAC(key, "windows")
	agg, err := windows.New(cfg, seed)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Release windows from time 0 on, whatever the data (a configured start).
	if err := agg.EmitFrom(0); err != nil {
		fmt.Println(err)
		return
	}
	// Time is when the view happened (from the data), Arrival when it
	// reached the broker (the record timestamp).
	views := []windows.Event{
		{Offset: 0, Time: 1_000, Arrival: 1_200, Unit: "alice", Group: "fr", Bucket: 0},
		{Offset: 1, Time: 2_000, Arrival: 2_100, Unit: "alice", Group: "fr", Bucket: 0}, // bounded: alice counts once
		{Offset: 2, Time: 3_000, Arrival: 3_500, Unit: "bob", Group: "de", Bucket: 2},
		{Offset: 3, Time: 61_000, Arrival: 61_300, Unit: "carol", Group: "de", Bucket: 1}, // next window
	}
	for _, e := range views {
		agg.Add(e)
	}
	agg.Advance(0, 70_000) // e.g. the partition was read to its end at 70 s
	for _, w := range agg.Poll(0) {
		fmt.Printf("window [%d, %d): %d units\n", w.Start, w.End, w.Units)
		for _, g := range w.Groups {
			fmt.Printf("  %s histogram %v count %d\n", g.Key, g.Histogram, g.Count)
		}
		fmt.Printf("  histogram sensitivity L1 %v, count sensitivity L1 %v\n",
			w.Sensitivity.Histogram.L1, w.Sensitivity.Count.L1)
	}
	// Output:
	// window [0, 60000): 2 units
	//   de histogram [0 0 1] count 1
	//   fr histogram [1 0 0] count 1
	//   histogram sensitivity L1 1, count sensitivity L1 1
}
