package helm_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/dripmesh/drip/internal/topology"
)

// mesh parses the rendered topology file as the brokers will.
func (m *manifest) mesh(t *testing.T) *topology.Topology {
	t.Helper()
	cm := get[*corev1.ConfigMap](t, m, "ConfigMap/"+fullname+"-topology")
	topo, err := topology.Parse([]byte(cm.Data["topology.yaml"]))
	require.NoError(t, err, cm.Data["topology.yaml"])
	return topo
}

// linkSet is a topology's links as "a-b" pairs of ordinals, smaller first.
func linkSet(t *testing.T, topo *topology.Topology) []string {
	t.Helper()
	var out []string
	for _, l := range topo.Links {
		a, b := ordinal(t, l.A), ordinal(t, l.B)
		out = append(out, fmt.Sprintf("%d-%d", min(a, b), max(a, b)))
	}
	slices.Sort(out)
	return out
}

func ordinal(t *testing.T, name string) int {
	t.Helper()
	var i int
	_, err := fmt.Sscanf(name, fullname+"-%d", &i)
	require.NoError(t, err, "broker name %q", name)
	return i
}

func findLink(t *testing.T, topo *topology.Topology, a, b int) topology.Link {
	t.Helper()
	for _, l := range topo.Links {
		if x, y := ordinal(t, l.A), ordinal(t, l.B); x == a && y == b || x == b && y == a {
			return l
		}
	}
	t.Fatalf("no link %d–%d", a, b)
	return topology.Link{}
}

// assertBrokers checks that broker i is the pod <fullname>-i with router
// ID i, at its DNS name behind the headless Service.
func assertBrokers(t *testing.T, topo *topology.Topology, n int) {
	t.Helper()
	require.Len(t, topo.Brokers, n)
	for i, b := range topo.Brokers {
		assert.Equal(t, fmt.Sprintf("%s-%d", fullname, i), b.Name)
		assert.Equal(t, uint32(i), *b.ID)
		assert.Equal(t, dns(i, 7000), b.Client)
		assert.Equal(t, dns(i, 7100), b.Peer)
		assert.Equal(t, dns(i, 9100), b.Metrics)
	}
}

func assertUnprivileged(t *testing.T, what string, sc *corev1.SecurityContext) {
	t.Helper()
	require.NotNil(t, sc, what)
	assert.Equal(t, new(true), sc.RunAsNonRoot, what)
	assert.Equal(t, new(true), sc.ReadOnlyRootFilesystem, what)
	assert.Equal(t, new(false), sc.AllowPrivilegeEscalation, what)
	require.NotNil(t, sc.Capabilities, what)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, what)
	assert.Empty(t, sc.Capabilities.Add, what)
}

