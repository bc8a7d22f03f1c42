package demo

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The Python example consumer checks every golden release message of the
// schema package (schema/testdata/*.msgpack: every kind, the units,
// variance and quantiles of issue 11 included) against the release format
// and reads their values. Needs DPSTREAM_PYTHON (a Python with msgpack and
// kafka-python, see examples/python/requirements.txt); skipped without it.
func TestPythonConsumerReadsGoldenReleases(t *testing.T) {
	py := os.Getenv("DPSTREAM_PYTHON")
	if py == "" {
		t.Skip("DPSTREAM_PYTHON not set")
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "schema", "testdata", "*.msgpack"))
	if err != nil || len(files) < 5 {
		t.Fatalf("golden files: %v (%d)", err, len(files))
	}
	script := filepath.Join("..", "..", "examples", "python", "consume_releases.py")
	out, err := exec.Command(py, append([]string{script, "--file"}, files...)...).Output()
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	kinds := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct {
			Kind   string               `json:"kind"`
			Series map[string][]float64 `json:"series"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		kinds[r.Kind] = true
		if r.Kind == "quantiles" && len(r.Series["quantiles"]) != 3 {
			t.Errorf("quantiles: %v", r.Series)
		}
	}
	for _, k := range []string{"histogram", "mean", "units", "variance", "quantiles"} {
		if !kinds[k] {
			t.Errorf("the consumer did not read a %s release", k)
		}
	}
}
