package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dripmesh/drip/internal/cli"
	"github.com/dripmesh/drip/internal/topology"
)

// The release and the names the chart derives from it: fullnameOverride
// pins them, so the suite need not repeat the chart's naming rules.
const (
	release      = "drip"
	headless     = release + "-headless"
	topologyCM   = release + "-topology"
	clientPort   = 7000 // the chart's ports.client
	metricsPort  = 9100 // the chart's ports.metrics
	netemPort    = 9101 // the chart's netem.metricsPort
	brokerLabels = "app.kubernetes.io/instance=" + release + ",app.kubernetes.io/component=broker"
)

// meshSpec is the mesh the suite installs.
type meshSpec struct {
	Brokers int
	Shape   string // fullmesh, ring or line (explicit needs links no flag can give)
	Netem   bool   // run the netem sidecar
	// Every link's WAN properties, in the topology format's units; empty: none.
	Bandwidth, Delay, Jitter, Loss string
	// DrainOverlapSeconds is the chart's broker.drainOverlapSeconds; 0
	// leaves the chart's default.
	DrainOverlapSeconds int
}

// defaultMesh is four brokers in a ring, so that a message crosses up to
// two links, on 1 MB/s links with 10 ms one-way delay (Carzaniga09 §5.2's
// links are 1 MBps).
func defaultMesh() meshSpec {
	return meshSpec{Brokers: 4, Shape: "ring", Netem: true, Bandwidth: "1MBps", Delay: "10ms"}
}

func (m meshSpec) validate() error {
	if m.Brokers < 2 {
		return fmt.Errorf("-brokers %d: want at least 2, a mesh to route through", m.Brokers)
	}
	if !slices.Contains([]string{"fullmesh", "ring", "line"}, m.Shape) {
		return fmt.Errorf("-shape %q: want fullmesh, ring or line", m.Shape)
	}
	if m.Bandwidth != "" {
		if _, err := topology.ParseRate(m.Bandwidth); err != nil {
			return fmt.Errorf("-bandwidth: %w", err)
		}
	}
	for flag, v := range map[string]string{"-delay": m.Delay, "-jitter": m.Jitter} {
		if v == "" {
			continue
		}
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return fmt.Errorf("%s %q: want a duration like 10ms", flag, v)
		}
	}
	return nil
}

// brokerName is the pod (and topology) name of broker i.
func brokerName(i int) string { return fmt.Sprintf("%s-%d", release, i) }

// brokerAddr is broker i's client address by its own DNS name, so that the
// bench's clients land on every broker and traffic must cross the mesh
// (the client Service would let kube-proxy choose).
func brokerAddr(namespace string, i int) string {
	return fmt.Sprintf("%s.%s.%s.svc:%d", brokerName(i), headless, namespace, clientPort)
}

// imageRef is an image reference split the way the chart wants it.
type imageRef struct{ Repository, Tag string }

func (r imageRef) String() string { return r.Repository + ":" + r.Tag }

// parseImageRef splits repository[:tag]; the tag defaults to latest, as
// the container runtimes do. Digests are refused: the chart takes a tag.
func parseImageRef(s string) (imageRef, error) {
	if s == "" {
		return imageRef{}, errors.New("empty image reference")
	}
	if strings.Contains(s, "@") {
		return imageRef{}, fmt.Errorf("image %q: digests are not supported, the chart takes repository:tag", s)
	}
	repo, tag := s, "latest"
	// A colon after the last slash separates the tag; one before it is a
	// registry's port.
	if i := strings.LastIndex(s, ":"); i > strings.LastIndex(s, "/") {
		repo, tag = s[:i], s[i+1:]
	}
	if repo == "" || tag == "" || strings.HasSuffix(repo, "/") {
		return imageRef{}, fmt.Errorf("image %q: want repository[:tag], e.g. drip:dev", s)
	}
	return imageRef{Repository: repo, Tag: tag}, nil
}

