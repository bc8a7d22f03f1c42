package demo

import (
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/dpstream/dpstream/schema"
)

// runningTruths returns the true running totals through the last window
// of ws (the windows read so far, in order), by aggregate and region
// (runningTruthKey): the sum of the true values of every window in which
// that aggregate of that region was released — what the operator's
// running series sums (windows.running).
func runningTruths(ws []Window) map[string]float64 {
	out := map[string]float64{}
	for i := range ws {
		w := &ws[i]
		for j := range w.Releases {
			r := &w.Releases[j]
			if r.Kind != schema.KindCount && r.Kind != schema.KindSum {
				continue
			}
			if tv := trueValues(r, 0, w.Truth[groupValue(r)]); len(tv) == 1 {
				out[runningTruthKey(r)] += tv[0]
			}
		}
	}
	return out
}

func runningTruthKey(r *schema.Release) string { return r.Aggregate + "|" + groupValue(r) }

// runningSeries returns r's running series and its true value (NaN when
// unknown), or nil.
func runningSeries(win *Window, r *schema.Release) (*schema.Series, float64) {
	for i := range r.Series {
		if r.Series[i].Name == schema.SeriesRunning {
			t, ok := win.Running[runningTruthKey(r)]
			if !ok {
				t = math.NaN()
			}
			return &r.Series[i], t
		}
	}
	return nil, math.NaN()
}

// printRunningRow prints r's running total as a table row (bucket
// "running N" for N windows summed), if r has one.
func printRunningRow(tw io.Writer, win *Window, r *schema.Release) {
	s, t := runningSeries(win, r)
	if s == nil {
		return
	}
	in := "-"
	if !math.IsNaN(t) {
		in = "no"
		if s.Lo[0] <= t && t <= s.Hi[0] {
			in = "yes"
		}
	}
	d := 1
	if s.Ints != nil {
		d = 0
	}
	fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t[%s, %s]\t%s\t%s\t%s\n", groupValue(r), r.Aggregate, "running "+strconv.FormatInt(s.Windows, 10),
		fmtTrue(t), fmtNum(s.Value(0), d), fmtNum(s.Lo[0], d), fmtNum(s.Hi[0], d), in, s.Mechanism, "-")
}
