package helm_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/dripmesh/drip/internal/peerauth"
	"github.com/dripmesh/drip/internal/topology"
)

// The sites of testdata/sites, as docs/kubernetes.md's walkthrough installs
// them: mesh.yaml is what they share, site-<name>.yaml each site's own.
var walkthrough = []siteSpec{
	{name: "eu", base: 0, brokers: 3},
	{name: "us", base: 16, brokers: 2},
	{name: "ap", base: 32, brokers: 2},
}

type siteSpec struct {
	name    string
	base    uint32 // router ID of broker 0
	brokers int
}

// meshCAs are the CAs every site's namespace holds as the Secrets mesh.yaml
// names.
type meshCAs struct{ mesh, client testCA }

func newMeshCAs(t *testing.T) meshCAs {
	return meshCAs{mesh: newTestCA(t, "corp mesh CA"), client: newTestCA(t, "corp client CA")}
}

func (c meshCAs) secrets() []*corev1.Secret {
	return []*corev1.Secret{c.mesh.secret("drip-mesh-ca"), c.client.secret("drip-mesh-client-ca")}
}

func sitesFile(name string) string { return filepath.Join("testdata", "sites", name) }

// renderSite renders a site of the walkthrough as its install does.
func renderSite(t *testing.T, a *apiServer, site string, args ...string) *manifest {
	t.Helper()
	return a.render(t, append([]string{"-f", sitesFile("mesh.yaml"), "-f", sitesFile("site-" + site + ".yaml")}, args...)...)
}

func pemCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(b)
	require.NotNil(t, blk)
	c, err := x509.ParseCertificate(blk.Bytes)
	require.NoError(t, err)
	return c
}

func certPool(t *testing.T, b []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	require.True(t, p.AppendCertsFromPEM(b))
	return p
}

