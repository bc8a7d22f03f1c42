// Package k8s holds the tests of dpstream's Kubernetes manifests
// (deploy/k8s) and of deploy/compose.yaml. It is its own Go module so that
// the Kubernetes API types stay out of the dpstream module's dependencies.
package k8s

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The contract between the manifests, the image and dpstream.
const (
	// metricsPort serves /metrics, /healthz and /readyz (observability.listen).
	metricsPort = 9464
	// configPath is where the image's default command reads its config.
	configPath = "/etc/dpstream/dpstream.yaml"
	// keyEnv is dpstream's default privacy.key_env: compose passes the key
	// in it; the Kubernetes manifests must not (they mount a file).
	keyEnv = "DPSTREAM_KEY"
	// keySecret is the Secret the manifests mount the noise key from
	// (created by hand: kubectl create secret generic dpstream-key
	// --from-literal=key=...), and keyItem its data key.
	keySecret = "dpstream-key"
	keyItem   = "key"
	// dpstreamContainer is the name of dpstream's container in every
	// Deployment.
	dpstreamContainer = "dpstream"
	// nonrootUID is the image's user (deploy/image).
	nonrootUID = 65532
)

// kustomization is the part of kustomize's Kustomization
// (kustomize.config.k8s.io/v1beta1) the manifests use; any other field fails
// the strict decoding, so add fields here when a kustomization needs them.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

// object is one decoded manifest document.
type object struct {
	file string // relative to deploy/k8s
	kind string
	obj  any // *appsv1.Deployment, *corev1.ConfigMap, *kustomization, …
}

// newObject returns an empty typed object for apiVersion and kind, or nil
// for a kind the manifests are not expected to hold.
func newObject(apiVersion, kind string) any {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 Secret":
		return &corev1.Secret{}
	case "v1 Service":
		return &corev1.Service{}
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "kustomize.config.k8s.io/v1beta1 Kustomization":
		return &kustomization{}
	}
	return nil
}