// installValues are the chart values of one install. The pull policy is
// Never when the suite put the image on the nodes itself, so that a
// missing image fails at once instead of being pulled from somewhere else.
func installValues(m meshSpec, img imageRef, pullPolicy corev1.PullPolicy) map[string]any {
	link := map[string]any{}
	for k, v := range map[string]string{"bandwidth": m.Bandwidth, "delay": m.Delay, "jitter": m.Jitter, "loss": m.Loss} {
		if v != "" {
			link[k] = v
		}
	}
	v := map[string]any{
		"fullnameOverride": release,
		"replicaCount":     m.Brokers,
		"image": map[string]any{
			"repository": img.Repository,
			"tag":        img.Tag,
			"pullPolicy": string(pullPolicy),
		},
		"topology": map[string]any{"shape": m.Shape, "link": link},
		// Not strict: a node without sch_netem shapes bandwidth only and says
		// so in drip_netem_unsupported, which the suite reports.
		"netem": map[string]any{"enabled": m.Netem, "strict": false},
		// A fresh cluster may take a while to route; the suite has already
		// waited for convergence, so this only bounds a hang.
		"selftest": map[string]any{"timeout": "120s"},
	}
	if m.DrainOverlapSeconds > 0 {
		v["broker"] = map[string]any{"drainOverlapSeconds": m.DrainOverlapSeconds}
	}
	return v
}

// valuesYAML renders values for `helm install -f`.
func valuesYAML(v map[string]any) ([]byte, error) { return yaml.Marshal(v) }

// expectedDegree is how many neighbours broker i of n has in shape.
func expectedDegree(shape string, n, i int) int {
	switch {
	case n < 2:
		return 0
	case shape == "fullmesh":
		return n - 1
	case shape == "ring" && n > 2:
		return 2
	case shape == "line" && i > 0 && i < n-1:
		return 2
	default: // a ring of two is a line of two; a line's ends
		return 1
	}
}

// benchSpec is the workload the bench Job runs.
type benchSpec struct {
	Rate        float64 // total messages per second
	Duration    time.Duration
	Warmup      time.Duration
	Subscribers int
	Publishers  int
	MinDelivery float64 // least Delivered/Ideal
}

// defaultBench is the single-constraint workload of Carzaniga09 §5.2.1 (80
// subscribers, about 5% replication) at a rate far below the links'
// capacity, where nearly everything must arrive.
func defaultBench() benchSpec {
	return benchSpec{Rate: 200, Duration: 20 * time.Second, Warmup: 5 * time.Second, Subscribers: 80, Publishers: 80, MinDelivery: 0.99}
}

func (b benchSpec) validate() error {
	switch {
	case b.Rate <= 0:
		return fmt.Errorf("-rate %v: want a positive rate", b.Rate)
	case b.Duration <= 0:
		return fmt.Errorf("-duration %v: want a positive duration", b.Duration)
	case b.Subscribers < 1 || b.Publishers < 1:
		return fmt.Errorf("-subscribers %d, -publishers %d: want at least one of each", b.Subscribers, b.Publishers)
	case b.MinDelivery < 0 || b.MinDelivery > 1:
		return fmt.Errorf("-min-delivery %v: want a fraction in [0, 1]", b.MinDelivery)
	}
	return nil
}

// benchDrain is drip bench's default --drain; with the warmup and the
// duration it bounds how long the Job runs.
const benchDrain = 10 * time.Second

// timeout bounds the bench Job: the run itself, plus connecting and the
// pod's start.
func (b benchSpec) timeout() time.Duration { return b.Warmup + b.Duration + benchDrain + 2*time.Minute }

// benchArgs are the arguments of `drip bench` against brokers. The report
// goes to standard output, the only thing there with -q; the summary line
// goes to standard error, and both end up in the pod's log.
func benchArgs(b benchSpec, brokers []string) []string {
	return []string{
		"bench",
		"--broker=" + strings.Join(brokers, ","),
		"--workload=single",
		"--seed=1",
		"--subscribers=" + strconv.Itoa(b.Subscribers),
		"--publishers=" + strconv.Itoa(b.Publishers),
		"--mode=poisson",
		"--rate=" + strconv.FormatFloat(b.Rate, 'f', -1, 64),
		"--duration=" + b.Duration.String(),
		"--warmup=" + b.Warmup.String(),
		"--drain=" + benchDrain.String(),
		// The JSON report on standard output, and nothing else: -q
		// leaves out the progress lines and the summary.
		"--json",
		"-q",
		// The chart's mutual TLS: the client certificate it generated.
		"--tls-ca=" + clientTLSDir + "/ca.crt",
		"--tls-cert=" + clientTLSDir + "/tls.crt",
		"--tls-key=" + clientTLSDir + "/tls.key",
	}
}

