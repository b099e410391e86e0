// Package helm_test renders the drip Helm chart (deploy/helm/drip) with
// `helm template` for the values scenarios the docs show, decodes every
// document strictly against the Kubernetes API types, and checks the
// properties the mesh depends on.
package helm_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

const (
	chartDir  = "drip"
	release   = "demo"
	namespace = "mesh"
	fullname  = "demo-drip"
	headless  = "demo-drip-headless"
	// monitoringAPI is what the Prometheus Operator's CRDs add to a
	// cluster; the monitors are rendered only when it is there.
	monitoringAPI = "monitoring.coreos.com/v1"
	// certManagerAPI is cert-manager's, for tls.meshCA.issuerRef.
	certManagerAPI = "cert-manager.io/v1"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm returns the helm binary: from PATH, else where `make tools` installs
// it. CI must have it; locally the chart tests skip without it.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if helmPath, helmErr = exec.LookPath("helm"); helmErr == nil {
			return
		}
		out, err := exec.Command("go", "env", "GOPATH").Output()
		if err != nil {
			helmErr = fmt.Errorf("helm is not on PATH and go env GOPATH failed: %w", err)
			return
		}
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", "helm")
			if _, err := os.Stat(p); err == nil {
				helmPath, helmErr = p, nil
				return
			}
		}
		helmErr = errors.New("helm is neither on PATH nor in $(go env GOPATH)/bin")
	})
	if helmErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v; CI installs it with `make tools`", helmErr)
		}
		t.Skipf("skipping chart test: %v (install it with `make tools`)", helmErr)
	}
	return helmPath
}

// runHelm runs helm and returns its standard output, or its error with
// standard error.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// manifest is one rendering of the chart.
type manifest struct {
	objects      map[string]runtime.Object // by "Kind/name"
	monitors     map[string]monitor        // PodMonitors and ServiceMonitors by "Kind/name"
	certificates map[string]certificate    // cert-manager Certificates by "Certificate/name"
}

// decoder decodes the built-in kinds strictly: unknown or duplicate fields
// are errors, so a misspelt or misplaced field cannot pass unnoticed.
var decoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// objectHead is what every rendered object starts with.
type objectHead struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
}

// monitor is the part of the Prometheus Operator's PodMonitor and
// ServiceMonitor the chart renders; the CRDs' Go types are not a dependency
// here, so the fields are checked against this, strictly.
type monitor struct {
	objectHead `yaml:",inline"`
	Spec       struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		PodMetricsEndpoints []endpoint `yaml:"podMetricsEndpoints"` // PodMonitor
		Endpoints           []endpoint `yaml:"endpoints"`           // ServiceMonitor
	} `yaml:"spec"`
}

// certificate is the part of cert-manager's Certificate the chart renders,
// checked strictly as monitor is.
type certificate struct {
	objectHead `yaml:",inline"`
	Spec       struct {
		SecretName  string   `yaml:"secretName"`
		CommonName  string   `yaml:"commonName"`
		DNSNames    []string `yaml:"dnsNames"`
		IPAddresses []string `yaml:"ipAddresses"`
		URIs        []string `yaml:"uris"`
		Usages      []string `yaml:"usages"`
		PrivateKey  struct {
			Algorithm      string `yaml:"algorithm"`
			Size           int    `yaml:"size"`
			RotationPolicy string `yaml:"rotationPolicy"`
		} `yaml:"privateKey"`
		IssuerRef struct {
			Name  string `yaml:"name"`
			Kind  string `yaml:"kind"`
			Group string `yaml:"group"`
		} `yaml:"issuerRef"`
	} `yaml:"spec"`
}

type endpoint struct {
	Port          string `yaml:"port"`
	Path          string `yaml:"path"`
	Interval      string `yaml:"interval"`
	ScrapeTimeout string `yaml:"scrapeTimeout"`
}

// endpoints are the monitor's scrape endpoints, whichever kind it is.
func (m monitor) endpoints() []endpoint {
	if m.Kind == "PodMonitor" {
		return m.Spec.PodMetricsEndpoints
	}
	return m.Spec.Endpoints
}

// render runs helm template on the chart and decodes the result.
func render(t *testing.T, args ...string) *manifest {
	t.Helper()
	out, err := runHelm(t, append([]string{"template", release, chartDir, "--namespace", namespace}, args...)...)
	require.NoError(t, err)
	m, err := decodeManifest(out)
	require.NoError(t, err)
	return m
}

