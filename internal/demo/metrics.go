package demo

import "github.com/prometheus/client_golang/prometheus"

// gatherCounters sums the counters of the metric family name in reg by the
// value of label (label "" sums every series under the key "").
func gatherCounters(reg *prometheus.Registry, name, label string) map[string]float64 {
	out := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			k := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					k = l.GetValue()
				}
			}
			out[k] += m.GetCounter().GetValue()
		}
	}
	return out
}

// readMetrics fills the input counters of res from the operator's registry.
func readMetrics(reg *prometheus.Registry, res *Result) {
	for _, v := range gatherCounters(reg, "dpstream_events_in_total", "") {
		res.EventsIn += v
	}
	res.Late = gatherCounters(reg, "dpstream_events_late_total", "")[""]
	for k, v := range gatherCounters(reg, "dpstream_events_skipped_total", "reason") {
		if v > 0 {
			res.Skipped[k] = v
		}
	}
}
