package helm_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/dripmesh/drip/internal/peerauth"
)

// TestGeneratedTLS: the certificates the chart makes by default do what
// docs/security.md says — each broker's verifies against the broker CA for
// its DNS names and names its own router only; the client certificate
// verifies against the client CA and never against the broker CA (so it
// cannot open a peer link); the issuers' keys are in a Secret no pod mounts.
func TestGeneratedTLS(t *testing.T) {
	t.Parallel()
	m := render(t)
	brokers := get[*corev1.Secret](t, m, "Secret/demo-drip-broker-tls").Data
	clients := get[*corev1.Secret](t, m, "Secret/demo-drip-client-tls").Data
	issuers := get[*corev1.Secret](t, m, "Secret/demo-drip-tls-issuers").Data

	pool := func(pemBytes []byte) *x509.CertPool {
		p := x509.NewCertPool()
		require.True(t, p.AppendCertsFromPEM(pemBytes))
		return p
	}
	parse := func(pemBytes []byte) *x509.Certificate {
		b, _ := pem.Decode(pemBytes)
		require.NotNil(t, b)
		c, err := x509.ParseCertificate(b.Bytes)
		require.NoError(t, err)
		return c
	}
	brokerCA, clientCA := pool(brokers["ca.crt"]), pool(brokers["client-ca.crt"])
	assert.Equal(t, issuers["broker-ca.crt"], brokers["ca.crt"])
	assert.Equal(t, issuers["client-ca.crt"], brokers["client-ca.crt"])
	assert.Equal(t, brokers["ca.crt"], clients["ca.crt"], "clients verify brokers with the broker CA")
	assert.NotContains(t, brokers, "broker-ca.key")
	assert.NotContains(t, clients, "client-ca.key")

	topo := m.mesh(t)
	require.Len(t, topo.Brokers, 4)
	for i, b := range topo.Brokers {
		_, err := tls.X509KeyPair(brokers[b.Name+".crt"], brokers[b.Name+".key"])
		require.NoError(t, err, "broker %d's key pair", i)
		leaf := parse(brokers[b.Name+".crt"])
		host := b.Peer[:len(b.Peer)-len(":7100")]
		for _, name := range []string{host, fullname + "." + namespace + ".svc"} {
			_, err = leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: brokerCA, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			assert.NoError(t, err, "broker %d as %s", i, name)
		}
		_, err = leaf.Verify(x509.VerifyOptions{Roots: brokerCA, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		assert.NoError(t, err, "broker %d dials its neighbours with it", i)
		for j := range topo.Brokers {
			assert.Equal(t, i == j, peerauth.NamesRouter(leaf, topo.Mesh, uint32(j)), fmt.Sprintf("broker %d's certificate names router %d", i, j))
		}
	}

	_, err := tls.X509KeyPair(clients["tls.crt"], clients["tls.key"])
	require.NoError(t, err)
	cl := parse(clients["tls.crt"])
	_, err = cl.Verify(x509.VerifyOptions{Roots: clientCA, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, err)
	_, err = cl.Verify(x509.VerifyOptions{Roots: brokerCA, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	assert.Error(t, err, "the broker CA, which the peer port trusts, did not sign the client's certificate")

	// Brokers mount their Secret, never the issuers'.
	spec := m.statefulSet(t).Spec.Template.Spec
	var secrets []string
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			secrets = append(secrets, v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					secrets = append(secrets, s.Secret.Name)
				}
			}
		}
	}
	assert.Equal(t, []string{"demo-drip-broker-tls"}, secrets)
	tp := m.testPod(t)
	require.Len(t, tp.Spec.Volumes, 1)
	assert.Equal(t, "demo-drip-client-tls", tp.Spec.Volumes[0].Secret.SecretName, "the helm test is a client")
	assert.Subset(t, container(t, tp.Spec, "selftest").Args, []string{
		"--tls-ca=/etc/drip/tls/ca.crt", "--tls-cert=/etc/drip/tls/tls.crt", "--tls-key=/etc/drip/tls/tls.key"})
}