// clientTLSDir is where bench Jobs mount clientTLSSecret, the client
// certificate and broker CA the chart generates (tls.enabled, its default).
const (
	clientTLSDir    = "/etc/drip/tls"
	clientTLSSecret = release + "-client-tls"
)

// benchJob is the Job that runs the bench once, as unprivileged as the
// brokers; a failed bench is not retried, its log is the result.
func benchJob(name string, img imageRef, pullPolicy corev1.PullPolicy, args []string, deadline time.Duration) *batchv1.Job {
	labels := map[string]string{"app.kubernetes.io/part-of": "drip-e2e", "app.kubernetes.io/component": "bench", "drip-e2e/job": name}
	yes, no := true, false
	deadlineSeconds := int64(deadline / time.Second)
	backoff := int32(0)
	uid := int64(65532)
	secretMode := int32(0o440) // owner and fsGroup read
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit:          &backoff,
			ActiveDeadlineSeconds: &deadlineSeconds,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: &no,
					EnableServiceLinks:           &no,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   &yes,
						RunAsUser:      &uid,
						RunAsGroup:     &uid,
						FSGroup:        &uid,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "bench",
						Image:           img.String(),
						ImagePullPolicy: pullPolicy,
						Args:            args,
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: &no,
							ReadOnlyRootFilesystem:   &yes,
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: clientTLSDir, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{
						Secret: &corev1.SecretVolumeSource{SecretName: clientTLSSecret, DefaultMode: &secretMode},
					}}},
				},
			},
		},
	}
}

func TestParseImageRef(t *testing.T) {
	tests := []struct {
		in      string
		want    imageRef
		wantErr string
	}{
		{in: "drip:dev", want: imageRef{"drip", "dev"}},
		{in: "drip", want: imageRef{"drip", "latest"}},
		{in: "ghcr.io/dripmesh/drip:v1.2.3", want: imageRef{"ghcr.io/dripmesh/drip", "v1.2.3"}},
		{in: "localhost:5000/drip", want: imageRef{"localhost:5000/drip", "latest"}},
		{in: "localhost:5000/drip:dev", want: imageRef{"localhost:5000/drip", "dev"}},
		{in: "", wantErr: "empty"},
		{in: "drip:", wantErr: "want repository[:tag]"},
		{in: ":dev", wantErr: "want repository[:tag]"},
		{in: "localhost:5000/", wantErr: "want repository[:tag]"},
		{in: "drip@sha256:0123", wantErr: "digests are not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseImageRef(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			round, err := parseImageRef(got.String())
			require.NoError(t, err)
			assert.Equal(t, got, round, "String and parseImageRef round-trip")
		})
	}
}

