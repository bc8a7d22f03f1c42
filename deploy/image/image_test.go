package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// repoRoot is the dpstream repository (this module is deploy/image).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "deploy", "image.sh")); err != nil {
		t.Fatalf("not the dpstream repository: %v", err)
	}
	return root
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=image test", "GIT_AUTHOR_EMAIL=test@invalid", "GIT_AUTHOR_DATE=2026-01-02T03:04:05Z",
		"GIT_COMMITTER_NAME=image test", "GIT_COMMITTER_EMAIL=test@invalid", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// snapshotCommit returns a repository whose HEAD is the current work tree
// of the dpstream repository, committed once: image.sh builds commits, and
// this lets the test build this tree (uncommitted changes included) twice
// from the same commit even while the work tree keeps changing. In a clean
// checkout (CI) it is HEAD itself.
func snapshotCommit(t *testing.T) (repo, rev string) {
	t.Helper()
	root := repoRoot(t)
	repo = filepath.Join(t.TempDir(), "snapshot")
	git(t, root, "clone", "--quiet", "--shared", root, repo)
	changed := git(t, root, "ls-files", "-z", "--modified", "--others", "--exclude-standard")
	deleted := git(t, root, "ls-files", "-z", "--deleted")
	gone := map[string]bool{}
	for _, name := range strings.Split(deleted, "\x00") {
		if name != "" {
			gone[name] = true
			os.Remove(filepath.Join(repo, name))
		}
	}
	for _, name := range strings.Split(changed, "\x00") {
		if name == "" || gone[name] {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	if git(t, repo, "status", "--porcelain") != "" {
		git(t, repo, "add", "-A")
		git(t, repo, "commit", "--quiet", "--no-verify", "-m", "image test snapshot of the work tree")
	}
	return repo, git(t, repo, "rev-parse", "HEAD")
}

// buildImage runs deploy/image.sh on commit rev of repo into out and returns
// the digest it printed.
func buildImage(t *testing.T, repo, out string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot(t), "deploy", "image.sh"), out)
	cmd.Env = append(os.Environ(), "DPSTREAM_IMAGE_REPO="+repo, "DPSTREAM_IMAGE_REV=HEAD")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("deploy/image.sh: %v\n%s", err, stderr.Bytes())
	}
	return strings.TrimSpace(string(stdout))
}

// readTar returns the regular files of a tar stream by name, and every
// header.
func readTar(t *testing.T, r io.Reader) (map[string][]byte, []*tar.Header) {
	t.Helper()
	files := map[string][]byte{}
	var headers []*tar.Header
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, headers
		}
		if err != nil {
			t.Fatal(err)
		}
		headers = append(headers, h)
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = data
		}
	}
}

