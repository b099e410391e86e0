package kube

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slices is an EndpointSliceList as the API server sends it for a headless
// Service with publishNotReadyAddresses: drip-1 being replaced (old address
// terminating, new one listed), drip-2 without a hostname but with its pod
// as targetRef, and an FQDN slice that names no pod.
const slices = `{"kind":"EndpointSliceList","apiVersion":"discovery.k8s.io/v1","items":[
 {"addressType":"IPv4","endpoints":[
   {"addresses":["10.244.0.5"],"hostname":"drip-0","conditions":{"ready":true},"targetRef":{"kind":"Pod","name":"drip-0"}},
   {"addresses":["10.244.0.6"],"hostname":"drip-1","conditions":{"ready":true,"terminating":true},"targetRef":{"kind":"Pod","name":"drip-1"}}]},
 {"addressType":"IPv4","endpoints":[
   {"addresses":["10.244.0.9"],"hostname":"drip-1","conditions":{"ready":true,"terminating":false},"targetRef":{"kind":"Pod","name":"drip-1"}},
   {"addresses":["10.244.0.7"],"conditions":{"ready":true},"targetRef":{"kind":"Pod","name":"drip-2"}},
   {"addresses":["10.244.0.8"],"hostname":"drip-3","conditions":{"ready":true,"terminating":true},"targetRef":{"kind":"Pod","name":"drip-3"}}]},
 {"addressType":"FQDN","endpoints":[{"addresses":["drip-4.example.com"],"hostname":"drip-4"}]}]}`

// apiServer serves slices to a client with the right token, and counts
// the requests.
func apiServer(t *testing.T) (*EndpointSlices, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.Header.Get("Authorization") != "Bearer t0k3n" {
			http.Error(w, `{"kind":"Status","message":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices" || r.URL.Query().Get("labelSelector") != "kubernetes.io/service-name=drip-headless" {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(slices))
	}))
	t.Cleanup(srv.Close)
	return &EndpointSlices{
		Service: "drip-headless", Namespace: "ns", Server: srv.URL, Client: srv.Client(),
		Token: func() (string, error) { return "t0k3n", nil },
	}, &n
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestLookup(t *testing.T) {
	e, _ := apiServer(t)
	ctx := t.Context()
	for host, want := range map[string][]netip.Addr{
		"drip-0": addrs("10.244.0.5"),
		"drip-1": addrs("10.244.0.9"), // the new pod, not the terminating one
		"drip-2": addrs("10.244.0.7"), // by targetRef
		"drip-3": addrs("10.244.0.8"), // only a terminating one: better than nothing
	} {
		got, err := e.Lookup(ctx, host)
		require.NoError(t, err, host)
		assert.Equal(t, want, got, host)
	}
	_, err := e.Lookup(ctx, "drip-4")
	require.ErrorIs(t, err, ErrNotFound, "FQDN slices name no pod")
	assert.ErrorContains(t, err, `"drip-4": no such pod in the Service's EndpointSlices ns/drip-headless`)

	e.Token = func() (string, error) { return "stale", nil }
	_, err = e.Lookup(ctx, "drip-0")
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrNotFound)
	assert.ErrorContains(t, err, "401 Unauthorized")
}

func TestHostnameOf(t *testing.T) {
	e := &EndpointSlices{Service: "drip-headless", Namespace: "ns"}
	for name, want := range map[string]string{
		"drip-3.drip-headless.ns.svc.cluster.local":  "drip-3",
		"drip-3.drip-headless.ns.svc.cluster.local.": "drip-3",
		"drip-3.drip-headless":                       "drip-3",
		"drip-3.drip-headless.other.svc":             "",
		"drip-3.other-headless.ns.svc":               "",
		"drip-headless.ns.svc":                       "",
		"10.0.0.1":                                   "",
		".drip-headless.ns":                          "",
	} {
		got, ok := e.HostnameOf(name)
		assert.Equal(t, want != "", ok, name)
		assert.Equal(t, want, got, name)
	}
}

type fakeDNS struct {
	asked []string
	err   error
}

func (f *fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	f.asked = append(f.asked, host)
	return addrs("192.0.2.1"), f.err
}

func TestResolver(t *testing.T) {
	e, requests := apiServer(t)
	dns := &fakeDNS{}
	var fellBack []string
	r := &Resolver{Slices: e, Fallback: dns, OnFallback: func(host string, err error) { fellBack = append(fellBack, host+": "+err.Error()) }}
	ctx := t.Context()

	got, err := r.LookupNetIP(ctx, "ip", "drip-1.drip-headless.ns.svc.cluster.local")
	require.NoError(t, err)
	assert.Equal(t, addrs("10.244.0.9"), got)
	got, err = r.LookupNetIP(ctx, "ip6", "drip-1.drip-headless.ns.svc.cluster.local")
	require.NoError(t, err)
	assert.Empty(t, got, "no IPv6 address listed")

	// A pod the slices do not list must not be asked of DNS: that is the
	// lookup whose NXDOMAIN CoreDNS would cache.
	_, err = r.LookupNetIP(ctx, "ip", "drip-7.drip-headless.ns.svc.cluster.local")
	require.ErrorIs(t, err, ErrNotFound)
	assert.Empty(t, dns.asked)

	// Other names go to DNS without asking the API server.
	before := requests.Load()
	got, err = r.LookupNetIP(ctx, "ip", "example.com")
	require.NoError(t, err)
	assert.Equal(t, addrs("192.0.2.1"), got)
	assert.Equal(t, before, requests.Load())

	// An API server that refuses (no RBAC): DNS answers, and the caller
	// is told why.
	e.Token = func() (string, error) { return "", errors.New("no token mounted") }
	got, err = r.LookupNetIP(ctx, "ip", "drip-0.drip-headless.ns.svc.cluster.local")
	require.NoError(t, err)
	assert.Equal(t, addrs("192.0.2.1"), got)
	assert.Equal(t, []string{"example.com", "drip-0.drip-headless.ns.svc.cluster.local"}, dns.asked)
	require.Len(t, fellBack, 1)
	assert.Contains(t, fellBack[0], "no token mounted")
}

func TestInCluster(t *testing.T) {
	e, _ := apiServer(t)
	dir := t.TempDir()
	_, err := InCluster("drip-headless", dir)
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		require.ErrorContains(t, err, "not in a Kubernetes pod")
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "1")
	_, err = InCluster("drip-headless", dir)
	require.ErrorContains(t, err, "automountServiceAccountToken")

	// A service account directory as the kubelet mounts it, pointing at
	// the test API server.
	host, port, err := net.SplitHostPort(strings.TrimPrefix(e.Server, "https://"))
	require.NoError(t, err)
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", port)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "namespace"), []byte("ns\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("t0k3n\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("not PEM"), 0o600))
	_, err = InCluster("drip-headless", dir)
	require.ErrorContains(t, err, "holds no PEM certificate")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), serverCA(t, e), 0o600))
	in, err := InCluster("drip-headless", dir)
	require.NoError(t, err)
	assert.Equal(t, "ns", in.Namespace)
	got, err := in.Lookup(t.Context(), "drip-0")
	require.NoError(t, err, "the token, CA and namespace from the files reach the API server")
	assert.Equal(t, addrs("10.244.0.5"), got)
}

