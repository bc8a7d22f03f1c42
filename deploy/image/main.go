// Command image assembles dpstream's container image without a container
// engine or registry: an empty base, one layer holding the static dpstream
// binary, a CA bundle and /etc/passwd and /etc/group with a non-root user,
// and a fixed config; written as an OCI image layout in one tar file.
//
// deploy/image.sh builds the binary and calls it; run it by hand as
//
//	go run . -binary PATH -version V -revision SHA -created UNIX_SECONDS -out FILE.tar
//
// The output depends only on its inputs: every time stamp is -created, every
// owner is numeric, tar entries are in a fixed order, and gzip (Go's
// compress/gzip) and JSON encoding are deterministic. It prints the image
// digest (of the manifest) on standard output.
//
// It is its own Go module so that go-containerregistry stays out of the
// dpstream module's dependencies.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed contents.
const (
	// UID and GID of the image's user "nonroot": 65532, the value distroless
	// and Chainguard images use for the same purpose (well above the system
	// and login ranges, below the 16-bit "nobody" 65534).
	nonrootID = 65532
	// BinaryPath is where the dpstream binary sits in the image (on PATH).
	BinaryPath = "usr/local/bin/dpstream"
	// CACertsPath is the Debian/Alpine location of the CA bundle, the first
	// file Go's crypto/x509 looks for on Linux.
	CACertsPath = "etc/ssl/certs/ca-certificates.crt"
	// ConfigPath is the default --config of the image's command; mount the
	// configuration there (Kubernetes: a ConfigMap).
	ConfigPath = "/etc/dpstream/dpstream.yaml"
	// metricsPort is the port deploy/k8s and deploy/compose.yaml give
	// observability.listen (9464, dpstream's default listen port, the
	// OpenTelemetry Prometheus exporter's conventional port).
	metricsPort = "9464/tcp"
	// refName is the ref.name annotation prefix in index.json (what
	// `podman load`/`skopeo copy oci-archive:` name the image).
	refName = "dpstream"
)

// Errors of this command.
var (
	// ErrUsage: a required flag is missing or malformed.
	ErrUsage = errors.New("image: usage")
)

// Options are the inputs of Build.
type Options struct {
	// Binary is the path of the static linux dpstream binary.
	Binary string
	// CACerts is the PEM CA bundle copied into the image.
	CACerts string
	// Version and Revision are recorded in the image's labels and
	// annotations (the binary carries its own stamps).
	Version, Revision string
	// Created is the one time stamp of the image: config, history, every
	// file's modification time.
	Created time.Time
	// Arch is the GOARCH of Binary (the image's platform is linux/Arch).
	Arch string
}

func main() {
	var o Options
	var created int64
	var out string
	flag.StringVar(&o.Binary, "binary", "", "static linux dpstream binary (required)")
	flag.StringVar(&o.CACerts, "cacerts", "/etc/ssl/certs/ca-certificates.crt", "PEM CA bundle to copy into the image")
	flag.StringVar(&o.Version, "version", "", "version label (required)")
	flag.StringVar(&o.Revision, "revision", "", "git commit label (required)")
	flag.Int64Var(&created, "created", -1, "creation time, unix seconds (SOURCE_DATE_EPOCH; required)")
	flag.StringVar(&o.Arch, "arch", "amd64", "GOARCH of the binary")
	flag.StringVar(&out, "out", "", "OCI layout tar file to write (required)")
	flag.Parse()
	if err := run(o, created, out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(o Options, created int64, out string) error {
	if o.Binary == "" || o.Version == "" || o.Revision == "" || created < 0 || out == "" {
		return fmt.Errorf("%w: -binary, -version, -revision, -created and -out are required", ErrUsage)
	}
	o.Created = time.Unix(created, 0).UTC()
	img, err := Build(o)
	if err != nil {
		return err
	}
	digest, err := WriteLayoutTar(img, o, out)
	if err != nil {
		return err
	}
	fmt.Println(digest)
	return nil
}

// file is one entry of the image's layer.
type file struct {
	name     string // relative, no leading slash; directories end in "/"
	mode     int64
	uid, gid int
	data     []byte
}

// passwd and group: root (for tools that expect uid 0 to have a name) and
// the nonroot user the image runs as. No password hashes, no login shell
// (the image has no shell).
var (
	passwd = fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonrootID, nonrootID)
	group  = fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonrootID)
)

