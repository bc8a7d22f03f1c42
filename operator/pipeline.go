package operator

// pipeline.go is the glue between the leaf packages: it maps the operator's
// config onto windows.Config and turns a closed windows.Window into
// schema.Release messages with the noise plan.go calibrated at start, one
// release per group and configured aggregate (each aggregate draws and
// post-processes its own series: aggregate.go and agg_*.go). API drift in
// schema, windows or privacy should only touch this file, the aggregates
// and plan*.go.

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dpstream/dpstream/privacy/rng"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// noiseDomain prefixes every noise stream id, so that streams of this
// derivation never coincide with streams used elsewhere with the same key.
// (v1 streams were keyed by the release key alone; v2 binds the release
// digest too, see noiseID.)
const noiseDomain = "dpstream/release/v2"

// windowsConfig maps the operator config onto windows.Config.
func windowsConfig(c Config, numBuckets int) windows.Config {
	w := windows.Config{
		Size:             c.Windows.Size,
		Offset:           c.Windows.Offset,
		AllowedLateness:  c.Windows.AllowedLateness,
		EventLevel:       c.Schema.UnitField == "",
		MaxGroups:        c.Bounds.MaxGroups,
		MaxBuckets:       c.Bounds.MaxBuckets,
		MaxPerBucket:     c.Bounds.MaxPerBucket,
		MaxValues:        c.Bounds.MaxValues,
		MaxUnits:         c.Bounds.MaxUnits,
		MaxContributions: c.Bounds.MaxContributions,
		MaxOpenGroups:    c.Windows.MaxOpenGroups,
		MaxOpenWindows:   c.Windows.MaxOpenWindows,
		MaxSkew:          c.Windows.MaxSkew,
	}
	for _, a := range configuredAggregates(c) {
		a.enable(&w, c, numBuckets)
	}
	if readsValues(c) {
		w.Lower, w.Upper = c.Schema.Lower, c.Schema.Upper
	}
	return w
}