func TestExpectedDegree(t *testing.T) {
	tests := []struct {
		shape string
		n     int
		want  []int // per broker
	}{
		{"ring", 4, []int{2, 2, 2, 2}},
		{"ring", 3, []int{2, 2, 2}},
		{"ring", 2, []int{1, 1}},
		{"line", 4, []int{1, 2, 2, 1}},
		{"line", 2, []int{1, 1}},
		{"fullmesh", 4, []int{3, 3, 3, 3}},
		{"fullmesh", 1, []int{0}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.shape, tt.n), func(t *testing.T) {
			got := make([]int, tt.n)
			for i := range got {
				got[i] = expectedDegree(tt.shape, tt.n, i)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSpecValidation(t *testing.T) {
	require.NoError(t, defaultMesh().validate())
	require.NoError(t, defaultBench().validate())
	badMesh := map[string]func(*meshSpec){
		"one broker":      func(m *meshSpec) { m.Brokers = 1 },
		"explicit":        func(m *meshSpec) { m.Shape = "explicit" },
		"bandwidth":       func(m *meshSpec) { m.Bandwidth = "fast" },
		"delay":           func(m *meshSpec) { m.Delay = "10" },
		"negative jitter": func(m *meshSpec) { m.Jitter = "-1ms" },
	}
	for name, mutate := range badMesh {
		m := defaultMesh()
		mutate(&m)
		assert.Error(t, m.validate(), name)
	}
	badBench := map[string]func(*benchSpec){
		"rate":         func(b *benchSpec) { b.Rate = 0 },
		"duration":     func(b *benchSpec) { b.Duration = 0 },
		"subscribers":  func(b *benchSpec) { b.Subscribers = 0 },
		"min-delivery": func(b *benchSpec) { b.MinDelivery = 1.5 },
	}
	for name, mutate := range badBench {
		b := defaultBench()
		mutate(&b)
		assert.Error(t, b.validate(), name)
	}
}

func TestInstallValues(t *testing.T) {
	m := defaultMesh()
	m.Jitter = "2ms"
	v := installValues(m, imageRef{"drip", "dev"}, corev1.PullNever)
	out, err := valuesYAML(v)
	require.NoError(t, err)

	var back struct {
		FullnameOverride string `yaml:"fullnameOverride"`
		ReplicaCount     int    `yaml:"replicaCount"`
		Image            struct {
			Repository, Tag string
			PullPolicy      string `yaml:"pullPolicy"`
		}
		Topology struct {
			Shape string
			Link  map[string]string
		}
		Netem struct{ Enabled, Strict bool }
	}
	require.NoError(t, yaml.Unmarshal(out, &back))
	assert.Equal(t, release, back.FullnameOverride)
	assert.Equal(t, 4, back.ReplicaCount)
	assert.Equal(t, "drip", back.Image.Repository)
	assert.Equal(t, "dev", back.Image.Tag)
	assert.Equal(t, "Never", back.Image.PullPolicy)
	assert.Equal(t, "ring", back.Topology.Shape)
	assert.Equal(t, map[string]string{"bandwidth": "1MBps", "delay": "10ms", "jitter": "2ms"}, back.Topology.Link,
		"empty WAN properties are left to the chart's defaults")
	assert.True(t, back.Netem.Enabled)
	assert.False(t, back.Netem.Strict, "strict would crash-loop the sidecar on nodes without sch_netem")
}

// TestInstallValuesRenderWithTheChart renders the chart with the values
// the suite installs, for every shape, and checks what the suite relies
// on: the names it derives from the release, the image and pull policy,
// the netem sidecar, and a topology whose neighbours are expectedDegree's.
func TestInstallValuesRenderWithTheChart(t *testing.T) {
	helm, err := findHelm()
	if err != nil {
		t.Skipf("renders with the helm binary, which make tools installs (CI runs it first): %v", err)
	}
	root, err := repoRoot()
	require.NoError(t, err)
	chart := filepath.Join(root, "deploy", "helm", "drip")
	if _, err := os.Stat(filepath.Join(chart, "Chart.yaml")); err != nil {
		t.Skipf("skipping: no chart at %s", chart)
	}
	for _, shape := range []string{"ring", "line", "fullmesh"} {
		t.Run(shape, func(t *testing.T) {
			m := defaultMesh()
			m.Shape, m.Brokers = shape, 5
			values, err := valuesYAML(installValues(m, imageRef{"example.com/drip", "e2e"}, corev1.PullNever))
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "values.yaml")
			require.NoError(t, os.WriteFile(path, values, 0o600))
			cmd := exec.Command(helm, "template", release, chart, "--namespace", "e2e-ns", "--values", path)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, "helm template: %s", stderr.String())
			checkRendered(t, out, m)
		})
	}
}

func checkRendered(t *testing.T, manifests []byte, m meshSpec) {
	t.Helper()
	type object struct {
		Kind     string
		Metadata struct{ Name string }
		Spec     struct {
			Replicas    int
			ServiceName string `yaml:"serviceName"`
			Template    struct {
				Spec struct {
					Containers []struct {
						Name, Image     string
						ImagePullPolicy string `yaml:"imagePullPolicy"`
						Args            []string
					}
				}
			}
		}
		Data map[string]string
	}
	var sts, cm, clientTLS *object
	dec := yaml.NewDecoder(bytes.NewReader(manifests))
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		switch {
		case o.Kind == "StatefulSet" && o.Metadata.Name == release:
			sts = &o
		case o.Kind == "ConfigMap" && o.Metadata.Name == topologyCM:
			cm = &o
		case o.Kind == "Secret" && o.Metadata.Name == clientTLSSecret:
			clientTLS = &o
		}
	}
	require.NotNil(t, clientTLS, "no Secret %q for the bench Jobs in the rendered chart", clientTLSSecret)
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		assert.NotEmpty(t, clientTLS.Data[k], "%s of %s", k, clientTLSSecret)
	}
	require.NotNil(t, sts, "no StatefulSet %q in the rendered chart", release)
	require.NotNil(t, cm, "no ConfigMap %q in the rendered chart", topologyCM)
	assert.Equal(t, m.Brokers, sts.Spec.Replicas)
	assert.Equal(t, headless, sts.Spec.ServiceName)
	var names []string
	for _, c := range sts.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
		if c.Name == "broker" {
			assert.Subset(t, c.Args, []string{"--tls-peer-identity", "--tls-client-auth"}, "the suite runs the mesh with mutual TLS")
		}
		assert.Equal(t, "example.com/drip:e2e", c.Image, c.Name)
		assert.Equal(t, "Never", c.ImagePullPolicy, c.Name)
	}
	assert.Equal(t, []string{"broker", "netem"}, names)

	topo, err := topology.Parse([]byte(cm.Data["topology.yaml"]))
	require.NoError(t, err)
	require.Len(t, topo.Brokers, m.Brokers)
	for i := range m.Brokers {
		require.Equal(t, brokerName(i), topo.Brokers[i].Name)
		assert.Len(t, topo.Neighbors(brokerName(i)), expectedDegree(m.Shape, m.Brokers, i), "neighbours of %s", brokerName(i))
		assert.True(t, strings.HasPrefix(topo.Brokers[i].Client, brokerName(i)+"."+headless+".e2e-ns.svc"),
			"broker %d's client address %q is not the one brokerAddr gives", i, topo.Brokers[i].Client)
	}
	for _, l := range topo.Links {
		assert.Equal(t, topology.Rate(1e6), l.Bandwidth, "link %s–%s", l.A, l.B)
		assert.Equal(t, topology.Duration(10*time.Millisecond), l.Delay, "link %s–%s", l.A, l.B)
	}
}