func assertPodSecurity(t *testing.T, what string, psc *corev1.PodSecurityContext) {
	t.Helper()
	require.NotNil(t, psc, what)
	assert.Equal(t, new(true), psc.RunAsNonRoot, what)
	assert.Equal(t, new(int64(65532)), psc.RunAsUser, what)
	require.NotNil(t, psc.SeccompProfile, what)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type, what)
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	m := render(t)
	assert.Equal(t, []string{
		"ConfigMap/demo-drip-topology", "Pod/demo-drip-selftest", "Role/demo-drip-endpointslices", "RoleBinding/demo-drip-endpointslices",
		"Secret/demo-drip-broker-tls", "Secret/demo-drip-client-tls", "Secret/demo-drip-tls-issuers",
		"Service/demo-drip", "Service/demo-drip-headless", "ServiceAccount/demo-drip", "StatefulSet/demo-drip",
	}, m.keys(), "no monitors, dashboards or PVCs by default; generated certificates (TestGeneratedTLS)")

	hs := get[*corev1.Service](t, m, "Service/"+headless)
	assert.Equal(t, corev1.ClusterIPNone, hs.Spec.ClusterIP)
	assert.True(t, hs.Spec.PublishNotReadyAddresses, "brokers resolve each other before they are ready")
	assert.Equal(t, "headless", hs.Labels["app.kubernetes.io/component"])

	svc := get[*corev1.Service](t, m, "Service/"+fullname)
	assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, int32(7000), svc.Spec.Ports[0].Port)
	assert.Equal(t, "client", svc.Spec.Ports[0].TargetPort.String())

	sts := m.statefulSet(t)
	assert.Equal(t, headless, sts.Spec.ServiceName)
	assert.Equal(t, int32(4), *sts.Spec.Replicas)
	assert.Equal(t, "Parallel", string(sts.Spec.PodManagementPolicy))
	assert.Empty(t, sts.Spec.VolumeClaimTemplates)
	pod := sts.Spec.Template
	for _, s := range []*corev1.Service{hs, svc} {
		for k, v := range s.Spec.Selector {
			assert.Equal(t, v, pod.Labels[k], "Service %s selects the broker pods by %s", s.Name, k)
		}
	}
	assert.Equal(t, sts.Spec.Selector.MatchLabels, svc.Spec.Selector)
	assert.NotEmpty(t, pod.Annotations["checksum/topology"])
	assertPodSecurity(t, "broker pod", pod.Spec.SecurityContext)
	require.Len(t, pod.Spec.Containers, 1, "no netem sidecar by default")

	b := container(t, pod.Spec, "broker")
	assert.Equal(t, "drip:dev", b.Image, "image tag defaults to the chart's appVersion")
	assert.Equal(t, corev1.PullIfNotPresent, b.ImagePullPolicy)
	assert.Equal(t, []string{
		"broker", "--topology=/etc/drip/topology.yaml", "--name=$(POD_NAME)",
		"--client-addr=:7000", "--peer-addr=:7100", "--metrics-addr=:9100",
		"--log-level=info", "--log-format=json", "--drain-timeout=20s", "--drain-overlap=2s", "--peer-endpointslices=" + headless,
		"--tls-cert=/etc/drip-tls/$(POD_NAME).crt", "--tls-key=/etc/drip-tls/$(POD_NAME).key", "--tls-ca=/etc/drip-tls/ca.crt",
		"--tls-peer-identity", "--tls-client-auth", "--tls-client-ca=/etc/drip-tls/client-ca.crt",
	}, b.Args, "mutual TLS by default, each broker with its own certificate")
	assert.Equal(t, fullname, pod.Spec.ServiceAccountName)
	assert.Equal(t, new(true), pod.Spec.AutomountServiceAccountToken, "the EndpointSlices are read with the pod's token")
	assert.GreaterOrEqual(t, *pod.Spec.TerminationGracePeriodSeconds, int64(10+15), "the drain and the servers' stop fit in the grace period")
	require.Len(t, b.Env, 1)
	assert.Equal(t, "POD_NAME", b.Env[0].Name)
	assert.Equal(t, "metadata.name", b.Env[0].ValueFrom.FieldRef.FieldPath)
	for name, p := range map[string]*corev1.Probe{"liveness": b.LivenessProbe, "readiness": b.ReadinessProbe} {
		require.NotNil(t, p, name)
		require.NotNil(t, p.HTTPGet, "%s probe: kubelet's gRPC probe cannot speak TLS, the metrics listener's HTTP can", name)
		assert.Equal(t, "metrics", p.HTTPGet.Port.String(), name)
		assert.Nil(t, p.GRPC, name)
	}
	assert.Equal(t, "/healthz", b.LivenessProbe.HTTPGet.Path, "alive: the server runs")
	assert.Equal(t, "/readyz", b.ReadinessProbe.HTTPGet.Path, "ready: the broker has joined the mesh")
	assertUnprivileged(t, "broker", b.SecurityContext)
	assert.NotEmpty(t, b.Resources.Requests)
	require.Len(t, b.VolumeMounts, 2)
	assert.Equal(t, "/etc/drip", b.VolumeMounts[0].MountPath)
	assert.Equal(t, "/etc/drip-tls", b.VolumeMounts[1].MountPath)

	// Plaintext, the probes ask the gRPC health service.
	plainB := container(t, render(t, "--set", "tls.enabled=false").statefulSet(t).Spec.Template.Spec, "broker")
	assert.NotContains(t, strings.Join(plainB.Args, " "), "--tls")
	for name, p := range map[string]*corev1.Probe{"liveness": plainB.LivenessProbe, "readiness": plainB.ReadinessProbe} {
		require.NotNil(t, p, name)
		require.NotNil(t, p.GRPC, "%s probe uses the gRPC health service", name)
		assert.Equal(t, int32(7000), p.GRPC.Port, name)
		assert.Nil(t, p.HTTPGet, name)
	}
	assert.Nil(t, plainB.LivenessProbe.GRPC.Service, "alive: the server's overall health")
	require.NotNil(t, plainB.ReadinessProbe.GRPC.Service)
	assert.Equal(t, "drip.v1.Broker", *plainB.ReadinessProbe.GRPC.Service, "ready: the broker has joined the mesh")

	topo := m.mesh(t)
	assert.Equal(t, fullname, topo.Mesh, "mesh name defaults to the release's")
	assertBrokers(t, topo, 4)
	assert.Equal(t, []string{"0-1", "0-3", "1-2", "2-3"}, linkSet(t, topo), "a ring by default")
	for _, l := range topo.Links {
		assert.Equal(t, topology.Link{A: l.A, B: l.B, Weight: 1}, l, "no WAN properties by default")
	}

	tp := m.testPod(t)
	assert.Equal(t, "test", tp.Annotations["helm.sh/hook"])
	assert.Equal(t, "before-hook-creation", tp.Annotations["helm.sh/hook-delete-policy"],
		"a passed test's pod stays for `helm test --logs` to read")
	assert.Equal(t, corev1.RestartPolicyNever, tp.Spec.RestartPolicy)
	assertPodSecurity(t, "test pod", tp.Spec.SecurityContext)
	tc := container(t, tp.Spec, "selftest")
	assertUnprivileged(t, "selftest", tc.SecurityContext)
	assert.Equal(t, []string{
		"selftest", "--broker=" + dns(0, 7000), "--broker=" + dns(2, 7000), "--broker=" + dns(3, 7000),
		"--messages=10", "--timeout=90s", "--tls-ca=/etc/drip/tls/ca.crt", "--tls-cert=/etc/drip/tls/tls.crt", "--tls-key=/etc/drip/tls/tls.key",
	}, tc.Args, "the first, middle and last broker, by DNS name")
}