// blob returns the layout's blob for d after checking that it exists and
// that its size and SHA-256 match the descriptor.
func blob(t *testing.T, files map[string][]byte, d v1.Descriptor) []byte {
	t.Helper()
	if d.Digest.Algorithm != "sha256" {
		t.Fatalf("descriptor %v: algorithm %q", d.MediaType, d.Digest.Algorithm)
	}
	data, ok := files["blobs/sha256/"+d.Digest.Hex]
	if !ok {
		t.Fatalf("blob %s (%s) is missing", d.Digest, d.MediaType)
	}
	if int64(len(data)) != d.Size {
		t.Errorf("blob %s: %d bytes, descriptor says %d", d.Digest, len(data), d.Size)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != d.Digest.Hex {
		t.Errorf("blob %s: content hashes to sha256:%x", d.Digest, sum)
	}
	return data
}

// TestImage builds the image of one commit twice with deploy/image.sh and
// checks the OCI layout, the image's config and layer, that the binary in
// it runs `--version` here and names that commit (and, with
// DPSTREAM_TEST_BROKERS, runs `dpstream demo` against that broker), and
// that both builds give byte-identical tarballs with the same digest. It runs `go build`
// twice (the first build of a static binary in a fresh cache takes a few
// minutes on a slow machine; later ones seconds); skipped with -short.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds dpstream twice")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary is linux; it runs here only on linux")
	}
	repo, rev := snapshotCommit(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a", "dpstream-oci.tar"), filepath.Join(dir, "b", "dpstream-oci.tar")
	digestA := buildImage(t, repo, a)
	digestB := buildImage(t, repo, b)

	// Reproducible: same commit, same digest, same bytes.
	if digestA != digestB {
		t.Errorf("two builds of commit %s: image digests %s and %s", rev, digestA, digestB)
	}
	tarA, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	tarB, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tarA, tarB) {
		t.Errorf("two builds of commit %s: the layout tarballs differ", rev)
	}

	// The OCI image layout (image-spec v1.1 image-layout.md): oci-layout,
	// index.json, and every blob under blobs/sha256 named by its digest.
	files, headers := readTar(t, bytes.NewReader(tarA))
	var ociLayout struct {
		ImageLayoutVersion string `json:"imageLayoutVersion"`
	}
	if err := json.Unmarshal(files["oci-layout"], &ociLayout); err != nil || ociLayout.ImageLayoutVersion != "1.0.0" {
		t.Errorf("oci-layout %q: %v", files["oci-layout"], err)
	}
	for name, data := range files {
		if hexDigest, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
			if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest {
				t.Errorf("%s hashes to sha256:%x", name, sum)
			}
		}
	}
	commitTime, err := strconv.ParseInt(git(t, repo, "show", "-s", "--format=%ct", rev), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(commitTime, 0).UTC()
	for _, h := range headers {
		if !h.ModTime.Equal(created) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("layout tar entry %s: mtime %v owner %d:%d (%q:%q), want %v 0:0", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname, created)
		}
	}
	var index v1.IndexManifest
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if index.SchemaVersion != 2 || len(index.Manifests) != 1 {
		t.Fatalf("index.json: schemaVersion %d, %d manifests; want 2 and 1", index.SchemaVersion, len(index.Manifests))
	}
	md := index.Manifests[0]
	if md.MediaType != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %q", md.MediaType)
	}
	if md.Digest.String() != digestA {
		t.Errorf("index.json names manifest %s; image.sh printed %s", md.Digest, digestA)
	}
	var manifest v1.Manifest
	if err := json.Unmarshal(blob(t, files, md), &manifest); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if manifest.Config.MediaType != types.OCIConfigJSON || len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != types.OCILayer {
		t.Fatalf("manifest: config %s, layers %v; want one OCI config and one OCI gzip layer", manifest.Config.MediaType, manifest.Layers)
	}
	var config v1.ConfigFile
	if err := json.Unmarshal(blob(t, files, manifest.Config), &config); err != nil {
		t.Fatalf("config: %v", err)
	}
	layerGz := blob(t, files, manifest.Layers[0])

	// go-containerregistry's own validation of the whole layout (digests,
	// sizes, diff ids, media types) as a second opinion.
	unpacked := filepath.Join(dir, "layout")
	for name, data := range files {
		p := filepath.Join(unpacked, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Errorf("validate.Index: %v", err)
	}

	// The config: not root, the documented entrypoint and command, the
	// commit's time, this platform.
	user := config.Config.User
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("config User %q: want a numeric non-zero uid (Kubernetes runAsNonRoot checks it numerically)", user)
	}
	if got := strings.Join(config.Config.Entrypoint, " "); got != "dpstream" {
		t.Errorf("Entrypoint %q", config.Config.Entrypoint)
	}
	if got := strings.Join(config.Config.Cmd, " "); got != "run --config "+ConfigPath {
		t.Errorf("Cmd %q", config.Config.Cmd)
	}
	if !config.Created.Time.Equal(created) {
		t.Errorf("config created %v, want the commit time %v", config.Created.Time, created)
	}
	if config.OS != "linux" || config.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", config.OS, config.Architecture)
	}
	if config.Config.Labels["org.opencontainers.image.revision"] != rev {
		t.Errorf("revision label %q, want %s", config.Config.Labels["org.opencontainers.image.revision"], rev)
	}

	// The layer: fixed times and owners, the binary, the CA bundle of this
	// machine, the non-root user in /etc/passwd.
	zr, err := gzip.NewReader(bytes.NewReader(layerGz))
	if err != nil {
		t.Fatal(err)
	}
	layerFiles, layerHeaders := readTar(t, zr)
	for _, h := range layerHeaders {
		wantOwner := 0
		if h.Name == "home/nonroot/" {
			wantOwner = nonrootID
		}
		if !h.ModTime.Equal(created) || h.Uid != wantOwner || h.Gid != wantOwner {
			t.Errorf("layer entry %s: mtime %v owner %d:%d", h.Name, h.ModTime, h.Uid, h.Gid)
		}
		if h.Name == BinaryPath && h.Mode != 0o755 {
			t.Errorf("%s mode %o", h.Name, h.Mode)
		}
	}
	if !strings.Contains(string(layerFiles["etc/passwd"]), fmt.Sprintf("nonroot:x:%d:%d:", nonrootID, nonrootID)) ||
		!strings.Contains(string(layerFiles["etc/group"]), fmt.Sprintf("nonroot:x:%d:", nonrootID)) {
		t.Errorf("/etc/passwd %q, /etc/group %q: no nonroot user %d", layerFiles["etc/passwd"], layerFiles["etc/group"], nonrootID)
	}
	if uid != strconv.Itoa(nonrootID) {
		t.Errorf("config User %q is not the nonroot user of /etc/passwd (%d)", user, nonrootID)
	}
	hostCerts, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err == nil && !bytes.Equal(layerFiles[CACertsPath], hostCerts) {
		t.Errorf("%s differs from this machine's CA bundle", CACertsPath)
	}
	if !bytes.Contains(layerFiles[CACertsPath], []byte("-----BEGIN CERTIFICATE-----")) {
		t.Errorf("%s holds no PEM certificate", CACertsPath)
	}

	// The binary runs here and says what it is.
	bin := filepath.Join(dir, "dpstream")
	if err := os.WriteFile(bin, layerFiles[BinaryPath], 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("dpstream --version from the image: %v\n%s", err, out)
	}
	version := config.Config.Labels["org.opencontainers.image.version"]
	want := fmt.Sprintf("dpstream version %s (commit %s; %s linux/%s)\n", version, rev, runtime.Version(), runtime.GOARCH)
	if string(out) != want {
		t.Errorf("dpstream --version from the image printed\n%q, want\n%q", out, want)
	}
	// Against the test broker (deploy/test.sh starts it): the static
	// binary (pure-Go DNS and TLS, the image's configuration of Go) runs
	// the operator end to end with `dpstream demo --brokers`, which creates
	// fresh dpstream-demo-* topics, publishes and reads back releases.
	if brokers := os.Getenv("DPSTREAM_TEST_BROKERS"); brokers != "" {
		out, err := exec.Command(bin, "demo", "--brokers", brokers, "--windows", "1", "--events-per-window", "1000").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "coverage") {
			t.Errorf("dpstream demo --brokers %s from the image: %v\n%s", brokers, err, out)
		}
	} else {
		t.Log("DPSTREAM_TEST_BROKERS is not set: the image's binary is not run against a broker")
	}

	// Static: no ELF interpreter (CGO_ENABLED=0).
	if bytes.Contains(layerFiles[BinaryPath][:min(len(layerFiles[BinaryPath]), 4096)], []byte("ld-linux")) {
		t.Error("the binary names a dynamic loader: not static")
	}
}

