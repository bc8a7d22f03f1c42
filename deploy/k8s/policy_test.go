package k8s

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// kubeletLogMax is the most a container's log takes on the node under the
// kubelet's default rotation: containerLogMaxSize 10Mi × containerLogMaxFiles
// 5 (KubeletConfiguration defaults). Logs count towards a container's
// ephemeral storage.
var kubeletLogMax = resource.MustParse("50Mi")

// minStartupSeconds is the least time the startup probe must give dpstream
// before liveness applies: the HTTP server starts after the calibration,
// which off-grid solvers can make take minutes on a busy node.
const minStartupSeconds = 120

// byDir returns, per directory, the objects of type T found there.
func byDir[T any](objs []object) map[string][]T {
	out := map[string][]T{}
	for _, o := range objs {
		if v, ok := o.obj.(T); ok {
			dir := filepath.Dir(o.file)
			out[dir] = append(out[dir], v)
		}
	}
	return out
}

// selecting returns the last of objs whose selector (sel) selects the
// pods of d, or the zero T (nil) when none does; an empty selector
// selects nothing here.
func selecting[T any](t *testing.T, objs []T, d *appsv1.Deployment, sel func(T) *metav1.LabelSelector) T {
	t.Helper()
	var found T
	for _, o := range objs {
		s, err := metav1.LabelSelectorAsSelector(sel(o))
		if err != nil {
			t.Errorf("selector %v: %v", sel(o), err)
			continue
		}
		if !s.Empty() && s.Matches(labels.Set(d.Spec.Template.Labels)) {
			found = o
		}
	}
	return found
}

// TestPodDisruptionBudgets: every Deployment has a PodDisruptionBudget in
// its directory that selects its pods and still allows a voluntary
// eviction (maxUnavailable ≥ 1, or minAvailable below the replicas: a
// budget that allows none blocks every node drain), with
// unhealthyPodEvictionPolicy AlwaysAllow. Fails on the manifests before
// (no PodDisruptionBudget).
func TestPodDisruptionBudgets(t *testing.T) {
	objs := loadManifests(t, ".")
	pdbs := byDir[*policyv1.PodDisruptionBudget](objs)
	deps, _ := deployments(t)
	for _, o := range deps {
		d := o.obj.(*appsv1.Deployment)
		where := o.file + ": Deployment " + d.Name
		pdb := selecting(t, pdbs[filepath.Dir(o.file)], d, func(p *policyv1.PodDisruptionBudget) *metav1.LabelSelector { return p.Spec.Selector })
		if pdb == nil {
			t.Errorf("%s: no PodDisruptionBudget selects its pods", where)
			continue
		}
		replicas := 1
		if d.Spec.Replicas != nil {
			replicas = int(*d.Spec.Replicas)
		}
		switch {
		case pdb.Spec.MaxUnavailable != nil:
			if v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, replicas, true); err != nil || v < 1 {
				t.Errorf("%s: PodDisruptionBudget %s maxUnavailable %s allows no eviction", where, pdb.Name, pdb.Spec.MaxUnavailable.String())
			}
		case pdb.Spec.MinAvailable != nil:
			if v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, replicas, true); err != nil || v >= replicas {
				t.Errorf("%s: PodDisruptionBudget %s minAvailable %s of %d replicas blocks every drain", where, pdb.Name, pdb.Spec.MinAvailable.String(), replicas)
			}
		default:
			t.Errorf("%s: PodDisruptionBudget %s sets neither maxUnavailable nor minAvailable", where, pdb.Name)
		}
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
			t.Errorf("%s: PodDisruptionBudget %s: unhealthyPodEvictionPolicy should be AlwaysAllow (a crash-looping pod must not block a drain)", where, pdb.Name)
		}
	}
}

// TestNetworkPolicies: every Deployment's pods are selected by a
// NetworkPolicy of its directory that restricts both directions and admits
// what dpstream needs: in, the metrics port (TCP 9464); out, DNS (UDP and
// TCP 53) and the port of every broker in kafka.brokers. Fails on the
// manifests before (no NetworkPolicy).
func TestNetworkPolicies(t *testing.T) {
	objs := loadManifests(t, ".")
	nps := byDir[*networkingv1.NetworkPolicy](objs)
	deps, configMaps := deployments(t)
	for _, o := range deps {
		d := o.obj.(*appsv1.Deployment)
		where := o.file + ": Deployment " + d.Name
		np := selecting(t, nps[filepath.Dir(o.file)], d, func(p *networkingv1.NetworkPolicy) *metav1.LabelSelector { return &p.Spec.PodSelector })
		if np == nil {
			t.Errorf("%s: no NetworkPolicy selects its pods", where)
			continue
		}
		types := map[networkingv1.PolicyType]bool{}
		for _, pt := range np.Spec.PolicyTypes {
			types[pt] = true
		}
		if !types[networkingv1.PolicyTypeIngress] || !types[networkingv1.PolicyTypeEgress] {
			t.Errorf("%s: NetworkPolicy %s policyTypes %v: want Ingress and Egress", where, np.Name, np.Spec.PolicyTypes)
		}
		var in []networkingv1.NetworkPolicyPort
		for _, r := range np.Spec.Ingress {
			in = append(in, r.Ports...)
		}
		if !admits(in, corev1.ProtocolTCP, metricsPort) {
			t.Errorf("%s: NetworkPolicy %s does not admit TCP %d in (metrics)", where, np.Name, metricsPort)
		}
		var out []networkingv1.NetworkPolicyPort
		for _, r := range np.Spec.Egress {
			out = append(out, r.Ports...)
		}
		for _, p := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
			if !admits(out, p, 53) {
				t.Errorf("%s: NetworkPolicy %s does not admit %s 53 out (DNS)", where, np.Name, p)
			}
		}
		for _, cm := range configMaps[filepath.Dir(o.file)] {
			text, ok := cm.Data[filepath.Base(configPath)]
			if !ok {
				continue
			}
			for _, b := range parseConfig(t, where, text).Kafka.Brokers {
				_, port, err := net.SplitHostPort(b)
				n, perr := strconv.Atoi(port)
				if err != nil || perr != nil {
					t.Errorf("%s: kafka.brokers entry %q has no port", where, b)
					continue
				}
				if !admits(out, corev1.ProtocolTCP, n) {
					t.Errorf("%s: NetworkPolicy %s does not admit TCP %d out (the broker %s)", where, np.Name, n, b)
				}
			}
		}
	}
}