// Every shape links the brokers as a simple reference says.
func TestShapes(t *testing.T) {
	t.Parallel()
	reference := func(shape string, n int) []string {
		var out []string
		for a := range n {
			for b := a + 1; b < n; b++ {
				switch {
				case shape == "fullmesh",
					b == a+1,
					shape == "ring" && a == 0 && b == n-1 && n > 2:
					out = append(out, fmt.Sprintf("%d-%d", a, b))
				}
			}
		}
		slices.Sort(out)
		return out
	}
	for _, shape := range []string{"fullmesh", "ring", "line"} {
		for _, n := range []int{1, 2, 3, 6} {
			t.Run(fmt.Sprintf("%s-%d", shape, n), func(t *testing.T) {
				t.Parallel()
				m := render(t, "--set", "topology.shape="+shape, "--set", fmt.Sprintf("replicaCount=%d", n))
				topo := m.mesh(t)
				assertBrokers(t, topo, n)
				assert.Equal(t, reference(shape, n), linkSet(t, topo))
				args := container(t, m.testPod(t).Spec, "selftest").Args
				brokers := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return !strings.HasPrefix(a, "--broker=") })
				assert.Len(t, brokers, min(n, 3), "distinct brokers under test: %v", brokers)
			})
		}
	}
}

func TestRingWithNetem(t *testing.T) {
	t.Parallel()
	m := renderValues(t, "ring-netem.yaml")
	topo := m.mesh(t)
	assertBrokers(t, topo, 8)
	require.Len(t, topo.Links, 8)
	for i := range 8 {
		assert.Len(t, topo.Neighbors(fmt.Sprintf("%s-%d", fullname, i)), 2, "broker %d in a ring", i)
		l := findLink(t, topo, i, (i+1)%8)
		assert.Equal(t, topology.Rate(1e6), l.Bandwidth)
		assert.Equal(t, topology.Duration(20*time.Millisecond), l.Delay)
		assert.Equal(t, topology.Duration(2*time.Millisecond), l.Jitter)
		assert.InDelta(t, 0.001, float64(l.Loss), 1e-12)
	}

	pod := m.statefulSet(t).Spec.Template
	require.Len(t, pod.Spec.Containers, 2)
	assert.Contains(t, container(t, pod.Spec, "broker").Args, "--wan")
	assertUnprivileged(t, "broker next to netem", container(t, pod.Spec, "broker").SecurityContext)

	n := container(t, pod.Spec, "netem")
	assert.Equal(t, "drip:dev", n.Image, "one image serves broker and sidecar")
	assert.Equal(t, []string{
		"netem", "--topology=/etc/drip/topology.yaml", "--name=$(POD_NAME)",
		"--dev=eth0", "--interval=10s", "--metrics-addr=:9101", "--strict", "--peer-endpointslices=" + headless,
	}, n.Args)
	sc := n.SecurityContext
	require.NotNil(t, sc)
	require.NotNil(t, sc.Capabilities)
	assert.Equal(t, []corev1.Capability{"NET_ADMIN"}, sc.Capabilities.Add, "NET_ADMIN and nothing else")
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.Equal(t, new(int64(0)), sc.RunAsUser, "added capabilities reach root processes only")
	assert.Equal(t, new(false), sc.RunAsNonRoot)
	assert.Equal(t, new(false), sc.AllowPrivilegeEscalation)
	assert.Equal(t, new(true), sc.ReadOnlyRootFilesystem)
	assert.Nil(t, sc.Privileged)
	require.Len(t, n.Ports, 1)
	assert.Equal(t, corev1.ContainerPort{Name: "netem-metrics", ContainerPort: 9101, Protocol: corev1.ProtocolTCP}, n.Ports[0])
	require.Len(t, n.VolumeMounts, 1)
	vol := volume(t, pod.Spec, n.VolumeMounts[0].Name)
	require.NotNil(t, vol.ConfigMap, "the sidecar gets the topology and not the TLS key")

	hs := get[*corev1.Service](t, m, "Service/"+headless)
	assert.True(t, slices.ContainsFunc(hs.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "netem-metrics" && p.Port == 9101 }))

	args := container(t, m.testPod(t).Spec, "selftest").Args
	assert.Subset(t, args, []string{"--broker=" + dns(0, 7000), "--broker=" + dns(4, 7000), "--broker=" + dns(7, 7000)},
		"the broker opposite the first in the ring is tested")
}