// splitDocs splits a YAML stream at its "---" lines, dropping empty
// documents (comments only).
func splitDocs(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(string(data), -1) {
		empty := true
		for _, line := range strings.Split(d, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				empty = false
				break
			}
		}
		if !empty {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// decodeStrict decodes one YAML document into the API type its apiVersion
// and kind name, the way the API server does for `kubectl apply
// --validate=strict`: duplicate keys, unknown fields and fields in the
// wrong case are errors.
func decodeStrict(doc []byte) (kind string, obj any, err error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return "", nil, fmt.Errorf("YAML: %w", err)
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
		return "", nil, err
	}
	obj = newObject(tm.APIVersion, tm.Kind)
	if obj == nil {
		return "", nil, fmt.Errorf("unexpected apiVersion %q kind %q (add it to newObject)", tm.APIVersion, tm.Kind)
	}
	strict, err := kjson.UnmarshalStrict(j, obj)
	if err != nil {
		return "", nil, err
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return "", nil, fmt.Errorf("%s: %s", tm.Kind, strings.Join(msgs, "; "))
	}
	return tm.Kind, obj, nil
}

// loadManifests decodes every document of every *.yaml file under dir.
func loadManifests(t *testing.T, dir string) []object {
	t.Helper()
	var objs []object
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		for i, doc := range splitDocs(data) {
			kind, obj, err := decodeStrict(doc)
			if err != nil {
				t.Errorf("%s (document %d): %v", rel, i+1, err)
				continue
			}
			objs = append(objs, object{file: rel, kind: kind, obj: obj})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestDecodeStrictRejectsTypos pins the strictness the other tests rely on:
// a misspelt field, a field in the wrong case, a field at the wrong level
// and a duplicate key each fail.
func TestDecodeStrictRejectsTypos(t *testing.T) {
	base := `apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers:
        - name: c
          image: i
          securityContext:
            %s
`
	if _, _, err := decodeStrict([]byte(fmt.Sprintf(base, "readOnlyRootFilesystem: true"))); err != nil {
		t.Fatalf("the correct manifest fails: %v", err)
	}
	for _, bad := range []string{
		"readOnlyRootFileSystem: true", // wrong case
		"readOnlyRootFilesytem: true",  // typo
		"runAsNonroot: true",           // wrong case
		"seccompProfile: {typ: RuntimeDefault}",
		"readOnlyRootFilesystem: true\n            readOnlyRootFilesystem: false", // duplicate
	} {
		if _, _, err := decodeStrict([]byte(fmt.Sprintf(base, bad))); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

func TestManifestsDecodeStrictly(t *testing.T) {
	objs := loadManifests(t, ".")
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.kind]++
	}
	if kinds["Deployment"] < 2 || kinds["ConfigMap"] < 2 || kinds["Kustomization"] < 3 {
		t.Errorf("decoded %v; want the sidecar and standalone Deployments, their ConfigMaps and three kustomizations", kinds)
	}
	for _, o := range objs {
		if s, ok := o.obj.(*corev1.Secret); ok {
			t.Errorf("%s: Secret %s is checked in: the key Secret is created by hand (kubectl create secret), never committed", o.file, s.Name)
		}
	}
}

// TestKustomizations checks that every kustomization's resources exist and
// that together they cover every manifest file.
func TestKustomizations(t *testing.T) {
	objs := loadManifests(t, ".")
	listed := map[string]bool{}
	for _, o := range objs {
		k, ok := o.obj.(*kustomization)
		if !ok {
			continue
		}
		dir := filepath.Dir(o.file)
		for _, r := range k.Resources {
			p := filepath.Join(dir, r)
			st, err := os.Stat(p)
			if err != nil {
				t.Errorf("%s: resource %s: %v", o.file, r, err)
				continue
			}
			if st.IsDir() {
				if _, err := os.Stat(filepath.Join(p, "kustomization.yaml")); err != nil {
					t.Errorf("%s: resource %s is a directory without kustomization.yaml", o.file, r)
				}
			}
			listed[filepath.Clean(p)] = true
		}
	}
	for _, o := range objs {
		if o.kind != "Kustomization" && !listed[o.file] {
			t.Errorf("%s is in no kustomization's resources", o.file)
		}
	}
}

// deployments returns the Deployments and, by name, the ConfigMaps of the
// same directory.
func deployments(t *testing.T) (deps []object, configMaps map[string]map[string]*corev1.ConfigMap) {
	objs := loadManifests(t, ".")
	configMaps = map[string]map[string]*corev1.ConfigMap{}
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			deps = append(deps, o)
		case *corev1.ConfigMap:
			dir := filepath.Dir(o.file)
			if configMaps[dir] == nil {
				configMaps[dir] = map[string]*corev1.ConfigMap{}
			}
			configMaps[dir][v.Name] = v
		}
	}
	if len(deps) == 0 {
		t.Fatal("no Deployment found")
	}
	return deps, configMaps
}

// dpstreamConfig is the part of dpstream's configuration (operator.Config)
// the manifests must agree with.
type dpstreamConfig struct {
	Kafka struct {
		ScaleOut bool     `json:"scale_out"`
		Brokers  []string `json:"brokers"`
	} `json:"kafka"`
	Windows struct {
		Start string `json:"start"`
	} `json:"windows"`
	Privacy struct {
		KeyFile string `json:"key_file"`
		KeyEnv  string `json:"key_env"`
	} `json:"privacy"`
	Observability struct {
		Listen string `json:"listen"`
	} `json:"observability"`
}

func parseConfig(t *testing.T, where, text string) dpstreamConfig {
	t.Helper()
	var c dpstreamConfig
	if err := yaml.Unmarshal([]byte(text), &c); err != nil {
		t.Fatalf("%s: dpstream config: %v", where, err)
	}
	return c
}
