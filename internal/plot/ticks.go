package plot

import (
	"math"
	"strconv"

	gplot "gonum.org/v1/plot"
)

// logTicks125 marks a log axis at 1, 2 and 5 times each power of ten
// (labelled) and at the other integer multiples (unlabelled), so that
// axes spanning less than a decade still carry labels.
type logTicks125 struct{}

// Ticks returns the ticks between min and max (both > 0; none otherwise).
func (logTicks125) Ticks(min, max float64) []gplot.Tick {
	if !(min > 0) || !(max >= min) || math.IsInf(max, 0) {
		return nil
	}
	var ticks []gplot.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		p := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := float64(m) * p
			if v < min*(1-1e-9) || v > max*(1+1e-9) {
				continue
			}
			t := gplot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