func volume(t *testing.T, spec corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
	require.GreaterOrEqual(t, i, 0, "no volume %q", name)
	return spec.Volumes[i]
}

func TestExplicitLinks(t *testing.T) {
	t.Parallel()
	topo := renderValues(t, "explicit.yaml").mesh(t)
	assertBrokers(t, topo, 5)
	assert.Equal(t, []string{"0-1", "0-2", "1-2", "2-3", "3-4"}, linkSet(t, topo))
	ms := func(n int) topology.Duration { return topology.Duration(time.Duration(n) * time.Millisecond) }
	for _, pair := range [][2]int{{0, 1}, {1, 2}, {2, 0}} {
		l := findLink(t, topo, pair[0], pair[1])
		assert.Equal(t, ms(5), l.Delay, "default link spec")
		assert.Equal(t, uint32(1), l.Weight)
		assert.Zero(t, l.Bandwidth)
	}
	slow := findLink(t, topo, 2, 3)
	assert.Equal(t, topology.Link{
		A: fullname + "-2", B: fullname + "-3", Weight: 10,
		Bandwidth: 250e3, Delay: ms(80), Jitter: ms(10), Loss: 0.01,
	}, slow, "every field overridden per link")
	assert.Zero(t, findLink(t, topo, 3, 4).Delay, "an empty field clears the default")
}

// Numbers from --set (int64) and from values files (float64) render alike;
// a bandwidth given as a plain number is bytes per second.
func TestLinkNumbers(t *testing.T) {
	t.Parallel()
	topo := render(t, "--set", "topology.link.bandwidth=1000000", "--set", "topology.link.loss=0.02", "--set", "topology.link.weight=3").mesh(t)
	for _, l := range topo.Links {
		assert.Equal(t, topology.Rate(1e6), l.Bandwidth)
		assert.InDelta(t, 0.02, float64(l.Loss), 1e-12)
		assert.Equal(t, uint32(3), l.Weight)
	}
	f := filepath.Join(t.TempDir(), "v.yaml")
	require.NoError(t, os.WriteFile(f, []byte("topology: {link: {bandwidth: 2000000, loss: 0.5}}\n"), 0o600))
	topo = render(t, "-f", f).mesh(t)
	for _, l := range topo.Links {
		assert.Equal(t, topology.Rate(2e6), l.Bandwidth, "not 2e+06")
		assert.InDelta(t, 0.5, float64(l.Loss), 1e-12)
	}
}

