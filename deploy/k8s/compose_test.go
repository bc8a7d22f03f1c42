package k8s

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// TestCompose checks deploy/compose.yaml without a container engine: it is
// valid YAML without duplicate keys, has the broker, dpstream and the
// Python consumer, builds dpstream from deploy/Dockerfile, the paths it
// names exist, and the dpstream config it mounts passes --check-config.
func TestCompose(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		t.Fatalf("deploy/compose.yaml: %v", err)
	}
	var c compose
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &c); err != nil {
		t.Fatalf("deploy/compose.yaml: %v", err)
	}
	kafka, dp, consumer := c.Services["kafka"], c.Services["dpstream"], c.Services["consumer"]
	if !strings.HasPrefix(kafka.Image, "apache/kafka:") {
		t.Errorf("service kafka: image %q, want the official apache/kafka", kafka.Image)
	}
	if kafka.Environment["KAFKA_PROCESS_ROLES"] != "broker,controller" {
		t.Errorf("service kafka: not a single KRaft node (KAFKA_PROCESS_ROLES %q)", kafka.Environment["KAFKA_PROCESS_ROLES"])
	}
	// Compose resolves build.context against the file's directory (deploy)
	// and build.dockerfile against the context.
	sameFile := func(a, b string) bool {
		sa, errA := os.Stat(a)
		sb, errB := os.Stat(b)
		return errA == nil && errB == nil && os.SameFile(sa, sb)
	}
	if dp.Build == nil || !sameFile(filepath.Join("..", dp.Build.Context, dp.Build.Dockerfile), filepath.Join("..", "Dockerfile")) {
		t.Errorf("service dpstream: not built from deploy/Dockerfile: %+v", dp.Build)
	} else if _, err := os.Stat(filepath.Join("..", dp.Build.Context, "go.mod")); err != nil {
		t.Errorf("service dpstream: build context %s is not the repository root: %v", dp.Build.Context, err)
	}
	var consumerSrc bool
	for _, v := range consumer.Volumes {
		src, _, _ := strings.Cut(v, ":")
		if _, err := os.Stat(filepath.Join("..", src, "consume_releases.py")); err == nil {
			consumerSrc = true
		}
	}
	if !consumerSrc {
		t.Errorf("service consumer: mounts no directory with examples/python/consume_releases.py: %q", consumer.Volumes)
	}
	var text string
	for _, cf := range dp.Configs {
		if cf.Target == configPath {
			text = c.Configs[cf.Source].Content
		}
	}
	if text == "" {
		t.Fatalf("service dpstream: no config with inline content mounted at %s", configPath)
	}
	if k := dp.Environment[keyEnv]; !strings.HasPrefix(k, "${"+keyEnv) {
		t.Errorf("service dpstream: %s=%q, want it from the environment (${%s:?…}), never literal", keyEnv, k, keyEnv)
	}
	if out, err := checkConfigKeyEnv(t, text); err != nil || !checkOK(out) {
		t.Errorf("compose dpstream config: dpstream run --check-config: %v\n%s", err, out)
	}
	// The image has no shell: the healthcheck must exec dpstream's own
	// probe, at the port observability.listen binds.
	if hc := dp.Healthcheck; hc == nil || len(hc.Test) < 3 || hc.Test[0] != "CMD" || hc.Test[1] != "dpstream" || hc.Test[2] != "healthcheck" {
		t.Errorf("service dpstream: healthcheck %+v, want [CMD dpstream healthcheck …] (the image has no shell)", dp.Healthcheck)
	} else if addr := hc.Test[len(hc.Test)-1]; !strings.Contains(text, "listen: 0.0.0.0:"+addr[strings.LastIndex(addr, ":")+1:]) {
		t.Errorf("service dpstream: healthcheck probes %s, not the port of observability.listen", addr)
	}
	if !bytes.Contains(data, []byte("not exercised")) {
		t.Error("deploy/compose.yaml does not say that it is not exercised by the tests")
	}
}

// TestKubectlKustomize renders every kustomization with kustomize (the one
// built into kubectl, where kubectl is installed) and decodes the result
// strictly: the kustomizations build, and the image name is replaced.
func TestKubectlKustomize(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: the kustomizations are checked as files only (TestKustomizations)")
	}
	for _, dir := range []string{".", "sidecar", "standalone"} {
		out, err := exec.Command(kubectl, "kustomize", dir).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Errorf("kubectl kustomize %s: %v\n%s", dir, err, stderr)
			continue
		}
		deps := 0
		for i, doc := range splitDocs(out) {
			_, obj, err := decodeStrict(doc)
			if err != nil {
				t.Errorf("kubectl kustomize %s, document %d: %v", dir, i+1, err)
				continue
			}
			d, ok := obj.(*appsv1.Deployment)
			if !ok {
				continue
			}
			deps++
			for _, c := range d.Spec.Template.Spec.Containers {
				if c.Name == dpstreamContainer && !strings.Contains(c.Image, "/dpstream:") {
					t.Errorf("kubectl kustomize %s: Deployment %s: dpstream image %q was not replaced by the kustomization's images entry", dir, d.Name, c.Image)
				}
			}
		}
		if deps == 0 {
			t.Errorf("kubectl kustomize %s rendered no Deployment", dir)
		}
	}
}

// checkOK reports whether dpstream run --check-config said the
// configuration is valid: "config ok" on its first line (the calibration
// follows).
func checkOK(out string) bool {
	first, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(first) == "config ok"
}