// releaseID names a window's release: the release namespace and the window
// start in RFC 3339 (UTC, milliseconds), e.g.
// "dpstream-meters/2024-05-01T12:00:00.000Z".
func releaseID(group string, start int64) string {
	return group + "/" + time.UnixMilli(start).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// noiseID is the id of the noise stream of one release message: the
// domain, the release digest of the configuration (ReleaseDigest) and the
// message key (which holds the release id, so the namespace). Every message
// has its own stream, so its noise does not depend on which other messages
// are published or in which order, and re-publishing a key under the same
// configuration gives identical bytes. Binding the digest means that a
// window released again under any other configuration (another budget,
// bounds, categories or their order, mechanism, group-by, input) draws
// independent noise: the two releases compose, and can never be
// subtracted to reveal the exact difference of two true values.
func noiseID(digest, key string) string {
	return noiseDomain + "\x00" + digest + "\x00" + key
}

// outMsg is one encoded release ready to write.
type outMsg struct {
	key   string
	value []byte
	rel   schema.Release
}

// releaseWindow builds the releases of w, skipping keys already published,
// as the first window of the horizon's ledger (see releaseWindowAt).
func (p *plan) releaseWindow(w *windows.Window, key rng.Key, namespace, instance string,
	published map[string]int64) (out []outMsg, dup, withheld int, err error) {
	return p.releaseWindowAt(w, key, namespace, instance, published, nil)
}

// releaseWindowAt builds the releases of w, skipping keys already
// published, with the budget spent so far taken from the ledger l of the
// windows before it (nil: none in this horizon). It returns the messages to
// write, the number skipped as already published, and the number of groups
// withheld by selection.
func (p *plan) releaseWindowAt(w *windows.Window, key rng.Key, namespace, instance string,
	published map[string]int64, l *ledgerRecord) (out []outMsg, dup, withheld int, err error) {
	id := releaseID(namespace, w.Start)
	note := p.note
	if p.digest != "" {
		note += "; config " + p.digest[:16]
	}
	groups := p.groupsOf(w)
	var selected []windows.Group
	for _, g := range groups {
		if p.sel != nil {
			s := rng.NewStream(key, noiseID(p.streamDigest(), schema.ReleaseKey(id, "_select", mustValues(g.Key)...)))
			noisy, err := p.sel.noise.add(s, float64(g.Units))
			if err != nil {
				return nil, 0, 0, fmt.Errorf("operator: group selection: %w", err)
			}
			if !(noisy >= p.sel.threshold) {
				withheld++
				continue
			}
		}
		selected = append(selected, g)
	}
	spent, hz := p.spentAt(l, w.Start)
	for _, ap := range p.aggs {
		for gi := range selected {
			g := &selected[gi]
			vals := mustValues(g.Key)
			k := schema.ReleaseKey(id, ap.name, vals...)
			if _, ok := published[k]; ok {
				dup++
				continue
			}
			r := schema.Release{
				ReleaseID: id, WindowStart: w.Start, WindowEnd: w.End,
				Aggregate: ap.name, Kind: ap.kind,
				Budget: p.window, Spent: spent, Horizon: hz,
				Unit: p.unit, Bounds: p.bounds, Instance: instance, Note: note,
			}
			if ap.lane != nil {
				r.Bounds = ap.lane.view.bounds
				lg := laneGroup(w, ap.lane.index, g.Key)
				g = &lg
			}
			for i, f := range p.groupFields {
				r.Group = append(r.Group, schema.GroupValue{Name: f, Value: vals[i]})
			}
			if len(ap.noises) > 0 && ap.noises[0].fact != nil {
				r.Series, err = p.factRelease(&ap, g, w.Start, key, namespace)
			} else {
				r.Series, err = p.series(ap, g, rng.NewStream(key, noiseID(p.streamDigest(), k)))
			}
			if err != nil {
				return nil, 0, 0, fmt.Errorf("operator: %s: %w", ap.name, err)
			}
			b, err := schema.EncodeRelease(&r)
			if err != nil {
				return nil, 0, 0, fmt.Errorf("operator: encoding release %s: %w", ap.name, err)
			}
			if r.Key() != k {
				return nil, 0, 0, errors.New("operator: release key mismatch (schema.ReleaseKey changed?)")
			}
			out = append(out, outMsg{key: k, value: b, rel: r})
		}
	}
	return out, dup, withheld, nil
}

// groupsOf returns the groups to consider releasing: the public list (absent
// groups with zero aggregates), the single group of an aggregation without
// group-by, or the groups the window saw (subject to selection).
func (p *plan) groupsOf(w *windows.Window) []windows.Group {
	var keys []string
	switch {
	case p.publicGroups != nil:
		keys = p.publicGroups
	case len(p.groupFields) == 0:
		keys = []string{schema.MakeGroup()}
	default:
		return w.Groups
	}
	out := make([]windows.Group, 0, len(keys))
	i := 0
	for _, k := range keys {
		for i < len(w.Groups) && w.Groups[i].Key < k {
			i++
		}
		if i < len(w.Groups) && w.Groups[i].Key == k {
			out = append(out, w.Groups[i])
		} else {
			out = append(out, p.emptyGroup(k))
		}
	}
	return out
}

func (p *plan) emptyGroup(k string) windows.Group {
	g := windows.Group{Key: k}
	if len(p.labels) > 0 {
		g.Histogram = make([]int64, len(p.labels))
	}
	return g
}

func mustValues(group string) []string {
	v, err := schema.GroupValues(group)
	if err != nil {
		// Group keys come from the decoder or MakeGroup; never here.
		return []string{"?"}
	}
	return v
}

// series draws the noise of one aggregate of one group from s, in the
// order of the schema's series (the aggregate's release).
func (p *plan) series(ap aggPlan, g *windows.Group, s *rng.Stream) ([]schema.Series, error) {
	if ap.agg == nil {
		return nil, fmt.Errorf("operator: unknown aggregate kind %q", ap.kind)
	}
	return ap.agg.release(p, &ap, g, s)
}

// noised adds noise to vals and attaches the per-value intervals. Integer
// vectors are released as integers (Ints), real vectors as multiples of
// the grid step (Floats); the series names the mechanism that ran.
func (p *plan) noised(n *vectorNoise, vals []float64, s *rng.Stream, labels []string) (schema.Series, error) {
	sr := schema.Series{
		Name: n.series, Mechanism: n.mech.Name(), Scale: n.scale, Level: 1 - n.beta,
		Sensitivity: schema.Sensitivity{L0: int64(math.Ceil(n.sens.L0)), L1: n.sens.L1, L2: n.sens.L2, LInf: n.sens.Linf},
		Labels:      labels,
	}
	integer := n.kind == intExact || n.kind == intRounded
	if integer {
		sr.Ints = make([]int64, 0, len(vals))
	} else {
		sr.Floats = make([]float64, 0, len(vals))
	}
	for _, v := range vals {
		x, err := n.add(s, v)
		if err != nil {
			return schema.Series{}, err
		}
		if integer {
			sr.Ints = append(sr.Ints, int64(x))
		} else {
			sr.Floats = append(sr.Floats, x)
		}
		sr.Lo = append(sr.Lo, x-n.half)
		sr.Hi = append(sr.Hi, x+n.half)
	}
	return sr, nil
}

// spent returns the budget spent in the horizon through the window starting
// at start when this configuration has published every window of the
// horizon so far (see spentAt), and the horizon (zero without a horizon
// budget).
func (p *plan) spent(start int64) (schema.Budget, schema.Horizon) {
	return p.spentAt(nil, start)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// seedFromKey derives the windows package's sampling seed from the secret
// key, so contribution bounding is reproducible across restarts and not
// predictable without the key.
func seedFromKey(k rng.Key) [32]byte {
	s := rng.NewStream(k, "dpstream/windows-seed/v1")
	var seed [32]byte
	for i := 0; i < 32; i += 8 {
		v := s.Uint64()
		for j := range 8 {
			seed[i+j] = byte(v >> (8 * j))
		}
	}
	return seed
}
