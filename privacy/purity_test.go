package privacy

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// forbiddenImport reports why the DP core may not import path, or "" if it
// may. The DP core is every package under privacy/ (their non-test files):
// it computes on its arguments only, so it reads no file, environment,
// network or clock, takes no entropy but the keyed Stream, and knows
// nothing of Kafka or of the operator around it.
func forbiddenImport(path string) string {
	const mod = "github.com/dpstream/dpstream/"
	under := func(p string) bool { return path == p || strings.HasPrefix(path, p+"/") }
	switch {
	case under("os"), path == "io/fs", path == "io/ioutil", under("path/filepath"), path == "plugin":
		return "file system, environment or process state"
	case under("net"), path == "syscall", under("golang.org/x/sys"):
		return "network or system calls"
	case path == "time":
		return "a clock: time comes in as arguments"
	case path == "crypto/rand", path == "math/rand":
		return "randomness not derived from the key (use a Stream)"
	case path == "log":
		return "writes to standard error"
	case under("github.com/segmentio/kafka-go"), under("github.com/twmb/franz-go"):
		return "Kafka code"
	case strings.HasPrefix(path, mod) && !under(mod+"privacy"):
		return "a package outside the DP core (only privacy/... may be imported)"
	}
	return ""
}

// importViolations parses every non-test Go file under root (all build
// tags; testdata skipped) and returns "file imports path (reason)" for each
// forbidden import.
func importViolations(root string) ([]string, error) {
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			path, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return err
			}
			if why := forbiddenImport(path); why != "" {
				out = append(out, p+" imports "+path+" ("+why+")")
			}
		}
		return nil
	})
	return out, err
}

// TestPurity: the import graph proves that the DP core does no I/O. Every
// package under privacy/ (this directory and its subdirectories) imports
// nothing that reads files, the environment, the network or the clock,
// nothing that draws unkeyed randomness and no Kafka or operator code. Key
// files are read by operator/keyfile and the scale tables are written by
// internal/tables, outside.
func TestPurity(t *testing.T) {
	bad, err := importViolations(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// TestPurityCheckFails: the check finds a forbidden import in a
// subpackage, under a build tag, and lets an allowed one pass, so that
// TestPurity can fail.
func TestPurityCheckFails(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"ok.go":           "package x\n\nimport (\n\t\"math\"\n\t\"github.com/dpstream/dpstream/privacy/continual\"\n)\n",
		"sub/clock.go":    "//go:build linux\n\npackage sub\n\nimport \"time\"\n",
		"sub/io.go":       "package sub\n\nimport (\n\tkafka \"github.com/segmentio/kafka-go\"\n\t\"os\"\n)\n",
		"sub/op.go":       "package sub\n\nimport \"github.com/dpstream/dpstream/operator\"\n",
		"sub/io_test.go":  "package sub\n\nimport \"os\"\n",
		"testdata/gen.go": "package main\n\nimport \"os\"\n",
	}
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bad, err := importViolations(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bad {
		rel, _ := filepath.Rel(dir, strings.SplitN(b, " ", 2)[0])
		got = append(got, filepath.ToSlash(rel)+" "+strings.Fields(b)[2])
	}
	slices.Sort(got)
	want := []string{
		"sub/clock.go time",
		"sub/io.go github.com/segmentio/kafka-go",
		"sub/io.go os",
		"sub/op.go github.com/dpstream/dpstream/operator",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations %q, want %q", got, want)
	}
}