// serverCA is the PEM of the test server's certificate, its own CA.
func serverCA(t *testing.T, e *EndpointSlices) []byte {
	t.Helper()
	resp, err := e.Client.Get(e.Server)
	require.NoError(t, err)
	resp.Body.Close()
	require.NotEmpty(t, resp.TLS.PeerCertificates)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: resp.TLS.PeerCertificates[0].Raw})
}

// handlerTransport serves requests with a handler in memory: no sockets,
// so that a test can run the client in a synctest bubble.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// TestResolverWaitsForAPod: a pod listed a moment after the lookup began
// is found by that lookup, at the first poll after it is listed; one that
// stays unlisted fails after WaitFor, or when the caller's context ends.
// In virtual time (testing/synctest), so that the waits are exact and a
// loaded machine cannot stretch them past a bound.
func TestResolverWaitsForAPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var listed atomic.Bool
		var requests atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			requests.Add(1)
			if !listed.Load() {
				_, _ = w.Write([]byte(`{"items":[]}`))
				return
			}
			_, _ = w.Write([]byte(slices))
		})
		e := &EndpointSlices{Service: "drip-headless", Namespace: "ns", Server: "https://api.invalid", Client: &http.Client{Transport: handlerTransport{h}}, Token: func() (string, error) { return "t", nil }}
		r := &Resolver{Slices: e, Fallback: &fakeDNS{}, WaitFor: 2 * time.Second, Poll: 20 * time.Millisecond}
		time.AfterFunc(190*time.Millisecond, func() { listed.Store(true) })
		start := time.Now()
		got, err := r.LookupNetIP(t.Context(), "ip", "drip-0.drip-headless.ns.svc.cluster.local")
		require.NoError(t, err)
		assert.Equal(t, addrs("10.244.0.5"), got)
		assert.Equal(t, 200*time.Millisecond, time.Since(start), "found at the first poll after it was listed, not at the end of WaitFor")
		assert.Equal(t, int32(11), requests.Load(), "asked at once and at each of 10 polls")

		r.WaitFor = 100 * time.Millisecond
		start = time.Now()
		_, err = r.LookupNetIP(t.Context(), "ip", "drip-9.drip-headless.ns.svc.cluster.local")
		require.ErrorIs(t, err, ErrNotFound)
		assert.Equal(t, 100*time.Millisecond, time.Since(start), "gave up after WaitFor")

		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		r.WaitFor = time.Minute
		start = time.Now()
		_, err = r.LookupNetIP(ctx, "ip", "drip-9.drip-headless.ns.svc.cluster.local")
		require.Error(t, err)
		assert.Equal(t, 50*time.Millisecond, time.Since(start), "the caller's context bounds the wait")
	})
}
