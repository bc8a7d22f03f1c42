package operator

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReleaseDigestNestedPaths: a field path is part of the release
// shape. The nested path user.id, the flat key "user.id" (spelled
// user\.id) and the flat key "user" are three configurations with three
// digests, so releases of one never share noise with releases of
// another; a path that does not parse is a configuration error naming the
// setting.
func TestReleaseDigestNestedPaths(t *testing.T) {
	seen := map[string]string{}
	for _, unit := range []string{"user", "user.id", `user\.id`, "user.id.x"} {
		c := stateTestConfig()
		c.Schema.UnitField = unit
		if err := c.Validate(); err != nil {
			t.Fatalf("unit_field %q: %v", unit, err)
		}
		d, err := ReleaseDigest(c)
		if err != nil {
			t.Fatal(err)
		}
		if other, ok := seen[d]; ok {
			t.Errorf("unit_field %q and %q have the same digest", unit, other)
		}
		seen[d] = unit
	}
	c := stateTestConfig()
	c.Schema.UnitField = "user..id"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `unit_field "user..id" has an empty key`) {
		t.Errorf("unit_field user..id: %v", err)
	}
}

// TestLoadNestedPaths: the YAML spellings docs/configuration.md gives reach
// the schema as written: plain and single-quoted scalars keep the
// backslash, double quotes need it doubled.
func TestLoadNestedPaths(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	yaml := "kafka:\n  input_topics: [a]\n  group_id: g\n  output_topic: o\n" +
		"schema:\n  time_field: meta.ts\n  unit_field: 'user\\.id'\n  group_by: [device.os, geo\\.country, \"a\\\\.b\"]\n" +
		"  value_field: reading.kwh\n  lower: 0\n  upper: 1\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Schema
	if s.TimeField != "meta.ts" || s.UnitField != `user\.id` || s.ValueField != "reading.kwh" ||
		!slices.Equal(s.GroupBy, []string{"device.os", `geo\.country`, `a\.b`}) {
		t.Errorf("loaded %q %q %q %q", s.TimeField, s.UnitField, s.GroupBy, s.ValueField)
	}
}