// renderValues renders with a values file from testdata.
func renderValues(t *testing.T, file string, args ...string) *manifest {
	t.Helper()
	return render(t, append([]string{"-f", filepath.Join("testdata", file)}, args...)...)
}

func decodeManifest(out string) (*manifest, error) {
	m := &manifest{objects: map[string]runtime.Object{}, monitors: map[string]monitor{}, certificates: map[string]certificate{}}
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return nil, err
		}
		var head objectHead
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("%w in\n%s", err, doc)
		}
		if head.Kind == "" {
			continue // comments only
		}
		key := head.Kind + "/" + head.Metadata.Name
		if _, dup := m.objects[key]; dup {
			return nil, fmt.Errorf("%s rendered twice", key)
		}
		if head.APIVersion == certManagerAPI {
			var c certificate
			dec := yaml.NewDecoder(bytes.NewReader(doc))
			dec.KnownFields(true)
			if err := dec.Decode(&c); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			if c.Kind != "Certificate" || c.Spec.SecretName == "" || c.Spec.IssuerRef.Name == "" {
				return nil, fmt.Errorf("%s: a Certificate with spec.secretName and spec.issuerRef.name is expected", key)
			}
			m.certificates[key] = c
			continue
		}
		if head.APIVersion == monitoringAPI {
			mon, err := decodeMonitor(doc)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			m.monitors[key] = mon
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		m.objects[key] = obj
	}
}

func decodeMonitor(doc []byte) (monitor, error) {
	var mon monitor
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&mon); err != nil {
		return mon, err
	}
	if mon.Kind != "PodMonitor" && mon.Kind != "ServiceMonitor" {
		return mon, fmt.Errorf("unexpected kind %q in %s", mon.Kind, monitoringAPI)
	}
	if mon.Metadata.Name == "" || len(mon.Spec.Selector.MatchLabels) == 0 || len(mon.endpoints()) == 0 {
		return mon, errors.New("metadata.name, spec.selector and at least one endpoint are required")
	}
	for i, e := range mon.endpoints() {
		if e.Port == "" {
			return mon, fmt.Errorf("endpoint %d has no port", i)
		}
	}
	return mon, nil
}

// keys lists the rendered objects, monitors included.
func (m *manifest) keys() []string {
	var ks []string
	for k := range m.objects {
		ks = append(ks, k)
	}
	for k := range m.monitors {
		ks = append(ks, k)
	}
	for k := range m.certificates {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func get[T runtime.Object](t *testing.T, m *manifest, key string) T {
	t.Helper()
	obj, ok := m.objects[key]
	require.True(t, ok, "%s not rendered; have %v", key, m.keys())
	typed, ok := obj.(T)
	require.True(t, ok, "%s is a %T", key, obj)
	return typed
}

func (m *manifest) statefulSet(t *testing.T) *appsv1.StatefulSet {
	return get[*appsv1.StatefulSet](t, m, "StatefulSet/"+fullname)
}

func (m *manifest) testPod(t *testing.T) *corev1.Pod {
	return get[*corev1.Pod](t, m, "Pod/"+fullname+"-selftest")
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == name })
	require.GreaterOrEqual(t, i, 0, "no container %q", name)
	return spec.Containers[i]
}

// dns is broker i's address on port as the topology and the test hook
// name it.
func dns(i, port int) string {
	return fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local:%d", fullname, i, headless, namespace, port)
}

// The harness itself: a misspelt field must fail to decode, or every
// "decodes strictly" below would prove nothing.
func TestDecoderIsStrict(t *testing.T) {
	_, err := decodeManifest("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {publishNotReadyAdresses: true}\n")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "publishNotReadyAdresses")
	_, err = decodeManifest("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {clusterIP: None, clusterIP: None}\n")
	assert.Error(t, err, "duplicate field")
	_, err = decodeManifest("apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata: {name: x}\nspec: {selector: {matchLabels: {a: b}}, podMetricsEndpoints: [{port: m, intervall: 5s}]}\n")
	assert.ErrorContains(t, err, "intervall")
	_, err = decodeManifest("apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\nspec: {selector: {matchLabels: {a: b}}}\n")
	assert.ErrorContains(t, err, "at least one endpoint")
	m, err := decodeManifest("---\n# Source: nothing\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	require.NoError(t, err)
	assert.Equal(t, []string{"ConfigMap/x"}, m.keys())
}