// layerFiles returns the layer's entries in the order they are written:
// sorted by name, so parents come before children.
func layerFiles(binary, cacerts []byte) []file {
	files := []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/dpstream/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: CACertsPath, mode: 0o644, data: cacerts},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: nonrootID, gid: nonrootID},
		{name: "tmp/", mode: 0o1777},
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
		{name: BinaryPath, mode: 0o755, data: binary},
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files
}

// layerTar returns the uncompressed layer: USTAR headers with numeric owners
// only, every time stamp mtime.
func layerTar(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: mtime,
			Format:  tar.FormatUSTAR, // plain headers: no PAX/GNU records (access times, names) that could vary
		}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: layer %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("image: layer %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	return buf.Bytes(), nil
}

// Build returns the image.
func Build(o Options) (v1.Image, error) {
	binary, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: binary: %w", err)
	}
	cacerts, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("image: CA bundle: %w", err)
	}
	raw, err := layerTar(layerFiles(binary, cacerts), o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.BestCompression))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	created := v1.Time{Time: o.Created}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   created,
			CreatedBy: "deploy/image.sh: dpstream binary, CA certificates, /etc/passwd and /etc/group",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS = "linux"
	cf.Architecture = o.Arch
	labels := imageLabels(o)
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", nonrootID, nonrootID),
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		Entrypoint:   []string{"dpstream"},
		Cmd:          []string{"run", "--config", ConfigPath},
		WorkingDir:   "/",
		ExposedPorts: map[string]struct{}{metricsPort: {}},
		Labels:       labels,
		StopSignal:   "SIGTERM",
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	withAnn, ok := mutate.Annotations(img, labels).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("image: annotations: not an image")
	}
	return withAnn, nil
}

// imageLabels are the OCI pre-defined annotation keys, used both as config
// labels and as manifest annotations.
func imageLabels(o Options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "dpstream",
		"org.opencontainers.image.description": "Differentially private aggregates of Kafka event streams (sidecar)",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.created":     o.Created.Format(time.RFC3339),
	}
}

// WriteLayoutTar writes img as an OCI image layout (oci-layout, index.json,
// blobs/sha256/…) into the tar file out and returns the image digest. The
// tar's entries are sorted, owned by 0:0 and dated o.Created.
func WriteLayoutTar(img v1.Image, o Options, out string) (v1.Hash, error) {
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image: %w", err)
	}
	dir, err := os.MkdirTemp("", "dpstream-oci-")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image: %w", err)
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image: layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": refName + ":" + o.Version,
	})); err != nil {
		return v1.Hash{}, fmt.Errorf("image: layout: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return v1.Hash{}, fmt.Errorf("image: %w", err)
	}
	tmp := out + ".tmp"
	if err := tarDir(dir, tmp, o.Created); err != nil {
		os.Remove(tmp)
		return v1.Hash{}, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return v1.Hash{}, fmt.Errorf("image: %w", err)
	}
	return digest, nil
}

// tarDir writes the regular files and directories under dir into the tar
// file out, sorted, with fixed owners, modes and times.
func tarDir(dir, out string, mtime time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			names = append(names, path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	tw := tar.NewWriter(f)
	for _, path := range names {
		st, err := os.Stat(path)
		if err != nil {
			f.Close()
			return fmt.Errorf("image: %w", err)
		}
		rel, _ := filepath.Rel(dir, path)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatUSTAR}
		var data []byte
		if st.IsDir() {
			h.Typeflag, h.Mode, h.Name = tar.TypeDir, 0o755, h.Name+"/"
		} else {
			if data, err = os.ReadFile(path); err != nil {
				f.Close()
				return fmt.Errorf("image: %w", err)
			}
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			f.Close()
			return fmt.Errorf("image: %w", err)
		}
		if _, err := tw.Write(data); err != nil {
			f.Close()
			return fmt.Errorf("image: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return fmt.Errorf("image: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	return nil
}
