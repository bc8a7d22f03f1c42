package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Build stamps. Release builds set them with the linker, e.g.
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=$(git rev-parse HEAD)" ./cmd/dpstream
//
// (deploy/image.sh and deploy/Dockerfile do). Empty: taken from the build
// information the Go toolchain embeds (see buildVersion).
var (
	version = ""
	commit  = ""
)

// develVersion is what runtime/debug reports as the main module's version
// when the binary was built from a work tree rather than a module download
// (go build with -buildvcs=false, go run, go test).
const develVersion = "(devel)"

// buildVersion returns the text `dpstream --version` prints after
// "dpstream version ": the version, the commit and the Go toolchain, e.g.
//
//	v1.2.3 (commit 0123abcd…, modified; go1.26.8 linux/amd64)
//
// The version is the -X main.version stamp, else the main module's version
// in the build information (a tag or pseudo-version for `go install
// module@version`, and for `go build` in a git work tree since Go 1.24),
// else "devel". The commit is the -X main.commit stamp, else vcs.revision
// from the build information (present when `go build` ran in a git work
// tree with VCS stamping on), marked "modified" when vcs.modified says the
// tree had uncommitted changes, else "unknown" (`go run`, `go test`,
// `go install module@version` and -buildvcs=false embed no VCS information).
func buildVersion() string {
	info, _ := debug.ReadBuildInfo()
	return formatVersion(info, version, commit, runtime.GOOS+"/"+runtime.GOARCH)
}

// formatVersion is buildVersion with its inputs explicit (info may be nil).
func formatVersion(info *debug.BuildInfo, stampVersion, stampCommit, platform string) string {
	v, c, modified := stampVersion, stampCommit, false
	goVersion := runtime.Version()
	if info != nil {
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
		if v == "" && info.Main.Version != "" && info.Main.Version != develVersion {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if c == "" {
					c = s.Value
				}
			case "vcs.modified":
				// Only meaningful for the revision it describes: a stamped
				// commit says nothing about the work tree.
				modified = s.Value == "true" && stampCommit == ""
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	if c == "" {
		c = "unknown"
	}
	if modified {
		c += ", modified"
	}
	return fmt.Sprintf("%s (commit %s; %s %s)", v, c, goVersion, platform)
}
