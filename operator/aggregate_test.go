package operator

import (
	"slices"
	"testing"

	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// TestAggregateTable: every aggregate the configuration accepts
// (knownAggregates) is registered in aggregateTable, in the same order,
// under its own name and with a kind of its own, so that the planner and
// the release path, which iterate over the table, know every aggregate a
// valid configuration can name.
func TestAggregateTable(t *testing.T) {
	var names []string
	kinds := map[schema.Kind]string{}
	for _, a := range aggregateTable {
		names = append(names, a.name())
		if other, ok := kinds[a.kind()]; ok {
			t.Errorf("%s and %s share the release kind %q", other, a.name(), a.kind())
		}
		kinds[a.kind()] = a.name()
		if aggregateNamed(a.name()) != a {
			t.Errorf("aggregateNamed(%q) is not the registered %T", a.name(), a)
		}
	}
	if !slices.Equal(names, knownAggregates) {
		t.Errorf("aggregateTable registers %v, the configuration accepts %v", names, knownAggregates)
	}
}

// TestAggregateParts: with every aggregate configured, the plan of each
// has one calibrated noise per part its type declares, in the declared
// order, each with the sensitivity the type takes from the bounds, and a
// release whose series the schema accepts (EncodeRelease validates them).
func TestAggregateParts(t *testing.T) {
	t.Parallel() // computes alone; no shared state (docs/development.md)
	c := statsConfig(knownAggregates...)
	c.Schema.Histogram = testConfig(nil, "in", "out", "g").Schema.Histogram
	o, err := New(c, WithKey(testKey()))
	if err != nil {
		t.Fatal(err)
	}
	p := o.plan
	if len(p.aggs) != len(knownAggregates) {
		t.Fatalf("%d aggregate plans, want %d", len(p.aggs), len(knownAggregates))
	}
	for _, ap := range p.aggs {
		parts := ap.agg.parts(p.sens)
		if len(ap.noises) != len(parts) {
			t.Errorf("%s: %d noises, its type declares %d parts", ap.name, len(ap.noises), len(parts))
			continue
		}
		for i, s := range parts {
			if n := ap.noises[i]; n.series != s.series || n.sens != s.sens || n.part != ap.name+"."+s.series {
				t.Errorf("%s part %d: noise %s (%+v), declared %s (%+v)", ap.name, i, n.part, n.sens, s.series, s.sens)
			}
		}
	}
	w := &windows.Window{Start: 0, End: p.size}
	out, _, _, err := p.releaseWindow(w, testKey(), "ns", "i", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range out {
		got = append(got, m.rel.Aggregate)
	}
	if got = slices.Compact(got); !slices.Equal(got, c.Windows.Aggregates) {
		t.Errorf("released %v, want the configured aggregates in order %v", got, c.Windows.Aggregates)
	}
}