func TestBrokerOptions(t *testing.T) {
	t.Parallel()
	m := render(t,
		"--set", "broker.bloom.scheme=cat-v1", "--set", "broker.bloom.bits=4096", "--set", "broker.bloom.hashes=5",
		"--set", "broker.limits.maxPayload=1048576", "--set", "broker.limits.linkQueueBytes=33554432",
		"--set", "broker.limits.memoryBudget=134217728",
		"--set", "broker.costRTT=true", "--set", "broker.logLevel=debug",
		"--set", "topology.mesh=prod", "--set", "broker.extraArgs={--max-string=512}",
		"--set", "image.repository=registry.example/drip", "--set", "image.tag=v1.2.3",
		"--set", "clusterDomain=k8s.internal")
	b := container(t, m.statefulSet(t).Spec.Template.Spec, "broker")
	assert.Equal(t, "registry.example/drip:v1.2.3", b.Image)
	for _, want := range []string{"--bloom-scheme=cat-v1", "--bloom-bits=4096", "--bloom-hashes=5", "--max-payload=1048576", "--link-queue-bytes=33554432", "--memory-budget=134217728", "--cost-rtt", "--log-level=debug"} {
		assert.Contains(t, b.Args, want)
	}
	assert.Equal(t, "--max-string=512", b.Args[len(b.Args)-1], "extra arguments come last")
	assert.NotContains(t, strings.Join(b.Args, " "), "--max-filters", "unset limits keep the binary's defaults")
	plain := container(t, render(t).statefulSet(t).Spec.Template.Spec, "broker")
	assert.NotContains(t, strings.Join(plain.Args, " "), "--bloom-scheme", "an unset scheme keeps the binary's default")
	topo := m.mesh(t)
	assert.Equal(t, "prod", topo.Mesh)
	assert.Equal(t, fmt.Sprintf("%s-0.%s.%s.svc.k8s.internal:7100", fullname, headless, namespace), topo.Brokers[0].Peer)
}

// TestPeerNotSentLowat: broker.peerNotSentLowat reaches --peer-notsent-lowat,
// 0 (the kernel's default) included; unset, the binary's default holds.
func TestPeerNotSentLowat(t *testing.T) {
	t.Parallel()
	args := func(m *manifest) string {
		return strings.Join(container(t, m.statefulSet(t).Spec.Template.Spec, "broker").Args, " ")
	}
	assert.NotContains(t, args(render(t)), "--peer-notsent-lowat", "unset, the binary's default")
	assert.Contains(t, args(render(t, "--set", "broker.peerNotSentLowat=0")), "--peer-notsent-lowat=0")
	assert.Contains(t, args(render(t, "--set", "broker.peerNotSentLowat=65536")), "--peer-notsent-lowat=65536")
}

func TestTLS(t *testing.T) {
	t.Parallel()
	m := renderValues(t, "tls.yaml")
	spec := m.statefulSet(t).Spec.Template.Spec
	b := container(t, spec, "broker")
	assert.Subset(t, b.Args, []string{
		"--tls-cert=/etc/drip/tls/tls.crt", "--tls-key=/etc/drip/tls/tls.key", "--tls-ca=/etc/drip/tls/ca.crt", "--tls-client-auth",
	})
	assert.NotContains(t, b.Args, "--tls-peer-identity", "one certificate for every broker names no router")
	for name, p := range map[string]*corev1.Probe{"liveness": b.LivenessProbe, "readiness": b.ReadinessProbe} {
		assert.Nil(t, p.GRPC, "%s: kubelet's gRPC probe cannot speak TLS", name)
		require.NotNil(t, p.HTTPGet, name)
		assert.Equal(t, "metrics", p.HTTPGet.Port.String(), name)
	}
	assert.NotContains(t, m.keys(), "Secret/demo-drip-broker-tls", "no generated certificates with tls.secretName")
	cfg := volume(t, spec, b.VolumeMounts[0].Name)
	require.NotNil(t, cfg.Projected)
	var paths []string
	for _, src := range cfg.Projected.Sources {
		if src.Secret != nil {
			assert.Equal(t, "drip-tls", src.Secret.Name)
			for _, it := range src.Secret.Items {
				paths = append(paths, it.Key+"→"+it.Path)
			}
		}
	}
	assert.ElementsMatch(t, []string{"tls.crt→tls/tls.crt", "tls.key→tls/tls.key", "ca.crt→tls/ca.crt"}, paths)

	tp := m.testPod(t)
	assert.Subset(t, container(t, tp.Spec, "selftest").Args, []string{
		"--tls-ca=/etc/drip/tls/ca.crt", "--tls-cert=/etc/drip/tls/tls.crt", "--tls-key=/etc/drip/tls/tls.key",
	}, "the test presents a certificate when clients must")
	require.Len(t, tp.Spec.Volumes, 1)
	assert.Equal(t, "drip-tls", tp.Spec.Volumes[0].Secret.SecretName)

	// Without client authentication the test only verifies the brokers.
	args := container(t, render(t, "-f", "testdata/tls.yaml", "--set", "tls.clientAuth=false").testPod(t).Spec, "selftest").Args
	assert.Contains(t, args, "--tls-ca=/etc/drip/tls/ca.crt")
	assert.NotContains(t, strings.Join(args, " "), "--tls-cert")
}

