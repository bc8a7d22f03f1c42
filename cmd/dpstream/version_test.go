package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// `dpstream --version` prints one line: "dpstream version " and the
// version, commit and Go toolchain of buildVersion. Under `go test` the
// binary carries no VCS information and no stamps, so the line says
// "devel" and "unknown" (deploy/image's test checks a stamped binary).
func TestVersionFlag(t *testing.T) {
	out, err := runCmd(t, "--version")
	if err != nil {
		t.Fatal(err)
	}
	want := "dpstream version " + buildVersion() + "\n"
	if out != want {
		t.Errorf("--version printed %q, want %q", out, want)
	}
	if !strings.Contains(out, runtime.Version()) {
		t.Errorf("--version %q does not name the Go version %s", out, runtime.Version())
	}
}

func TestFormatVersion(t *testing.T) {
	const platform = "linux/amd64"
	const rev = "0123456789abcdef0123456789abcdef01234567"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-11-24T12:00:00Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	info := func(mainVersion string, settings []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/dpstream/dpstream", Version: mainVersion}, Settings: settings}
	}
	for _, c := range []struct {
		name                      string
		info                      *debug.BuildInfo
		stampVersion, stampCommit string
		want                      string
	}{
		{"go run / go test: nothing known", info(develVersion, nil), "", "",
			"devel (commit unknown; go1.26.8 linux/amd64)"},
		{"go install module@version: no VCS", info("v1.2.3", nil), "", "",
			"v1.2.3 (commit unknown; go1.26.8 linux/amd64)"},
		{"go build in a clean git tree", info("v0.0.0-20261124120000-0123456789ab", vcs("false")), "", "",
			"v0.0.0-20261124120000-0123456789ab (commit " + rev + "; go1.26.8 linux/amd64)"},
		{"go build in a modified tree", info("v0.0.0-20261124120000-0123456789ab+dirty", vcs("true")), "", "",
			"v0.0.0-20261124120000-0123456789ab+dirty (commit " + rev + ", modified; go1.26.8 linux/amd64)"},
		{"stamped version wins, VCS commit kept", info(develVersion, vcs("false")), "v1.0.0", "",
			"v1.0.0 (commit " + rev + "; go1.26.8 linux/amd64)"},
		{"stamped commit wins, work-tree state not claimed", info(develVersion, vcs("true")), "v1.0.0", "abc",
			"v1.0.0 (commit abc; go1.26.8 linux/amd64)"},
		{"no build information at all", nil, "", "",
			"devel (commit unknown; " + runtime.Version() + " linux/amd64)"},
	} {
		if got := formatVersion(c.info, c.stampVersion, c.stampCommit, platform); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
