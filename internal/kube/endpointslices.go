// Package kube finds a StatefulSet's pods from the Kubernetes API server,
// for brokers and netem sidecars that must not wait for cluster DNS.
//
// A pod's DNS name under a headless Service exists only once the pod has an
// IP and the EndpointSlice controller has published it. When all brokers
// start at once, each looks its neighbours up before their records exist,
// and CoreDNS caches that NXDOMAIN (for 30 s with the usual `cache 30` and
// `ttl 30`): the links, and so routing, wait out the cache although every
// pod is running. The EndpointSlices themselves have no such cache, so
// EndpointSlices reads them on every lookup (docs/design.md §6,
// docs/kubernetes.md).
package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ServiceAccountDir is where Kubernetes mounts a pod's service account
// token, CA and namespace.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// ErrNotFound means the Service's EndpointSlices list no pod by that name
// (yet): it has no IP, or it is not the Service's.
var ErrNotFound = errors.New("no such pod in the Service's EndpointSlices")

// EndpointSlices looks pods of one headless Service up by hostname in the
// Service's EndpointSlices (discovery.k8s.io/v1), asking the API server on
// every lookup. It needs get and list on endpointslices in the namespace.
type EndpointSlices struct {
	// Service is the headless Service; its pods' DNS names are
	// <hostname>.<Service>.<Namespace>.svc.<cluster domain>.
	Service   string
	Namespace string
	// Server is the API server's base URL, e.g. https://10.96.0.1:443.
	Server string
	// Token returns the bearer token; it is read on every request because
	// Kubernetes rotates projected tokens.
	Token  func() (string, error)
	Client *http.Client
}

// InCluster returns EndpointSlices for service in the pod's own namespace,
// with the pod's service account, as client-go's in-cluster configuration
// does: KUBERNETES_SERVICE_HOST and _PORT (set in every pod, whatever
// enableServiceLinks says) and the files in dir (ServiceAccountDir).
func InCluster(service, dir string) (*EndpointSlices, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("not in a Kubernetes pod: KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is unset")
	}
	ns, err := os.ReadFile(filepath.Join(dir, "namespace"))
	if err != nil {
		return nil, fmt.Errorf("the pod's namespace (is a service account token mounted? automountServiceAccountToken): %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("the cluster's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s holds no PEM certificate", filepath.Join(dir, "ca.crt"))
	}
	tokenFile := filepath.Join(dir, "token")
	return &EndpointSlices{
		Service:   service,
		Namespace: strings.TrimSpace(string(ns)),
		Server:    "https://" + net.JoinHostPort(host, port),
		Token: func() (string, error) {
			b, err := os.ReadFile(tokenFile)
			return strings.TrimSpace(string(b)), err
		},
		Client: &http.Client{
			Timeout:   5 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		},
	}, nil
}