// The monitors exist only where the Prometheus Operator's API does, and
// select what the chart labels.
func TestMonitoring(t *testing.T) {
	t.Parallel()
	m := renderValues(t, "monitoring.yaml", "--api-versions", monitoringAPI)
	assert.NotContains(t, m.monitors, "ServiceMonitor/"+fullname)
	pm, ok := m.monitors["PodMonitor/"+fullname]
	require.True(t, ok, "have %v", m.keys())
	assert.Equal(t, "kube-prometheus-stack", pm.Metadata.Labels["release"])
	assert.Equal(t, namespace, pm.Metadata.Namespace)
	pod := m.statefulSet(t).Spec.Template
	for k, v := range pm.Spec.Selector.MatchLabels {
		assert.Equal(t, v, pod.Labels[k], "PodMonitor selects the broker pods by %s", k)
	}
	var podPorts []string
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			podPorts = append(podPorts, p.Name)
		}
	}
	var scraped []string
	for _, e := range pm.endpoints() {
		scraped = append(scraped, e.Port)
		assert.Equal(t, "/metrics", e.Path)
		assert.Equal(t, "15s", e.Interval)
	}
	assert.Equal(t, []string{"metrics", "netem-metrics"}, scraped, "brokers and netem sidecars")
	assert.Subset(t, podPorts, scraped)

	m = renderValues(t, "monitoring.yaml", "--api-versions", monitoringAPI, "--set", "metrics.podMonitor.enabled=false",
		"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.scrapeTimeout=10s")
	assert.NotContains(t, m.monitors, "PodMonitor/"+fullname)
	sm, ok := m.monitors["ServiceMonitor/"+fullname]
	require.True(t, ok, "have %v", m.keys())
	hs := get[*corev1.Service](t, m, "Service/"+headless)
	for k, v := range sm.Spec.Selector.MatchLabels {
		assert.Equal(t, v, hs.Labels[k], "ServiceMonitor selects the headless Service by %s", k)
	}
	assert.NotEqual(t, "headless", get[*corev1.Service](t, m, "Service/"+fullname).Labels["app.kubernetes.io/component"],
		"and not the client Service, which has no metrics port")
	for _, e := range sm.endpoints() {
		assert.True(t, slices.ContainsFunc(hs.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port }), "port %s", e.Port)
		assert.Equal(t, "10s", e.ScrapeTimeout)
	}

	// Enabled, but the cluster has no Prometheus Operator.
	m = renderValues(t, "monitoring.yaml")
	assert.Empty(t, m.monitors)
	// The API is there, but the monitors are not enabled.
	m = render(t, "--api-versions", monitoringAPI)
	assert.Empty(t, m.monitors)
}

// TestValuesOfAnOlderRelease: `helm upgrade --reuse-values` renders the
// chart with the values of a release made by an older chart, which lack
// the keys added since; the drain's flags then keep the binary's defaults
// instead of becoming 0, which the broker refuses, and a release without
// the site values stays a single-site mesh.
func TestValuesOfAnOlderRelease(t *testing.T) {
	t.Parallel()
	m := render(t, "--set", "broker.drainTimeoutSeconds=null", "--set", "broker.drainOverlapSeconds=null",
		"--set", "site=null", "--set", "sites=null", "--set", "tls.meshCA=null", "--set", "service.nodePort=null", "--set", "service.externalHosts=null",
		"--skip-schema-validation")
	args := container(t, m.statefulSet(t).Spec.Template.Spec, "broker").Args
	assert.Contains(t, args, "--drain-timeout=10s")
	assert.Contains(t, args, "--drain-overlap=2s")
	assert.Contains(t, args, "--name=$(POD_NAME)")
	assertBrokers(t, m.mesh(t), 4)
	assert.Contains(t, m.keys(), "Secret/demo-drip-tls-issuers", "the generated certificates")
}