func TestBenchJob(t *testing.T) {
	b := defaultBench()
	brokers := []string{brokerAddr("ns", 0), brokerAddr("ns", 3)}
	args := benchArgs(b, brokers)
	job := benchJob("bench-1", imageRef{"drip", "dev"}, corev1.PullNever, args, b.timeout())

	require.Equal(t, int32(0), *job.Spec.BackoffLimit, "a failed bench is the result, not something to retry")
	require.Equal(t, int64(b.timeout()/time.Second), *job.Spec.ActiveDeadlineSeconds)
	pod := job.Spec.Template.Spec
	require.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, "drip:dev", c.Image)
	assert.Equal(t, corev1.PullNever, c.ImagePullPolicy)
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, job.Labels["drip-e2e/job"], job.Spec.Template.Labels["drip-e2e/job"], "the suite finds the pod by this label")
	assert.Equal(t, "drip-3.drip-headless.ns.svc:7000", brokers[1])
	require.Len(t, pod.Volumes, 1)
	assert.Equal(t, "drip-client-tls", pod.Volumes[0].Secret.SecretName, "the chart's generated client certificate")
	assert.Equal(t, "/etc/drip/tls", c.VolumeMounts[0].MountPath)

	// The arguments must be ones drip bench accepts: parse them with the
	// real command, without running it.
	root := cli.NewRoot()
	cmd, rest, err := root.Find(c.Args)
	require.NoError(t, err)
	require.Equal(t, "bench", cmd.Name())
	require.NoError(t, cmd.ParseFlags(rest))
	for flag, want := range map[string]string{
		"broker":      "[drip-0.drip-headless.ns.svc:7000,drip-3.drip-headless.ns.svc:7000]",
		"rate":        "200/s",
		"duration":    "20s",
		"warmup":      "5s",
		"drain":       benchDrain.String(),
		"subscribers": "80",
		"quiet":       "true",
		"json":        "true",
		"report":      "", // standard output
		"tls-cert":    "/etc/drip/tls/tls.crt",
	} {
		assert.Equal(t, want, cmd.Flags().Lookup(flag).Value.String(), "--%s", flag)
	}
}

func TestInstallValuesDrainOverlap(t *testing.T) {
	m := defaultMesh()
	assert.NotContains(t, installValues(m, imageRef{"drip", "dev"}, corev1.PullNever), "broker", "the chart's default")
	m.DrainOverlapSeconds = 4
	v := installValues(m, imageRef{"drip", "dev"}, corev1.PullNever)
	assert.Equal(t, map[string]any{"drainOverlapSeconds": 4}, v["broker"])
}