// containerEngines are the container engines TestImageRun tries, in order.
var containerEngines = []string{"podman", "docker"}

// containerEngine returns the first of engines that is installed and can
// run containers (its `info` answers: the docker client without a
// daemon, or podman without the user namespaces it needs, does not), or
// "" and why none can.
func containerEngine(engines []string) (engine, why string) {
	var reasons []string
	for _, e := range engines {
		if _, err := exec.LookPath(e); err != nil {
			reasons = append(reasons, e+" is not installed")
			continue
		}
		cmd := exec.Command(e, "info")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			reasons = append(reasons, fmt.Sprintf("%s info: %v", e, err))
			continue
		}
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(engineProbeTimeout):
			_ = cmd.Process.Kill()
			<-done
			err = fmt.Errorf("no answer in %v", engineProbeTimeout)
		}
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s is installed but cannot run containers (%s info: %v: %s)",
				e, e, err, lastLine(out.String())))
			continue
		}
		return e, ""
	}
	return "", strings.Join(reasons, "; ")
}

// engineProbeTimeout bounds `ENGINE info`: a daemon that does not answer
// in this long cannot serve the test either.
const engineProbeTimeout = 30 * time.Second

// lastLine is the last non-empty line of s (an engine's error message).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// TestContainerEngineProbe: an engine that is installed but cannot run
// containers (here a stand-in `docker` whose `info` fails, as the docker
// client does without a daemon) is not chosen, and the reason says so; a
// working one is.
func TestContainerEngineProbe(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("shell stand-ins")
	}
	dir := t.TempDir()
	write := func(name, script string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("fakedocker", "echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.' >&2\nexit 1\n")
	write("fakepodman", "echo ok\n")
	t.Setenv("PATH", dir)
	e, why := containerEngine([]string{"fakemissing", "fakedocker"})
	if e != "" || !strings.Contains(why, "fakemissing is not installed") ||
		!strings.Contains(why, "fakedocker is installed but cannot run containers") || !strings.Contains(why, "Cannot connect") {
		t.Errorf("containerEngine = %q, %q", e, why)
	}
	if e, why := containerEngine([]string{"fakedocker", "fakepodman"}); e != "fakepodman" {
		t.Errorf("containerEngine = %q, %q; want fakepodman", e, why)
	}
}

// TestImageRun runs the image once with a container engine (podman or
// docker). The project's machines have none that can run containers (the
// docker client without a daemon; podman, where installed, usually cannot
// create the user namespaces an unprivileged sandbox lacks), so this skips
// there and says why.
func TestImageRun(t *testing.T) {
	engine, why := containerEngine(containerEngines)
	if engine == "" {
		t.Skip("no container engine can run containers (" + why + "): the image is checked as a file (TestImage), not run")
	}
	if testing.Short() {
		t.Skip("builds dpstream")
	}
	repo, _ := snapshotCommit(t)
	tarPath := filepath.Join(t.TempDir(), "dpstream-oci.tar")
	buildImage(t, repo, tarPath)
	loaded, err := exec.Command(engine, "load", "-i", tarPath).CombinedOutput()
	if err != nil {
		t.Fatalf("%s load: %v\n%s", engine, err, loaded)
	}
	// "Loaded image: NAME" (or "Loaded image(s): NAME"): the name is the
	// last word.
	words := strings.Fields(string(loaded))
	if len(words) == 0 {
		t.Fatal(engine + " load printed nothing")
	}
	name := words[len(words)-1]
	out, err := exec.Command(engine, "run", "--rm", "--network=none", name, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s run: %v\n%s", engine, err, out)
	}
	if !strings.HasPrefix(string(out), "dpstream version ") {
		t.Errorf("%s run … --version printed %q", engine, out)
	}
}
