package k8s

import (
	"fmt"
	"net"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestDeploymentSecurity checks every container of every Deployment: not
// root, no privilege escalation, read-only root file system, all
// capabilities dropped, the RuntimeDefault seccomp profile, requests and
// limits for CPU and memory.
func TestDeploymentSecurity(t *testing.T) {
	deps, _ := deployments(t)
	for _, o := range deps {
		d := o.obj.(*appsv1.Deployment)
		spec := d.Spec.Template.Spec
		psc := spec.SecurityContext
		where := o.file + ": Deployment " + d.Name
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
			t.Errorf("%s: pod securityContext.runAsNonRoot is not true", where)
		}
		if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != nonrootUID {
			t.Errorf("%s: pod securityContext.runAsUser is not the image's user %d", where, nonrootUID)
		}
		if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod seccompProfile is not RuntimeDefault", where)
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: automountServiceAccountToken is not false (dpstream does not use the Kubernetes API)", where)
		}
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			cw := where + " container " + c.Name
			sc := c.SecurityContext
			if sc == nil {
				t.Errorf("%s: no securityContext", cw)
				continue
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s: allowPrivilegeEscalation is not false", cw)
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s: readOnlyRootFilesystem is not true", cw)
			}
			if sc.Privileged != nil && *sc.Privileged {
				t.Errorf("%s: privileged", cw)
			}
			if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot || sc.RunAsUser != nil && *sc.RunAsUser == 0 {
				t.Errorf("%s: overrides the pod's non-root user", cw)
			}
			if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
				t.Errorf("%s: capabilities are not drop [ALL] with nothing added", cw)
			}
			if sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s: seccompProfile %s", cw, sc.SeccompProfile.Type)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, okReq := c.Resources.Requests[r]
				lim, okLim := c.Resources.Limits[r]
				if !okReq || !okLim || req.IsZero() || lim.IsZero() {
					t.Errorf("%s: %s request and limit must both be set", cw, r)
				} else if req.Cmp(lim) > 0 {
					t.Errorf("%s: %s request %s exceeds the limit %s", cw, r, req.String(), lim.String())
				}
			}
		}
	}
}

// TestDpstreamContainer checks dpstream's container against its config:
// probes on /healthz and /readyz of the metrics port, which is the port of
// observability.listen on all interfaces, the Prometheus annotations, the
// config mounted read-only at the image's default path from a ConfigMap of
// the same kustomization, and the key as keySecretFile says.
func TestDpstreamContainer(t *testing.T) {
	deps, configMaps := deployments(t)
	for _, o := range deps {
		d := o.obj.(*appsv1.Deployment)
		where := o.file + ": Deployment " + d.Name
		spec := d.Spec.Template.Spec
		var dp *corev1.Container
		for i := range spec.Containers {
			if spec.Containers[i].Name == dpstreamContainer {
				dp = &spec.Containers[i]
			}
		}
		if dp == nil {
			t.Errorf("%s: no container %q", where, dpstreamContainer)
			continue
		}
		if len(dp.Command) > 0 {
			t.Errorf("%s: command %q overrides the image's entrypoint dpstream", where, dp.Command)
		}
		if args := strings.Join(dp.Args, " "); len(dp.Args) > 0 && !strings.Contains(args, configPath) {
			t.Errorf("%s: args %q do not read %s", where, args, configPath)
		}

		// The metrics port and the probes.
		var portName string
		for _, p := range dp.Ports {
			if p.ContainerPort == metricsPort {
				portName = p.Name
			}
		}
		if portName == "" {
			t.Errorf("%s: no containerPort %d", where, metricsPort)
		}
		probe := func(name string, p *corev1.Probe, path string) {
			if p == nil || p.HTTPGet == nil {
				t.Errorf("%s: no HTTP %s probe", where, name)
				return
			}
			if p.HTTPGet.Path != path {
				t.Errorf("%s: %s probe path %q, want %q", where, name, p.HTTPGet.Path, path)
			}
			port := p.HTTPGet.Port
			if !(port.Type == intstr.String && port.StrVal == portName && portName != "" || port.Type == intstr.Int && port.IntVal == metricsPort) {
				t.Errorf("%s: %s probe port %s is not the metrics port %d", where, name, port.String(), metricsPort)
			}
		}
		probe("liveness", dp.LivenessProbe, "/healthz")
		if len(spec.Containers) > 1 {
			// A sidecar: the pod's readiness is the application's. A
			// readiness probe on dpstream would take the application out of
			// its Service (and stall its rolling updates) whenever Kafka is
			// unreachable or the input's shape is wrong; dpstream's own
			// readiness is the dpstream_ready metric and /readyz for alerts.
			if dp.ReadinessProbe != nil {
				t.Errorf("%s: a sidecar's readiness probe makes the application's pod unready when dpstream is", where)
			}
		} else {
			probe("readiness", dp.ReadinessProbe, "/readyz")
		}
		ann := d.Spec.Template.Annotations
		if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(metricsPort) || ann["prometheus.io/path"] != "/metrics" {
			t.Errorf("%s: pod annotations %v lack prometheus.io/scrape=true, port=%d, path=/metrics", where, ann, metricsPort)
		}

		// The config: a ConfigMap of this directory mounted read-only at
		// the image's default path.
		var cm *corev1.ConfigMap
		for _, m := range dp.VolumeMounts {
			if m.MountPath != filepath.Dir(configPath) && m.MountPath != configPath {
				continue
			}
			if !m.ReadOnly {
				t.Errorf("%s: the config is mounted writable", where)
			}
			for _, v := range spec.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					cm = configMaps[filepath.Dir(o.file)][v.ConfigMap.Name]
					if cm == nil {
						t.Errorf("%s: ConfigMap %s is not in %s", where, v.ConfigMap.Name, filepath.Dir(o.file))
					}
				}
			}
		}
		if cm == nil {
			t.Errorf("%s: no ConfigMap mounted at %s", where, filepath.Dir(configPath))
			continue
		}
		text, ok := cm.Data[filepath.Base(configPath)]
		if !ok {
			t.Errorf("%s: ConfigMap %s has no key %s", where, cm.Name, filepath.Base(configPath))
			continue
		}
		cfg := parseConfig(t, where, text)
		host, port, err := net.SplitHostPort(cfg.Observability.Listen)
		if err != nil || port != strconv.Itoa(metricsPort) || (host != "0.0.0.0" && host != "" && host != "::") {
			t.Errorf("%s: observability.listen %q: the probes need all interfaces on port %d", where, cfg.Observability.Listen, metricsPort)
		}
		if strategy := d.Spec.Strategy.Type; !cfg.Kafka.ScaleOut && (d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || strategy != appsv1.RecreateDeploymentStrategyType) {
			t.Errorf("%s: without kafka.scale_out one instance per group: replicas 1 and strategy Recreate (two pods must never overlap)", where)
		}
		// Several replicas and rolling updates out of the box (issue 21):
		// scale-out, and no fixed windows.start (silent before it, and
		// after it a fresh deployment releases every window since).
		if !cfg.Kafka.ScaleOut || d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
			t.Errorf("%s: not set up for several replicas and rolling updates (kafka.scale_out %v, strategy %s)", where, cfg.Kafka.ScaleOut, d.Spec.Strategy.Type)
		}
		if cfg.Windows.Start != "" {
			t.Errorf("%s: windows.start %q is fixed in the manifest: the first instance records the origin in the state topic", where, cfg.Windows.Start)
		}
		keySecretFile(t, where, spec, cfg)
	}
}

