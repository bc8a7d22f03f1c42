package schema

import (
	"fmt"
	"strings"
)

// This file is the syntax of field paths: every field setting of a Config
// (time_field, unit_field, group_by, histogram.field, value_field) names a
// key of the message's top-level map or, with dots, a key inside nested
// maps: "user.id" is the key "id" of the map under the key "user".
//
// A key that contains a dot or a backslash is written with a backslash
// before it: "user\.id" is the one top-level key "user.id" (not a path),
// "a\\b" is the key `a\b`. No other escape exists, so every path has
// exactly one spelling and equal spellings are equal paths (the release
// digest hashes the spelling). Empty segments ("a..b", ".a", "a."), a
// trailing lone backslash, any other escape and more than MaxPathDepth
// segments are configuration errors.

// Path syntax.
const (
	// PathSeparator separates the keys of a nested field path.
	PathSeparator = '.'
	// PathEscape makes the next PathSeparator or PathEscape part of a key.
	PathEscape = '\\'
	// MaxPathDepth is the largest number of keys in a field path. The
	// decoder descends only along configured paths, one level of
	// (bounded) recursion per key, so this bounds the decoder's stack
	// whatever the nesting of a message (deeper message nesting is skipped
	// iteratively, as on the top level). 16 is far beyond the records
	// seen in practice (Avro/Protobuf event schemas nest a handful of
	// levels) while keeping the recursion a few hundred bytes of stack.
	MaxPathDepth = 16
)

// ParsePath splits a field path into its keys, unescaping them: "user.id"
// gives ["user", "id"], `user\.id` gives ["user.id"]. It fails (naming the
// problem, wrapping ErrInvalidConfig) on an empty path or key, a trailing
// or unknown escape, or more than MaxPathDepth keys.
func ParsePath(path string) ([]string, error) {
	keys, problem := parsePath(path)
	if problem != "" {
		return nil, fmt.Errorf("%w: field path %q: %s", ErrInvalidConfig, path, problem)
	}
	return keys, nil
}

// parsePath is ParsePath with the problem as a phrase ("" when none).
func parsePath(path string) (keys []string, problem string) {
	var key strings.Builder
	for i := 0; i < len(path); i++ {
		switch c := path[i]; c {
		case PathEscape:
			if i+1 == len(path) {
				return nil, `ends in a lone \ (write \\ for a backslash in a key)`
			}
			if n := path[i+1]; n != PathSeparator && n != PathEscape {
				return nil, fmt.Sprintf(`has the unknown escape %q (only \. and \\)`, path[i:i+2])
			}
			i++
			key.WriteByte(path[i])
		case PathSeparator:
			if key.Len() == 0 {
				return nil, "has an empty key"
			}
			keys = append(keys, key.String())
			key.Reset()
		default:
			key.WriteByte(c)
		}
	}
	if key.Len() == 0 {
		return nil, "has an empty key"
	}
	keys = append(keys, key.String())
	if len(keys) > MaxPathDepth {
		return nil, fmt.Sprintf("has %d keys, more than %d", len(keys), MaxPathDepth)
	}
	return keys, ""
}

// JoinPath is the inverse of ParsePath: it escapes each key and joins them
// with PathSeparator. JoinPath("user.id") is `user\.id`, the flat key.
func JoinPath(keys ...string) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(PathSeparator)
		}
		for j := 0; j < len(k); j++ {
			if k[j] == PathSeparator || k[j] == PathEscape {
				b.WriteByte(PathEscape)
			}
			b.WriteByte(k[j])
		}
	}
	return b.String()
}

// isPrefix reports whether the keys of a are a proper prefix of those of b.
func isPrefix(a, b []string) bool {
	if len(a) >= len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
