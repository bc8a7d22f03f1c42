package shipped

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLoad: every shipped configuration is found, with its dpstream YAML
// (which names a kafka section) and positive documented sizes; an unknown
// name is an error.
func TestLoad(t *testing.T) {
	root := filepath.Join("..", "..")
	cs, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != len(all) {
		t.Fatalf("%d configurations, want %d", len(cs), len(all))
	}
	for _, c := range cs {
		if !strings.Contains(c.Text, "kafka:") || c.UnitsPerGroup <= 0 || c.EventsPerUnit <= 0 {
			t.Errorf("%s (%s): text of %d bytes, sizes %g and %g", c.Name, c.Source, len(c.Text), c.UnitsPerGroup, c.EventsPerUnit)
		}
	}
	if _, err := Find(root, "nonesuch"); err == nil {
		t.Error("Find of an unknown name succeeded")
	}
	if _, err := embedded([]byte("a: {b: 1}"), []string{"a", "b"}); err == nil {
		t.Error("a number was taken for the embedded document")
	}
}
