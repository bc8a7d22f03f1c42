package schema

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestParsePath checks the path syntax and that JoinPath inverts it.
func TestParsePath(t *testing.T) {
	ok := []struct {
		path string
		keys []string
	}{
		{"ts", []string{"ts"}},
		{"user.id", []string{"user", "id"}},
		{`user\.id`, []string{"user.id"}},
		{`a\\b`, []string{`a\b`}},
		{`a\\.b`, []string{`a\`, "b"}},
		{`a\\\.b.c`, []string{`a\.b`, "c"}},
		{"é.ü", []string{"é", "ü"}},
		{strings.Repeat("k.", MaxPathDepth-1) + "k", slices.Repeat([]string{"k"}, MaxPathDepth)},
	}
	for _, c := range ok {
		keys, err := ParsePath(c.path)
		if err != nil || !slices.Equal(keys, c.keys) {
			t.Errorf("ParsePath(%q) = %q, %v; want %q", c.path, keys, err, c.keys)
		}
		if got := JoinPath(c.keys...); got != c.path {
			t.Errorf("JoinPath(%q) = %q, want %q", c.keys, got, c.path)
		}
	}
	bad := map[string]string{
		"":                                       "empty key",
		".":                                      "empty key",
		"a..b":                                   "empty key",
		".a":                                     "empty key",
		"a.":                                     "empty key",
		`a\`:                                     `lone \`,
		`a\\\`:                                   `lone \`,
		`a\b`:                                    `unknown escape "\\b"`,
		`a\.\x`:                                  `unknown escape "\\x"`,
		strings.Repeat("k.", MaxPathDepth) + "k": "more than 16",
	}
	for path, want := range bad {
		_, err := ParsePath(path)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePath(%q) = %v, want an ErrInvalidConfig about %q", path, err, want)
		}
	}
}

// TestValidatePaths: bad paths, over-long keys and a path inside another
// are configuration problems, reported with the role.
func TestValidatePaths(t *testing.T) {
	cases := []struct {
		cfg  Config
		want []string
	}{
		{Config{TimeField: "a..b"}, []string{`time_field "a..b" has an empty key`}},
		{Config{TimeField: "t", UnitField: `u\`}, []string{`unit_field "u\\" ends in a lone`}},
		{Config{TimeField: "t", GroupBy: []string{`g\n`}}, []string{`group_by[0] "g\\n" has the unknown escape`}},
		{Config{TimeField: "t", MaxKeyLen: 3, UnitField: "u.long"}, []string{`unit_field "u.long" has a key longer than max_key_len 3`}},
		{Config{TimeField: "t", MaxKeyLen: 4, UnitField: `ab\.cd`}, []string{`unit_field "ab\\.cd" is longer than max_key_len 4`}},
		{Config{TimeField: "user.ts", UnitField: "user"}, []string{`time_field "user.ts" lies inside unit_field "user"`}},
		{Config{TimeField: "t", GroupBy: []string{"a.b.c"}, ValueField: "a.b", Upper: 1}, []string{`group_by[0] "a.b.c" lies inside value_field "a.b"`}},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if err == nil {
			t.Errorf("%+v: no error, want %q", c.cfg, c.want)
			continue
		}
		msgs := strings.Split(err.Error(), "\n")
		if len(msgs) != len(c.want) || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("got problems %q, want %q", msgs, c.want)
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(msgs[i], w) {
				t.Errorf("problem %d = %q, want it to contain %q", i, msgs[i], w)
			}
		}
	}
	for _, cfg := range []Config{
		nestedConfig(),
		{TimeField: "a.t", UnitField: "a.u", GroupBy: []string{"a.b.c", "a.b.d"}, ValueField: `a\.b`, Upper: 1},
		{TimeField: "t", MaxKeyLen: 3, UnitField: "abc.def"},
	} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}
