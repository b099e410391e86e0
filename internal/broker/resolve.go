package broker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"google.golang.org/grpc"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/transport"
)

// Resolver looks up a host's addresses; *net.Resolver and kube.Resolver
// are ones.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// resolvingDialer dials a neighbour at the address its Resolver gives for
// the host of the configured address, instead of leaving the name to
// gRPC's DNS resolver. The name stays the connection's authority, so TLS
// still verifies the neighbour's certificate against it. In Kubernetes the
// Resolver reads the headless Service's EndpointSlices: a broker started
// together with its neighbours would otherwise look them up before their
// DNS records exist and wait out CoreDNS's negative cache (docs/design.md
// §6).
type resolvingDialer struct {
	grpc     transport.GRPCDialer
	resolver Resolver
}

// Dial implements transport.Dialer.
func (d resolvingDialer) Dial(ctx context.Context, addr string, local *dripv1.Open) (transport.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial peer %s: %w", addr, err)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return d.grpc.Dial(ctx, addr, local)
	}
	ips, err := d.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("dial peer %s: %w", addr, err)
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("dial peer %s: %s has no address", addr, host)
	}
	g := d.grpc
	g.Options = append(slices.Clip(g.Options), grpc.WithAuthority(addr))
	return g.Dial(ctx, net.JoinHostPort(ips[0].String(), port), local)
}