// TestSites renders each site of the walkthrough and checks what makes them
// one mesh: router IDs from the site's range, names that carry the site,
// remote brokers at their external addresses only, a Service per broker at
// the address the other sites dial, and certificates from the shared CA that
// name each router and the address it is dialled at.
func TestSites(t *testing.T) {
	t.Parallel()
	cas := newMeshCAs(t)
	a := newAPIServer(t, cas.secrets()...)
	topos := map[string]*topology.Topology{}
	peerAddrs := map[string]string{} // broker name → its external peer address
	for _, s := range walkthrough {
		m := renderSite(t, a, s.name)
		topo := m.mesh(t)
		topos[s.name] = topo
		assert.Equal(t, "corp", topo.Mesh, s.name)

		local := map[string]bool{}
		for i := range s.brokers {
			b := topo.Brokers[i]
			name := fmt.Sprintf("%s/%s-%d", s.name, fullname, i)
			local[name] = true
			assert.Equal(t, name, b.Name, "broker %d of %s is named with its site", i, s.name)
			assert.Equal(t, s.base+uint32(i), *b.ID, "%s's router ID is its site's base plus its ordinal", name)
			assert.Equal(t, dns(i, 7100), b.Peer, "%s: brokers of the site reach it by its DNS name", name)

			svc := get[*corev1.Service](t, m, fmt.Sprintf("Service/%s-%d-peer", fullname, i))
			assert.True(t, svc.Spec.PublishNotReadyAddresses, "a broker is ready only once it is linked to the other sites")
			assert.Equal(t, fmt.Sprintf("%s-%d", fullname, i), svc.Spec.Selector["statefulset.kubernetes.io/pod-name"])
			assert.Equal(t, "broker", svc.Spec.Selector["app.kubernetes.io/component"])
			require.Len(t, svc.Spec.Ports, 1)
			addr := svc.Annotations["drip.dev/peer-address"]
			peerAddrs[name] = addr
			host, port, err := net.SplitHostPort(addr)
			require.NoError(t, err)
			p := svc.Spec.Ports[0]
			assert.Equal(t, "peer", p.TargetPort.String())
			assert.Equal(t, port, fmt.Sprint(p.Port), "%s: the Service listens on the port of its address", svc.Name)
			switch svc.Spec.Type {
			case corev1.ServiceTypeNodePort:
				assert.Equal(t, p.Port, p.NodePort, "%s: the address's port is the node port", svc.Name)
			case corev1.ServiceTypeClusterIP:
				assert.Equal(t, []string{host}, svc.Spec.ExternalIPs, svc.Name)
			case corev1.ServiceTypeLoadBalancer:
				assert.Empty(t, svc.Spec.ExternalIPs, svc.Name)
			}
		}
		assert.NotContains(t, m.keys(), fmt.Sprintf("Service/%s-%d-peer", fullname, s.brokers), "one peer Service per broker")

		// Remote brokers: their router ID and external address, nothing else
		// of their cluster.
		for _, b := range topo.Brokers[s.brokers:] {
			assert.False(t, local[b.Name])
			assert.NotEmpty(t, b.Peer, b.Name)
			assert.Empty(t, b.Client+b.Metrics, "%s: only the peer address of a broker of another site", b.Name)
			assert.NotContains(t, b.Peer, ".svc.", "%s: another site's broker by its external address", b.Name)
			assert.False(t, *b.ID >= s.base && *b.ID < s.base+16, "%s has router %d, in %s's own range", b.Name, *b.ID, s.name)
		}
		for _, l := range topo.Links {
			if local[l.A] != local[l.B] {
				assert.GreaterOrEqual(t, l.Weight, uint32(10), "%s–%s: links between sites cost more than the site's own", l.A, l.B)
				assert.NotZero(t, l.Delay, "%s–%s: the walkthrough gives every link between sites its delay", l.A, l.B)
			} else {
				assert.Equal(t, uint32(1), l.Weight, "%s–%s", l.A, l.B)
			}
		}

		spec := m.statefulSet(t).Spec.Template.Spec
		b := container(t, spec, "broker")
		assert.Contains(t, b.Args, "--name="+s.name+"/$(POD_NAME)")
		assert.Subset(t, b.Args, []string{"--tls-cert=/etc/drip-tls/$(POD_NAME).crt", "--tls-ca=/etc/drip-tls/ca.crt",
			"--tls-peer-identity", "--tls-client-auth", "--tls-client-ca=/etc/drip-tls/client-ca.crt"})
		assert.Contains(t, b.Args, "--wan", "mesh.yaml's broker values reach every site")
		assert.NotContains(t, m.keys(), "Secret/demo-drip-tls-issuers", "the CAs are the mesh's, not generated")
		assertSiteCertificates(t, m, cas, s, topo)
	}

	// The sites agree: every link between two sites is in both sites'
	// topologies, and each names the other's broker by the router ID and
	// external address that broker has in its own site.
	byName := map[string]topology.Broker{}
	for _, s := range walkthrough {
		for _, b := range topos[s.name].Brokers[:s.brokers] {
			byName[b.Name] = b
		}
	}
	links := map[string][]string{} // "a|b" (sorted) → sites that list it
	for _, s := range walkthrough {
		topo := topos[s.name]
		for _, b := range topo.Brokers[s.brokers:] {
			own, ok := byName[b.Name]
			require.True(t, ok, "%s names a broker %s that no site has", s.name, b.Name)
			assert.Equal(t, *own.ID, *b.ID, "%s's router ID as %s knows it", b.Name, s.name)
			assert.Equal(t, peerAddrs[b.Name], b.Peer, "%s's address as %s knows it", b.Name, s.name)
		}
		for _, l := range topo.Links {
			if strings.Split(l.A, "/")[0] != strings.Split(l.B, "/")[0] {
				k := strings.Join(slices.Sorted(slices.Values([]string{l.A, l.B})), "|")
				links[k] = append(links[k], s.name)
			}
		}
	}
	require.Len(t, links, 4, "eu–us, two eu–ap, us–ap")
	for k, sites := range links {
		assert.Len(t, sites, 2, "the link %s is listed by both its sites, so that both dial it: %v", k, sites)
	}
}