// admits reports whether ports (of one direction's rules) admit protocol
// proto on port n (a numeric port or range; named ports are not used).
func admits(ports []networkingv1.NetworkPolicyPort, proto corev1.Protocol, n int) bool {
	for _, p := range ports {
		pr := corev1.ProtocolTCP
		if p.Protocol != nil {
			pr = *p.Protocol
		}
		if pr != proto || p.Port == nil || p.Port.Type != intstr.Int {
			continue
		}
		lo, hi := int(p.Port.IntVal), int(p.Port.IntVal)
		if p.EndPort != nil {
			hi = int(*p.EndPort)
		}
		if lo <= n && n <= hi {
			return true
		}
	}
	return false
}

// TestStartupProbe: dpstream's container has a startup probe on /healthz
// at the metrics port that gives it at least minStartupSeconds before the
// liveness probe can restart it. Fails on the manifests before (none).
func TestStartupProbe(t *testing.T) {
	deps, _ := deployments(t)
	for _, o := range deps {
		d := o.obj.(*appsv1.Deployment)
		where := o.file + ": Deployment " + d.Name
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name != dpstreamContainer {
				continue
			}
			p := c.StartupProbe
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
				t.Errorf("%s: no HTTP startup probe of /healthz", where)
				continue
			}
			if port := p.HTTPGet.Port; !(port.Type == intstr.String && port.StrVal == "metrics" || port.Type == intstr.Int && port.IntVal == metricsPort) {
				t.Errorf("%s: startup probe port %s is not the metrics port", where, port.String())
			}
			period, threshold := p.PeriodSeconds, p.FailureThreshold
			if period == 0 {
				period = 10 // the API's default
			}
			if threshold == 0 {
				threshold = 3 // the API's default
			}
			if got := period * threshold; got < minStartupSeconds {
				t.Errorf("%s: the startup probe allows %d s, want at least %d", where, got, minStartupSeconds)
			}
		}
	}
}

// TestEphemeralStorage: every container requests and limits ephemeral
// storage (a container without a limit can fill the node's disk), the
// limit at least its request and the kubelet's log rotation (logs count),
// and the pod's limits cover its emptyDir volumes' size limits too.
// Fails on the manifests before (no ephemeral-storage anywhere).
func TestEphemeralStorage(t *testing.T) {
	deps, _ := deployments(t)
	for _, o := range deps {
		d := o.obj.(*appsv1.Deployment)
		where := o.file + ": Deployment " + d.Name
		spec := d.Spec.Template.Spec
		var total, need resource.Quantity
		for _, c := range spec.Containers {
			req, okReq := c.Resources.Requests[corev1.ResourceEphemeralStorage]
			lim, okLim := c.Resources.Limits[corev1.ResourceEphemeralStorage]
			if !okReq || !okLim {
				t.Errorf("%s: container %s lacks an ephemeral-storage request or limit", where, c.Name)
				continue
			}
			if lim.Cmp(req) < 0 || lim.Cmp(kubeletLogMax) < 0 {
				t.Errorf("%s: container %s ephemeral-storage limit %s is below its request %s or the log rotation %s",
					where, c.Name, lim.String(), req.String(), kubeletLogMax.String())
			}
			total.Add(lim)
			need.Add(kubeletLogMax)
		}
		for _, v := range spec.Volumes {
			if v.EmptyDir == nil {
				continue
			}
			if v.EmptyDir.SizeLimit == nil {
				t.Errorf("%s: emptyDir %s has no sizeLimit", where, v.Name)
				continue
			}
			need.Add(*v.EmptyDir.SizeLimit)
		}
		if total.Cmp(need) < 0 {
			t.Errorf("%s: the containers' ephemeral-storage limits (%s) are below the logs and emptyDirs they hold (%s)", where, total.String(), need.String())
		}
	}
}