// endpointSliceList is the part of a discovery.k8s.io/v1 EndpointSliceList
// that lookups read.
type endpointSliceList struct {
	Items []struct {
		AddressType string `json:"addressType"`
		Endpoints   []struct {
			Addresses  []string `json:"addresses"`
			Hostname   string   `json:"hostname"`
			Conditions struct {
				Terminating *bool `json:"terminating"`
			} `json:"conditions"`
			TargetRef *struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"targetRef"`
		} `json:"endpoints"`
	} `json:"items"`
}

// Lookup returns the addresses of the Service's pod hostname. A pod being
// replaced can be listed twice, terminating and new: the new one wins.
func (e *EndpointSlices) Lookup(ctx context.Context, hostname string) ([]netip.Addr, error) {
	u := fmt.Sprintf("%s/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices?labelSelector=%s",
		e.Server, url.PathEscape(e.Namespace), url.QueryEscape("kubernetes.io/service-name="+e.Service))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	token, err := e.Token()
	if err != nil {
		return nil, fmt.Errorf("service account token: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := e.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", e.Namespace, e.Service, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", e.Namespace, e.Service, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %s: %s", e.Namespace, e.Service, resp.Status, strings.TrimSpace(string(body[:min(len(body), 300)])))
	}
	var list endpointSliceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("EndpointSlices of Service %s/%s: %w", e.Namespace, e.Service, err)
	}
	var current, terminating []netip.Addr
	for _, s := range list.Items {
		if s.AddressType != "IPv4" && s.AddressType != "IPv6" {
			continue // FQDN slices name no pod
		}
		for _, ep := range s.Endpoints {
			if ep.Hostname != hostname && (ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || ep.TargetRef.Name != hostname) {
				continue
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				if ep.Conditions.Terminating != nil && *ep.Conditions.Terminating {
					terminating = append(terminating, ip)
				} else {
					current = append(current, ip)
				}
			}
		}
	}
	switch {
	case len(current) > 0:
		return current, nil
	case len(terminating) > 0:
		return terminating, nil
	}
	return nil, fmt.Errorf("%q: %w %s/%s", hostname, ErrNotFound, e.Namespace, e.Service)
}

// HostnameOf returns the pod hostname of a DNS name under this Service
// (<hostname>.<Service>.<Namespace>.svc..., or <hostname>.<Service>
// relative to the namespace), and false for any other name.
func (e *EndpointSlices) HostnameOf(name string) (string, bool) {
	labels := strings.Split(strings.TrimSuffix(name, "."), ".")
	if len(labels) < 2 || labels[0] == "" || labels[1] != e.Service {
		return "", false
	}
	if len(labels) > 2 && labels[2] != e.Namespace {
		return "", false
	}
	return labels[0], true
}

// Resolver resolves the names of the Service's pods from its EndpointSlices,
// and every other name, or a pod's name when the API server cannot be asked
// (no permission, say), with Fallback. A pod the slices do not list yet is
// not found: it is not asked of DNS either. It has the method set of
// *net.Resolver that netem.Resolver and the broker's peer dialler use.
type Resolver struct {
	Slices *EndpointSlices
	// Fallback resolves what the slices do not (default net.DefaultResolver).
	Fallback interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	}
	// OnFallback, if set, is told why the slices did not answer for a name
	// of the Service (the caller logs it).
	OnFallback func(host string, err error)
	// WaitFor is how long a lookup of a pod the slices do not list yet
	// waits for it, asking again every Poll, within the caller's context.
	// A pod is listed about a second after it started, when the kubelet
	// has reported its IP: a dialler that waited out its backoff instead
	// would link later. Zero does not wait.
	WaitFor, Poll time.Duration
}

// LookupNetIP implements netem.Resolver.
func (r *Resolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	fallback := r.Fallback
	if fallback == nil {
		fallback = net.DefaultResolver
	}
	if hostname, ok := r.Slices.HostnameOf(host); ok {
		addrs, err := r.lookupWaiting(ctx, hostname)
		if err == nil {
			return filterNetwork(addrs, network), nil
		}
		// DNS is made from the same slices: asking it about a pod they
		// do not list yet only plants the NXDOMAIN its cache then keeps.
		if errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if r.OnFallback != nil {
			r.OnFallback(host, err)
		}
	}
	return fallback.LookupNetIP(ctx, network, host)
}

// lookupWaiting looks hostname up, and while the slices do not list it,
// again every Poll for up to WaitFor.
func (r *Resolver) lookupWaiting(ctx context.Context, hostname string) ([]netip.Addr, error) {
	addrs, err := r.Slices.Lookup(ctx, hostname)
	if r.WaitFor <= 0 || r.Poll <= 0 || !errors.Is(err, ErrNotFound) {
		return addrs, err
	}
	deadline := time.NewTimer(r.WaitFor)
	defer deadline.Stop()
	tick := time.NewTicker(r.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, err
		case <-deadline.C:
			return nil, err
		case <-tick.C:
		}
		if addrs, err = r.Slices.Lookup(ctx, hostname); !errors.Is(err, ErrNotFound) {
			return addrs, err
		}
	}
}

// filterNetwork keeps the addresses of network "ip4" or "ip6" ("ip": all).
func filterNetwork(addrs []netip.Addr, network string) []netip.Addr {
	if network != "ip4" && network != "ip6" {
		return addrs
	}
	var out []netip.Addr
	for _, a := range addrs {
		if a.Is4() == (network == "ip4") {
			out = append(out, a)
		}
	}
	return out
}