// assertSiteCertificates: each broker's certificate is from the mesh CA,
// names its router (and no other) and the host other sites dial it at; the
// client's is from the client CA, which the peer port does not trust.
func assertSiteCertificates(t *testing.T, m *manifest, cas meshCAs, s siteSpec, topo *topology.Topology) {
	t.Helper()
	brokers := get[*corev1.Secret](t, m, "Secret/demo-drip-broker-tls")
	clients := get[*corev1.Secret](t, m, "Secret/demo-drip-client-tls")
	assert.Equal(t, cas.mesh.certPEM, brokers.Data["ca.crt"])
	assert.Equal(t, cas.client.certPEM, brokers.Data["client-ca.crt"])
	assert.Equal(t, cas.mesh.certPEM, clients.Data["ca.crt"], "clients verify brokers with the mesh CA")
	meshPool, clientPool := certPool(t, cas.mesh.certPEM), certPool(t, cas.client.certPEM)
	for i := range s.brokers {
		pod := fmt.Sprintf("%s-%d", fullname, i)
		_, err := tls.X509KeyPair(brokers.Data[pod+".crt"], brokers.Data[pod+".key"])
		require.NoError(t, err, pod)
		leaf := pemCert(t, brokers.Data[pod+".crt"])
		host, _, err := net.SplitHostPort(get[*corev1.Service](t, m, fmt.Sprintf("Service/%s-peer", pod)).Annotations["drip.dev/peer-address"])
		require.NoError(t, err)
		for _, name := range []string{host, strings.TrimSuffix(topo.Brokers[i].Peer, ":7100")} {
			_, err = leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: meshPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			assert.NoError(t, err, "%s's certificate for %s", pod, name)
		}
		for id := range uint32(48) {
			assert.Equal(t, id == s.base+uint32(i), peerauth.NamesRouter(leaf, "corp", id), "%s/%s names router %d", s.name, pod, id)
		}
	}
	cl := pemCert(t, clients.Data["tls.crt"])
	_, err := cl.Verify(x509.VerifyOptions{Roots: clientPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, err)
	_, err = cl.Verify(x509.VerifyOptions{Roots: meshPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	assert.Error(t, err, "the mesh CA, which the peer port trusts, did not sign the client's certificate")

	svc := get[*corev1.Service](t, m, "Service/"+fullname)
	if s.name == "eu" {
		assert.Equal(t, corev1.ServiceTypeNodePort, svc.Spec.Type)
		assert.Equal(t, int32(30700), svc.Spec.Ports[0].NodePort)
		for i := range s.brokers {
			leaf := pemCert(t, brokers.Data[fmt.Sprintf("%s-%d.crt", fullname, i)])
			_, err := leaf.Verify(x509.VerifyOptions{DNSName: "203.0.113.10", Roots: meshPool})
			assert.NoError(t, err, "a client outside the cluster verifies broker %d at service.externalHosts", i)
		}
	}
}

// TestSiteUpgrade: an upgrade keeps the brokers' certificates while their
// CA and names are the same, and re-issues them, rolling the brokers, when
// an address changes or the mesh CA is rotated (docs/kubernetes.md).
func TestSiteUpgrade(t *testing.T) {
	t.Parallel()
	cas := newMeshCAs(t)
	a := newAPIServer(t, cas.secrets()...)
	install := renderSite(t, a, "eu")
	secretsOf := func(m *manifest) (*corev1.Secret, *corev1.Secret) {
		return get[*corev1.Secret](t, m, "Secret/demo-drip-broker-tls"), get[*corev1.Secret](t, m, "Secret/demo-drip-client-tls")
	}
	checksum := func(m *manifest) string {
		return m.statefulSet(t).Spec.Template.Annotations["checksum/tls"]
	}
	a.put(secretsOf(install))

	upgrade := renderSite(t, a, "eu")
	b0, c0 := secretsOf(install)
	b1, c1 := secretsOf(upgrade)
	assert.Equal(t, b0.Data, b1.Data, "an upgrade keeps every broker's certificate")
	assert.Equal(t, c0.Data, c1.Data, "and the client's")
	assert.Equal(t, checksum(install), checksum(upgrade), "and does not roll the brokers")

	moved := renderSite(t, a, "eu", "--set", "site.peerService.addresses[2]=203.0.113.11:31102")
	b2, _ := secretsOf(moved)
	assert.Equal(t, b0.Data["demo-drip-0.crt"], b2.Data["demo-drip-0.crt"], "broker 0's names did not change")
	assert.NotEqual(t, b0.Data["demo-drip-2.crt"], b2.Data["demo-drip-2.crt"], "broker 2 is dialled at a new address")
	_, err := pemCert(t, b2.Data["demo-drip-2.crt"]).Verify(x509.VerifyOptions{DNSName: "203.0.113.11", Roots: certPool(t, cas.mesh.certPEM)})
	assert.NoError(t, err)
	assert.NotEqual(t, checksum(install), checksum(moved), "the brokers restart to load it")

	// Rotation, step 1: every site trusts the old and the new CA.
	next := newTestCA(t, "corp mesh CA 2")
	a.put(cas.mesh.secret("drip-mesh-ca", cas.mesh, next))
	trusting := renderSite(t, a, "eu")
	b3, c3 := secretsOf(trusting)
	assert.Equal(t, append(slices.Clone(cas.mesh.certPEM), next.certPEM...), b3.Data["ca.crt"])
	assert.Equal(t, b3.Data["ca.crt"], c3.Data["ca.crt"], "clients trust both too")
	assert.Equal(t, b0.Data["demo-drip-1.crt"], b3.Data["demo-drip-1.crt"], "certificates from the old CA stay")
	assert.NotEqual(t, checksum(install), checksum(trusting), "the brokers restart to trust the new CA")

	// Step 2: the new CA signs.
	a.put(b3, c3, next.secret("drip-mesh-ca", cas.mesh, next))
	signing := renderSite(t, a, "eu")
	b4, _ := secretsOf(signing)
	pool := certPool(t, next.certPEM)
	for i := range 3 {
		_, err := pemCert(t, b4.Data[fmt.Sprintf("demo-drip-%d.crt", i)]).Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		assert.NoError(t, err, "broker %d's certificate is from the new CA", i)
	}
	assert.NotEqual(t, checksum(trusting), checksum(signing))
}

// TestSiteCertManager: with issuerRef, cert-manager issues one certificate
// per broker naming its router and its external host, and a client-only
// certificate; brokers and the test hook mount them laid out as the
// generated ones.
func TestSiteCertManager(t *testing.T) {
	t.Parallel()
	args := []string{"-f", sitesFile("mesh.yaml"), "-f", sitesFile("site-eu.yaml"), "-f", sitesFile("cert-manager.yaml")}
	m := render(t, append(args, "--api-versions", certManagerAPI)...)
	for i := range 3 {
		c, ok := m.certificates[fmt.Sprintf("Certificate/%s-%d", fullname, i)]
		require.True(t, ok, "have %v", m.keys())
		assert.Equal(t, fmt.Sprintf("%s-%d-tls", fullname, i), c.Spec.SecretName)
		assert.Equal(t, []string{fmt.Sprintf("drip://corp/router/%d", i)}, c.Spec.URIs)
		assert.Contains(t, c.Spec.DNSNames, fmt.Sprintf("%d.router.corp.drip.internal", i))
		assert.Contains(t, c.Spec.DNSNames, strings.TrimSuffix(dns(i, 0), ":0"))
		assert.Equal(t, []string{"203.0.113.10"}, c.Spec.IPAddresses, "the node other sites and clients dial")
		assert.ElementsMatch(t, []string{"digital signature", "key encipherment", "server auth", "client auth"}, c.Spec.Usages)
		assert.Equal(t, "ClusterIssuer", c.Spec.IssuerRef.Kind)
		assert.Equal(t, "drip-mesh", c.Spec.IssuerRef.Name)
		assert.Equal(t, "cert-manager.io", c.Spec.IssuerRef.Group)
	}
	cl, ok := m.certificates["Certificate/"+fullname+"-client"]
	require.True(t, ok)
	assert.Equal(t, "demo-drip-client-tls", cl.Spec.SecretName)
	assert.NotContains(t, cl.Spec.Usages, "server auth", "a client's certificate cannot open a peer link")
	assert.Equal(t, "drip-mesh-clients", cl.Spec.IssuerRef.Name)
	assert.Equal(t, "Issuer", cl.Spec.IssuerRef.Kind, "kind defaults to Issuer")
	for _, k := range m.keys() {
		assert.NotRegexp(t, "^Secret/", k, "cert-manager writes the Secrets")
	}

	spec := m.statefulSet(t).Spec.Template.Spec
	b := container(t, spec, "broker")
	assert.Subset(t, b.Args, []string{"--tls-cert=/etc/drip-tls/$(POD_NAME).crt", "--tls-peer-identity", "--tls-client-ca=/etc/drip-tls/client-ca.crt"})
	vol := volume(t, spec, "tls")
	require.NotNil(t, vol.Projected)
	var paths []string
	for _, src := range vol.Projected.Sources {
		for _, it := range src.Secret.Items {
			paths = append(paths, src.Secret.Name+":"+it.Key+"→"+it.Path)
		}
	}
	assert.ElementsMatch(t, []string{
		"demo-drip-0-tls:tls.crt→demo-drip-0.crt", "demo-drip-0-tls:tls.key→demo-drip-0.key", "demo-drip-0-tls:ca.crt→ca.crt",
		"demo-drip-1-tls:tls.crt→demo-drip-1.crt", "demo-drip-1-tls:tls.key→demo-drip-1.key",
		"demo-drip-2-tls:tls.crt→demo-drip-2.crt", "demo-drip-2-tls:tls.key→demo-drip-2.key",
		"demo-drip-client-tls:ca.crt→client-ca.crt",
	}, paths)
	tp := m.testPod(t)
	require.Len(t, tp.Spec.Volumes, 1)
	require.NotNil(t, tp.Spec.Volumes[0].Projected)
	assert.Subset(t, container(t, tp.Spec, "selftest").Args, []string{"--tls-ca=/etc/drip/tls/ca.crt", "--tls-cert=/etc/drip/tls/tls.crt"})

	_, err := runHelm(t, append([]string{"template", release, chartDir, "--namespace", namespace}, args...)...)
	assert.ErrorContains(t, err, "tls.meshCA.issuerRef: the cluster does not serve cert-manager.io/v1")
}

// With peerService.type None the chart renders no peer Service: the
// addresses are exposed by other means, and still name the brokers in
// their certificates.
func TestSitePeerServiceNone(t *testing.T) {
	t.Parallel()
	cas := newMeshCAs(t)
	m := renderSite(t, newAPIServer(t, cas.secrets()...), "eu", "--set", "site.peerService.type=None")
	for _, k := range m.keys() {
		assert.NotRegexp(t, "^Service/.*-peer$", k)
	}
	leaf := pemCert(t, get[*corev1.Secret](t, m, "Secret/demo-drip-broker-tls").Data["demo-drip-1.crt"])
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	assert.Contains(t, ips, "203.0.113.10")
}

// A single-site release renders no peer Service and names its brokers by
// pod, as before sites existed.
func TestSingleSiteHasNoSiteObjects(t *testing.T) {
	t.Parallel()
	m := render(t)
	for _, k := range m.keys() {
		assert.NotRegexp(t, "-peer$", k)
	}
	assert.Contains(t, container(t, m.statefulSet(t).Spec.Template.Spec, "broker").Args, "--name=$(POD_NAME)")
}

// Mistakes in a site's values fail the rendering with a message that names
// them, with and without the schema.
func TestSiteValueErrors(t *testing.T) {
	t.Parallel()
	cas := newMeshCAs(t)
	a := newAPIServer(t, cas.secrets()...)
	eu := []string{"-f", sitesFile("mesh.yaml"), "-f", sitesFile("site-eu.yaml")}
	tests := []struct {
		name     string
		args     []string
		want     string
		template string // the templates' message when the schema is skipped, if the schema reports it
	}{
		{"overlapping ranges", []string{"--set", "sites[1].routerIdBase=10"},
			"sites: eu (routers 0–15) and us (routers 10–25) overlap: every router ID belongs to one site", ""},
		{"remote peer without an address", []string{"--set-json", `site.remotePeers=[{"id": 16}]`},
			"at '/site/remotePeers/0': missing property 'address'",
			`site.remotePeers[0] (router 16): address is required: the "host:port" at which its site exposes its peer port`},
		{"remote ID inside the local range", []string{"--set", "site.remotePeers[0].id=3"},
			"site.remotePeers[0]: router ID 3 is inside this site's own range (eu 0–15): a remote peer is a broker of another site", ""},
		{"remote ID in no site", []string{"--set", "site.remotePeers[0].id=99"},
			"site.remotePeers[0]: router ID 99 is in no site's range (eu 0–15, us 16–31, ap 32–47)", ""},
		{"remote peer twice", []string{"--set", "site.remotePeers[1].id=16"},
			"site.remotePeers[1]: router 16 is already listed as site.remotePeers[0]", ""},
		{"remote link from no broker", []string{"--set", "site.remotePeers[0].brokers={5}"},
			"site.remotePeers[0] (router 16): brokers: 5 is not a broker ordinal of this site (0..2)", ""},
		{"remote address without a port", []string{"--set", "site.remotePeers[0].address=drip-us-0.example.net"},
			`site.remotePeers[0] (router 16): address "drip-us-0.example.net" is not "host:port"`, ""},
		{"unknown remote peer field", []string{"--set", "site.remotePeers[0].dealy=5ms"},
			"at '/site/remotePeers/0': additional properties 'dealy' not allowed", `site.remotePeers[0]: unknown field "dealy"`},
		{"remote weight", []string{"--set", "site.remotePeers[0].weight=0"}, "site.remotePeers[0]: weight 0 is not a positive integer", ""},
		{"site not listed", []string{"--set", "site.name=sa"}, `site.name "sa" is not one of sites (eu 0–15, us 16–31, ap 32–47)`, ""},
		{"site too small", []string{"--set", "replicaCount=17"}, "replicaCount 17 does not fit site eu's 16 router IDs (0–15)", ""},
		{"range beyond the largest ID", []string{"--set", "sites[2].routerIdBase=65530"}, "sites[2] ap: routers 65530–65545 go beyond 65535", ""},
		{"site twice", []string{"--set", "sites[1].name=eu"}, "sites[1]: site eu is listed twice", ""},
		{"no mesh name", []string{"--set", "topology.mesh="}, `site.name "eu": topology.mesh is required in a mesh across clusters`, ""},
		{"an address short", []string{"--set", "replicaCount=4"}, `site.peerService.addresses: 3 for 4 brokers`, ""},
		{"sites without a site", []string{"--set", "site.name=", "--set", "site.remotePeers=null", "--set", "site.peerService.addresses=null"},
			"sites lists the sites of a mesh across clusters, but site.name is empty", ""},
		{"generated CA across sites", []string{"--set", "tls.meshCA.secretName=", "--set", "tls.meshCA.clientSecretName="},
			`site.name "eu": the sites of a mesh trust each other only through a CA they share`, ""},
		{"no client CA", []string{"--set", "tls.meshCA.clientSecretName="}, "tls.meshCA.clientSecretName is required with tls.meshCA.secretName", ""},
		{"CA Secret missing", []string{"--set", "tls.meshCA.secretName=nope"},
			`tls.meshCA.secretName: no Secret "nope" with tls.crt and tls.key in namespace mesh: create it before installing`, ""},
		{"external IP not an IP", []string{"--set", "site.peerService.externalIPs=true", "--set", "site.peerService.addresses[0]=eu.example.net:31100"},
			`site.peerService.addresses[0]: "eu.example.net:31100": with externalIPs the host must be an IP address`, ""},
		{"node port on a ClusterIP Service", []string{"--set", "service.type=ClusterIP"}, "service.nodePort 30700 needs service.type NodePort or LoadBalancer, not ClusterIP", ""},
		{"two sources of certificates", []string{"--set", "tls.meshCA.issuerRef.name=x"}, "tls.meshCA.secretName and tls.meshCA.issuerRef are both set", ""},
		{"a remote peer named as a local broker", []string{"--set", "site.remotePeers[0].name=eu/demo-drip-1"},
			`site.remotePeers[0] (router 16): name "eu/demo-drip-1" is another broker's`, ""},
		{"peer Services nobody outside reaches", []string{"--set", "site.peerService.type=ClusterIP"},
			"site.peerService.type ClusterIP: other sites reach the brokers only at external IPs", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := a.template(t, append(slices.Clone(eu), tt.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, 1, strings.Count(err.Error(), tt.want), "said once")
			if tt.template != "" {
				_, err := a.template(t, append(append(slices.Clone(eu), tt.args...), "--skip-schema-validation")...)
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.template)
			}
		})
	}

	// A trust bundle must hold the CA that signs.
	other := newTestCA(t, "other")
	b := newAPIServer(t, cas.mesh.secret("drip-mesh-ca", other), cas.client.secret("drip-mesh-client-ca"))
	_, err := b.template(t, eu...)
	assert.ErrorContains(t, err, `tls.meshCA.secretName: ca.crt of Secret "drip-mesh-ca" does not contain its tls.crt`)

	// helm template cannot read the CA: it says so.
	_, err = runHelm(t, append([]string{"template", release, chartDir, "--namespace", namespace}, eu...)...)
	assert.ErrorContains(t, err, "helm template cannot read Secrets unless run with --dry-run=server")
}

// The remote link's defaults apply, and a remote peer's fields override them.
func TestRemoteLinkDefaults(t *testing.T) {
	t.Parallel()
	a := newAPIServer(t, newMeshCAs(t).secrets()...)
	topo := renderSite(t, a, "eu", "--set", "site.remoteLink.bandwidth=1MBps", "--set", "site.remoteLink.loss=0.5%").mesh(t)
	var remote []topology.Link
	for _, l := range topo.Links {
		if strings.HasPrefix(l.B, "us/") || strings.HasPrefix(l.B, "ap/") {
			remote = append(remote, l)
		}
	}
	require.Len(t, remote, 3, "eu0–us0, eu1–ap0, eu2–ap0")
	for _, l := range remote {
		assert.Equal(t, topology.Rate(1e6), l.Bandwidth, "%s–%s: remoteLink's bandwidth", l.A, l.B)
		assert.InDelta(t, 0.005, float64(l.Loss), 1e-12)
	}
	us := remote[slices.IndexFunc(remote, func(l topology.Link) bool { return l.B == "us/demo-drip-0" })]
	assert.Equal(t, topology.Link{A: "eu/demo-drip-0", B: "us/demo-drip-0", Weight: 10, Bandwidth: 1e6, Delay: topology.Duration(45 * time.Millisecond), Loss: 0.005}, us)
	ap := remote[slices.IndexFunc(remote, func(l topology.Link) bool { return l.A == "eu/demo-drip-2" })]
	assert.Equal(t, uint32(20), ap.Weight, "the peer's own weight")
}
