package helm_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// apiServer is the part of a Kubernetes API server that Helm's lookup
// reads: the core group's discovery and Secrets by name. `helm template
// --dry-run=server` against it renders what an install or upgrade renders
// in a cluster holding those Secrets, which plain `helm template` cannot:
// its lookups find nothing.
type apiServer struct {
	kubeconfig string
	mu         sync.Mutex
	secrets    map[string]*corev1.Secret // by namespace/name
}

func newAPIServer(t *testing.T, secrets ...*corev1.Secret) *apiServer {
	t.Helper()
	a := &apiServer{secrets: map[string]*corev1.Secret{}}
	a.put(secrets...)
	srv := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(srv.Close)
	a.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: fake, user: {}}]
contexts: [{name: fake, context: {cluster: fake, user: fake}}]
current-context: fake
`, srv.URL)
	require.NoError(t, os.WriteFile(a.kubeconfig, []byte(cfg), 0o600))
	return a
}

// put stores Secrets, replacing those of the same name.
func (a *apiServer) put(secrets ...*corev1.Secret) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range secrets {
		a.secrets[s.Namespace+"/"+s.Name] = s.DeepCopy()
	}
}

func (a *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	notFound := func() {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound,
			Message: r.URL.Path + " not found",
		})
	}
	if r.Method != http.MethodGet {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/api/v1" {
		_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "v1",
			APIResources: []metav1.APIResource{{Name: "secrets", SingularName: "secret", Namespaced: true, Kind: "Secret", Verbs: []string{"get", "list"}}},
		})
		return
	}
	var ns, name string
	if n, _ := fmt.Sscanf(strings.ReplaceAll(r.URL.Path, "/", " "), " api v1 namespaces %s secrets %s", &ns, &name); n != 2 {
		notFound()
		return
	}
	a.mu.Lock()
	s, ok := a.secrets[ns+"/"+name]
	a.mu.Unlock()
	if !ok {
		notFound()
		return
	}
	out := s.DeepCopy()
	out.TypeMeta = metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"}
	_ = json.NewEncoder(w).Encode(out)
}

// render renders the chart as an install or upgrade does in a cluster
// that holds the server's Secrets.
func (a *apiServer) render(t *testing.T, args ...string) *manifest {
	t.Helper()
	out, err := a.template(t, args...)
	require.NoError(t, err)
	m, err := decodeManifest(out)
	require.NoError(t, err)
	return m
}

// template runs helm template with lookups against the server.
func (a *apiServer) template(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runHelm(t, append([]string{"template", release, chartDir, "--namespace", namespace, "--dry-run=server", "--kubeconfig", a.kubeconfig}, args...)...)
}

// testCA is a CA for certificates the tests and the chart sign.
type testCA struct {
	cert    *x509.Certificate
	certPEM []byte
	keyPEM  []byte
}

func newTestCA(t *testing.T, cn string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return testCA{
		cert:    cert,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	}
}

// secret is the CA as a kubernetes.io/tls Secret, the layout of
// cert-manager's CA Issuer; trust, if given, is its ca.crt.
func (ca testCA) secret(name string, trust ...testCA) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": ca.certPEM, "tls.key": ca.keyPEM},
	}
	if len(trust) > 0 {
		var bundle []byte
		for _, c := range trust {
			bundle = append(bundle, c.certPEM...)
		}
		s.Data["ca.crt"] = bundle
	}
	return s
}

// The fake server answers Helm's lookups, and a Secret it does not hold is
// not found rather than an error: otherwise every render through it would
// prove nothing about the chart's lookups.
func TestAPIServerServesLookups(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "mesh CA")
	a := newAPIServer(t, ca.secret("drip-tls"))
	m := a.render(t, "--set", "tls.secretName=drip-tls", "--show-only", "templates/configmap.yaml")
	assert.Equal(t, []string{"ConfigMap/demo-drip-topology"}, m.keys())

	// The generated Secrets kept: what the server holds comes back.
	first := render(t)
	a.put(get[*corev1.Secret](t, first, "Secret/demo-drip-tls-issuers"))
	second := a.render(t)
	assert.Equal(t, get[*corev1.Secret](t, first, "Secret/demo-drip-tls-issuers").Data,
		get[*corev1.Secret](t, second, "Secret/demo-drip-tls-issuers").Data, "the issuers were looked up and kept")
}