// keySecretFile checks how the pod spec gives dpstream its noise key: the
// Secret keySecret mounted as a file, the way the kubelet makes readable
// for dpstream's non-root user and no one else —
//   - a secret volume of keySecret with defaultMode exactly 0400, one item
//     (keyItem) without a mode of its own, not optional, and no projected
//     volume of it;
//   - mounted read-only, as a whole directory (no subPath), into the
//     dpstream container only, at the path that is privacy.key_file, with
//     privacy.key_env "" (no environment variable can take its place);
//   - the pod's fsGroup set and equal to runAsGroup, runAsNonRoot, a
//     non-root runAsUser, no container overriding its group: the kubelet
//     then lays the file out as root:fsGroup 0440, the one group-readable
//     layout dpstream accepts;
//   - no container given the Secret or DPSTREAM_KEY through env or
//     envFrom, none with a literal key, and no shared process namespace
//     (another container of the same user could read the file through
//     /proc/<pid>/root).
func keySecretFile(t *testing.T, where string, spec corev1.PodSpec, cfg dpstreamConfig) {
	t.Helper()
	if cfg.Privacy.KeyEnv != "" {
		t.Errorf("%s: privacy.key_env %q: want \"\", so that only the mounted file is the key", where, cfg.Privacy.KeyEnv)
	}
	if !path.IsAbs(cfg.Privacy.KeyFile) || strings.HasPrefix(path.Clean(cfg.Privacy.KeyFile)+"/", path.Dir(configPath)+"/") {
		t.Errorf("%s: privacy.key_file %q: want an absolute path outside the ConfigMap's %s", where, cfg.Privacy.KeyFile, path.Dir(configPath))
	}

	// The pod's identity: what makes the kubelet's layout readable by
	// dpstream (and acceptable to it).
	psc := spec.SecurityContext
	switch {
	case psc == nil || psc.FSGroup == nil:
		t.Errorf("%s: pod securityContext.fsGroup is not set: the key file stays root:root 0400, unreadable by user %d", where, nonrootUID)
	case psc.RunAsGroup == nil:
		t.Errorf("%s: pod securityContext.runAsGroup is not set (want it equal to fsGroup %d)", where, *psc.FSGroup)
	case *psc.FSGroup != *psc.RunAsGroup:
		t.Errorf("%s: pod securityContext.fsGroup %d is not runAsGroup %d", where, *psc.FSGroup, *psc.RunAsGroup)
	case *psc.FSGroup == 0:
		t.Errorf("%s: pod securityContext.fsGroup is 0 (root's group)", where)
	}
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("%s: the pod must set runAsNonRoot and a non-root runAsUser (dpstream refuses a group-readable key file as root)", where)
	}
	if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace || spec.HostPID {
		t.Errorf("%s: shareProcessNamespace/hostPID: other containers of user %d could read the key through /proc/<pid>/root", where, nonrootUID)
	}

	// The volume.
	var vol *corev1.Volume
	for i, v := range spec.Volumes {
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil && src.Secret.Name == keySecret {
					t.Errorf("%s: projected volume %s holds the key Secret: use one secret volume", where, v.Name)
				}
			}
		}
		if v.Secret == nil || v.Secret.SecretName != keySecret {
			continue
		}
		if vol != nil {
			t.Errorf("%s: volumes %s and %s both hold the key Secret", where, vol.Name, v.Name)
		}
		vol = &spec.Volumes[i]
	}
	if vol == nil {
		t.Errorf("%s: no secret volume of Secret %s", where, keySecret)
		return
	}
	sv := vol.Secret
	if sv.DefaultMode == nil || *sv.DefaultMode != 0o400 {
		got := "unset (0644)"
		if sv.DefaultMode != nil {
			got = fmt.Sprintf("%04o", *sv.DefaultMode)
		}
		t.Errorf("%s: volume %s: defaultMode %s, want exactly 0400 (the fsGroup adds group read)", where, vol.Name, got)
	}
	if sv.Optional != nil && *sv.Optional {
		t.Errorf("%s: volume %s: the key Secret is optional", where, vol.Name)
	}
	var itemPath string
	if len(sv.Items) != 1 || sv.Items[0].Key != keyItem {
		t.Errorf("%s: volume %s: items %+v, want exactly the item %q", where, vol.Name, sv.Items, keyItem)
	} else {
		itemPath = sv.Items[0].Path
		if m := sv.Items[0].Mode; m != nil && *m != 0o400 {
			t.Errorf("%s: volume %s: item %s has mode %04o, want none (defaultMode 0400) or 0400", where, vol.Name, keyItem, *m)
		}
	}

	// Who mounts it, who gets it otherwise.
	var dpMounts int
	containers := append(slices.Clone(spec.InitContainers), spec.Containers...)
	for _, c := range containers {
		for _, m := range c.VolumeMounts {
			if m.Name != vol.Name {
				continue
			}
			if c.Name != dpstreamContainer {
				t.Errorf("%s: container %s mounts the key Secret", where, c.Name)
				continue
			}
			dpMounts++
			if !m.ReadOnly {
				t.Errorf("%s: the key Secret is mounted writable", where)
			}
			if m.SubPath != "" || m.SubPathExpr != "" {
				t.Errorf("%s: the key Secret is mounted with a subPath (the kubelet never updates it)", where)
			}
			if itemPath != "" && path.Join(m.MountPath, itemPath) != cfg.Privacy.KeyFile {
				t.Errorf("%s: the key is mounted at %s, but privacy.key_file is %q", where, path.Join(m.MountPath, itemPath), cfg.Privacy.KeyFile)
			}
		}
		if c.Name == dpstreamContainer && c.SecurityContext != nil && c.SecurityContext.RunAsGroup != nil && psc != nil && psc.FSGroup != nil && *c.SecurityContext.RunAsGroup != *psc.FSGroup {
			t.Errorf("%s: container %s runs as group %d, not the pod's fsGroup", where, c.Name, *c.SecurityContext.RunAsGroup)
		}
		for _, e := range c.Env {
			if e.Name == keyEnv {
				t.Errorf("%s container %s: env %s: the key comes from the mounted file only", where, c.Name, keyEnv)
			}
			if e.Value != "" && regexp.MustCompile(`^[0-9a-fA-F]{64}$`).MatchString(strings.TrimSpace(e.Value)) {
				t.Errorf("%s container %s: env %s holds what looks like a literal key", where, c.Name, e.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == keySecret {
				t.Errorf("%s: container %s is given the key Secret in env %s", where, c.Name, e.Name)
			}
		}
		for _, ef := range c.EnvFrom {
			if ef.SecretRef != nil && ef.SecretRef.Name == keySecret {
				t.Errorf("%s: container %s is given the key Secret through envFrom", where, c.Name)
			}
		}
	}
	if dpMounts != 1 {
		t.Errorf("%s: the dpstream container mounts the key Secret %d times, want once", where, dpMounts)
	}

	// Any Secret volume (e.g. TLS client keys added later) must be
	// private to its owner.
	for _, v := range spec.Volumes {
		if v.Secret != nil && (v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o077 != 0) {
			t.Errorf("%s: Secret volume %s is readable by group or others (set defaultMode: 0400)", where, v.Name)
		}
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)