// TestPeerDiscovery: the EndpointSlices need a service account allowed to
// read them and nothing else; without them no token is mounted; with an
// operator's own account the chart creates none.
func TestPeerDiscovery(t *testing.T) {
	t.Parallel()
	m := renderValues(t, "ring-netem.yaml")
	role := get[*rbacv1.Role](t, m, "Role/"+fullname+"-endpointslices")
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list"}}}, role.Rules)
	rb := get[*rbacv1.RoleBinding](t, m, "RoleBinding/"+fullname+"-endpointslices")
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name}, rb.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: fullname, Namespace: namespace}}, rb.Subjects)
	sa := get[*corev1.ServiceAccount](t, m, "ServiceAccount/"+fullname)
	assert.Equal(t, new(false), sa.AutomountServiceAccountToken, "only the broker pods mount its token")
	pod := m.statefulSet(t).Spec.Template.Spec
	assert.Equal(t, sa.Name, pod.ServiceAccountName)
	for _, c := range []string{"broker", "netem"} {
		assert.Contains(t, container(t, pod, c).Args, "--peer-endpointslices="+headless, c)
	}

	m = renderValues(t, "ring-netem.yaml", "--set", "peerDiscovery.endpointSlices=false")
	pod = m.statefulSet(t).Spec.Template.Spec
	assert.Equal(t, new(false), pod.AutomountServiceAccountToken)
	assert.Empty(t, pod.ServiceAccountName)
	for _, c := range []string{"broker", "netem"} {
		assert.NotContains(t, strings.Join(container(t, pod, c).Args, " "), "--peer-endpointslices", c)
	}
	for _, k := range m.keys() {
		assert.NotRegexp(t, "^(ServiceAccount|Role|RoleBinding)/", k)
	}

	m = render(t, "--set", "peerDiscovery.serviceAccountName=mesh-reader")
	pod = m.statefulSet(t).Spec.Template.Spec
	assert.Equal(t, "mesh-reader", pod.ServiceAccountName)
	assert.Equal(t, new(true), pod.AutomountServiceAccountToken)
	for _, k := range m.keys() {
		assert.NotRegexp(t, "^(ServiceAccount|Role|RoleBinding)/", k, "the operator's own account")
	}
}

func TestDashboards(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(chartDir, "dashboards", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "the chart ships dashboards")
	m := renderValues(t, "monitoring.yaml")
	var found int
	for _, f := range files {
		base := filepath.Base(f)
		key := "ConfigMap/" + fullname + "-dashboard-" + strings.TrimSuffix(base, ".json")
		cm := get[*corev1.ConfigMap](t, m, key)
		found++
		assert.Equal(t, "1", cm.Labels["grafana_dashboard"], key)
		assert.Equal(t, "drip", cm.Annotations["grafana_folder"], key)
		want, err := os.ReadFile(f)
		require.NoError(t, err)
		require.Contains(t, cm.Data, base)
		assert.Equal(t, strings.TrimRight(string(want), "\n"), cm.Data[base], "%s ships unchanged", base)
		assert.True(t, json.Valid([]byte(cm.Data[base])), "%s is JSON", base)
	}
	var dashboards int
	for k := range m.objects {
		if strings.Contains(k, "-dashboard-") {
			dashboards++
		}
	}
	assert.Equal(t, found, dashboards, "one ConfigMap per dashboard file")

	m = render(t, "--set", "dashboards.enabled=true", "--set", "dashboards.label=my_dashboards",
		"--set", "dashboards.labelValue=yes", "--set", "dashboards.namespace=monitoring")
	cm := get[*corev1.ConfigMap](t, m, "ConfigMap/"+fullname+"-dashboard-"+strings.TrimSuffix(filepath.Base(files[0]), ".json"))
	assert.Equal(t, "yes", cm.Labels["my_dashboards"])
	assert.NotContains(t, cm.Labels, "grafana_dashboard")
	assert.Equal(t, "monitoring", cm.Namespace)
}

