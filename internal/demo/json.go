package demo

// json.go writes the --json lines: one JSON object per release.

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"
)

// jsonSeries is one series of a --json line.
type jsonSeries struct {
	Name      string     `json:"name"`
	Mechanism string     `json:"mechanism"`
	Scale     float64    `json:"scale"`
	Level     float64    `json:"ci_level"`
	Labels    []string   `json:"labels,omitempty"`
	Private   []float64  `json:"private"`
	Lo        []float64  `json:"ci_lo"`
	Hi        []float64  `json:"ci_hi"`
	True      []*float64 `json:"true"` // null where there is none (the mean of no values)
}

// jsonRelease is one --json line: the decoded release with the demo's
// true values beside the private ones.
type jsonRelease struct {
	Key          string            `json:"key"`
	ReleaseID    string            `json:"release_id"`
	WindowStart  string            `json:"window_start"`
	WindowEnd    string            `json:"window_end"`
	Aggregate    string            `json:"aggregate"`
	Kind         string            `json:"kind"`
	Group        map[string]string `json:"group"`
	Epsilon      float64           `json:"epsilon"`
	Delta        float64           `json:"delta"`
	PrivacyUnit  string            `json:"privacy_unit"`
	Series       []jsonSeries      `json:"series"`
	TrueIsExact  bool              `json:"true_is_exact"`
	PublishDelay float64           `json:"publish_latency_ms"`
	Notice       string            `json:"notice"`
}

// writeJSON writes one JSON line per release of win, the true values
// beside the private ones.
func writeJSON(w io.Writer, win *Window) error {
	enc := json.NewEncoder(w)
	for i := range win.Releases {
		r := &win.Releases[i]
		g := win.Truth[groupValue(r)]
		out := jsonRelease{
			Key: r.Key(), ReleaseID: r.ReleaseID,
			WindowStart: utc(r.WindowStart).Format(time.RFC3339), WindowEnd: utc(r.WindowEnd).Format(time.RFC3339),
			Aggregate: r.Aggregate, Kind: string(r.Kind), Group: map[string]string{},
			Epsilon: r.Budget.Epsilon, Delta: r.Budget.Delta, PrivacyUnit: r.Unit,
			TrueIsExact:  g != nil && g.Exact,
			PublishDelay: float64(win.Latency.Microseconds()) / 1000,
			Notice:       truthNotice,
		}
		for _, gv := range r.Group {
			out.Group[gv.Name] = gv.Value
		}
		for si := range r.Series {
			s := &r.Series[si]
			js := jsonSeries{Name: s.Name, Mechanism: s.Mechanism, Scale: s.Scale, Level: s.Level, Labels: s.Labels,
				Lo: s.Lo, Hi: s.Hi, Private: make([]float64, s.Len()), True: []*float64{}}
			for j := range s.Len() {
				js.Private[j] = s.Value(j)
			}
			if rs, t := runningSeries(win, r); rs == s && !math.IsNaN(t) {
				js.True = append(js.True, &t)
			}
			for _, t := range trueValues(r, si, g) {
				if math.IsNaN(t) {
					js.True = append(js.True, nil)
				} else {
					js.True = append(js.True, &t)
				}
			}
			out.Series = append(out.Series, js)
		}
		if err := enc.Encode(out); err != nil {
			return fmt.Errorf("%w: writing JSON: %v", ErrRun, err)
		}
	}
	return nil
}
