package operator

import (
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