// Mistakes in values fail the rendering with a message that names them,
// before anything reaches the cluster: the values schema catches misspelt
// and mistyped values, the templates what spans values. The templates'
// checks stand on their own too (--skip-schema-validation).
func TestValueErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		set      []string
		want     string // the message
		template string // the templates' message when the schema is skipped, if the schema reports it
	}{
		{[]string{"topology.shape=star"}, "at '/topology/shape': value must be one of 'fullmesh', 'ring', 'line', 'explicit'",
			`topology.shape "star": want fullmesh, ring, line or explicit`},
		{[]string{"topology.shap=ring"}, "at '/topology': additional properties 'shap' not allowed", ""},
		{[]string{"netem.interval=10"}, "at '/netem/interval': got number, want string", ""},
		{[]string{"broker.bloom.scheme=cat-v9"}, "at '/broker/bloom/scheme': value must be one of '', 'cat-v1', 'cat-v2'", ""},
		{[]string{"topology.links[0].a=0", "topology.links[0].b=1"}, `topology.links is only for topology.shape=explicit, but shape is "ring"`, ""},
		{[]string{"topology.shape=explicit", "topology.links[0].a=0", "topology.links[0].b=4"}, "topology.links[0]: 0–4 names a broker outside 0..3", ""},
		{[]string{"topology.shape=explicit", "topology.links[0].a=2", "topology.links[0].b=2"}, "links broker 2 to itself", ""},
		{[]string{"topology.shape=explicit", "topology.links[0].a=1", "topology.links[0].b=2", "topology.links[1].a=2", "topology.links[1].b=1"},
			"topology.links[1]: 2–1 is already linked by topology.links[0]", ""},
		{[]string{"topology.shape=explicit", "topology.links[0].a=1", "topology.links[0].b=2", "topology.links[0].dealy=5ms"},
			"at '/topology/links/0': additional properties 'dealy' not allowed", `unknown field "dealy"`},
		{[]string{"topology.shape=explicit", "topology.links[0].a=b0", "topology.links[0].b=2"}, "a and b must be broker ordinals", ""},
		{[]string{"topology.shape=explicit", "topology.links[0].b=2"}, "at '/topology/links/0': missing property 'a'", "a and b (broker ordinals) are required"},
		{[]string{"topology.link.weight=0"}, "weight 0 is not a positive integer", ""},
		{[]string{"replicaCount=0"}, "at '/replicaCount': minimum: got 0, want 1", "replicaCount 0: want at least 1 broker"},
		{[]string{"topology.mesh=Prod_1"}, `topology.mesh "Prod_1": the generated certificates name each router as the DNS name <id>.router.<mesh>.drip.internal, so the mesh must be a DNS label`, ""},
		{[]string{"selftest.ordinals={0,4}"}, "selftest.ordinals: 4 is not a broker ordinal (0..3)", ""},
		{[]string{"metrics.podMonitor.enabled=true", "metrics.serviceMonitor.enabled=true"},
			"metrics.podMonitor.enabled and metrics.serviceMonitor.enabled are both true: enable one of them, not both", ""},
		{[]string{"terminationGracePeriodSeconds=30"}, "terminationGracePeriodSeconds 30 is too short for broker.drainTimeoutSeconds 20", ""},
		{[]string{"broker.drainTimeoutSeconds=30"}, "terminationGracePeriodSeconds 40 is too short for broker.drainTimeoutSeconds 30: a broker drains for up to that long after SIGTERM and then gives its client, peer and metrics servers up to 5 s each to stop, so it needs at least 45", ""},
		{[]string{"broker.drainTimeoutSeconds=0"}, "at '/broker/drainTimeoutSeconds': minimum: got 0, want 1", ""},
		{[]string{"broker.drainOverlapSeconds=10"}, "broker.drainOverlapSeconds 10 does not fit broker.drainTimeoutSeconds 20: subscribers get half of the drain to move, and the overlap must leave a second of it to subscribe elsewhere; raise drainTimeoutSeconds to at least 22", ""},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			args := []string{"template", release, chartDir}
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			_, err := runHelm(t, args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			if tt.template != "" {
				_, err := runHelm(t, append(args, "--skip-schema-validation")...)
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.template)
			}
		})
	}
}

func TestLint(t *testing.T) {
	t.Parallel()
	runs := [][]string{nil}
	files, err := filepath.Glob("testdata/*.yaml")
	require.NoError(t, err)
	for _, f := range files {
		runs = append(runs, []string{"-f", f})
	}
	for _, extra := range runs {
		out, err := runHelm(t, append([]string{"lint", "--strict", chartDir}, extra...)...)
		require.NoError(t, err, "%v\n%s", extra, out)
		assert.Contains(t, out, "0 chart(s) failed", "%v", extra)
	}
}
