// Package shipped finds the dpstream configurations the project ships
// (the example and its Avro variant, the Compose file's and the
// Kubernetes manifests'), the
// data size each documents for `dpstream plan`, and the checked-in plan
// output beside it. The tests of cmd/dpstream (the plans) and operator
// (the sidecar's rolling update on a broker) read them through it.
package shipped

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Config is one shipped configuration.
type Config struct {
	// Name says which it is: "example", "avro", "compose",
	// "k8s-sidecar", "k8s-standalone".
	Name string
	// Source is the file holding it, relative to the repository root.
	Source string
	// Text is the dpstream YAML (for a manifest, the embedded document).
	Text string
	// PlanFile is the checked-in `dpstream plan` output at the documented
	// sizes, relative to the repository root.
	PlanFile string
	// UnitsPerGroup and EventsPerUnit are the documented sizes: the
	// arguments of the `dpstream plan ... --units-per-group N
	// --events-per-unit M` line in Text.
	UnitsPerGroup, EventsPerUnit float64
}

// where says how to find one shipped configuration: path is the file;
// keys lead to the embedded document (none: the whole file).
type where struct {
	name, path, plan string
	keys             []string
}

// all are the shipped configurations.
var all = []where{
	{"example", "deploy/dpstream.example.yaml", "deploy/dpstream.example.plan.txt", nil},
	{"avro", "deploy/dpstream.avro.yaml", "deploy/dpstream.avro.plan.txt", nil},
	{"compose", "deploy/compose.yaml", "deploy/compose.plan.txt", []string{"configs", "dpstream", "content"}},
	{"k8s-sidecar", "deploy/k8s/sidecar/configmap.yaml", "deploy/k8s/sidecar/dpstream.plan.txt", []string{"data", "dpstream.yaml"}},
	{"k8s-standalone", "deploy/k8s/standalone/configmap.yaml", "deploy/k8s/standalone/dpstream.plan.txt", []string{"data", "dpstream.yaml"}},
}

// planLine is the documented plan command: its two sizes.
var planLine = regexp.MustCompile(`dpstream plan --config \S+ --units-per-group (\S+) --events-per-unit (\S+)`)

// Load reads every shipped configuration under the repository root.
func Load(root string) ([]Config, error) {
	var out []Config
	for _, w := range all {
		c, err := load(root, w)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// Find returns the shipped configuration called name.
func Find(root, name string) (Config, error) {
	for _, w := range all {
		if w.name == name {
			return load(root, w)
		}
	}
	return Config{}, fmt.Errorf("shipped: no configuration %q", name)
}

func load(root string, w where) (Config, error) {
	b, err := os.ReadFile(filepath.Join(root, w.path))
	if err != nil {
		return Config{}, fmt.Errorf("shipped: %w", err)
	}
	text := string(b)
	if len(w.keys) > 0 {
		if text, err = embedded(b, w.keys); err != nil {
			return Config{}, fmt.Errorf("shipped: %s: %w", w.path, err)
		}
	}
	c := Config{Name: w.name, Source: w.path, Text: text, PlanFile: w.plan}
	m := planLine.FindStringSubmatch(text)
	if m == nil {
		return Config{}, fmt.Errorf("shipped: %s: no documented `dpstream plan --config FILE --units-per-group N --events-per-unit M` line", w.path)
	}
	if c.UnitsPerGroup, err = strconv.ParseFloat(m[1], 64); err == nil {
		c.EventsPerUnit, err = strconv.ParseFloat(m[2], 64)
	}
	if err != nil {
		return Config{}, fmt.Errorf("shipped: %s: documented sizes: %w", w.path, err)
	}
	return c, nil
}

// embedded returns the string at keys in a one-document YAML file.
func embedded(b []byte, keys []string) (string, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return "", err
	}
	var v any = doc
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return "", fmt.Errorf("no key %s", k)
		}
		if v, ok = m[k]; !ok {
			return "", fmt.Errorf("no key %s", k)
		}
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%v is not a string", keys)
	}
	return s, nil
}
