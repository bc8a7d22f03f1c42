package main

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// `dpstream tables` regenerates the checked-in table file. The generated
// bytes depend on floating-point details of the platform (fused
// multiply-add on some architectures), so this compares with the checked-in
// file only on amd64, where it was generated; privacy's TestTableDataFresh
// checks the values against the solvers everywhere. Takes several seconds
// (one full generation): skipped with -short.
func TestTablesCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("regenerates every table")
	}
	out := filepath.Join(t.TempDir(), "table_data.go")
	stdout, err := runCmd(t, "tables", "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	if stdout != "wrote "+out+"\n" {
		t.Errorf("stdout %q", stdout)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../privacy/table_data.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 1000 {
		t.Fatalf("generated file is only %d bytes", len(got))
	}
	if runtime.GOARCH == "amd64" && string(got) != string(want) {
		t.Error("privacy/table_data.go is stale: run `go generate ./privacy` (or dpstream tables)")
	}
	if _, err := runCmd(t, "tables", "--check", "--out", filepath.Join(t.TempDir(), "missing.go")); err == nil {
		t.Error("--check on a missing file: no error")
	}
}
