package cli

import (
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/kube"
)

// endpointSlicesFlagHelp documents --peer-endpointslices, which broker
// and netem share.
const endpointSlicesFlagHelp = "in Kubernetes, resolve neighbours that are pods of this headless `Service` from its EndpointSlices (the API server, with the pod's service account) instead of DNS, " +
	"whose negative cache would keep a neighbour that started together with this pod unresolvable for up to 30 s; needs get and list on endpointslices"

// endpointSlicesResolver is the resolver of --peer-endpointslices=service,
// for the pod it runs in. When the API server cannot be asked, names fall
// back to DNS, and the first such fallback and every hundredth are logged.
func endpointSlicesResolver(service string, log *zap.Logger) (*kube.Resolver, error) {
	slices, err := kube.InCluster(service, kube.ServiceAccountDir)
	if err != nil {
		return nil, fmt.Errorf("--peer-endpointslices=%s: %w", service, err)
	}
	var fallbacks atomic.Int64
	// A lookup waits up to 2 s for a neighbour's pod to be listed, well
	// within a dial's 5 s timeout, which leaves the handshake its time.
	return &kube.Resolver{Slices: slices, WaitFor: 2 * time.Second, Poll: 200 * time.Millisecond, OnFallback: func(host string, err error) {
		if n := fallbacks.Add(1); n == 1 || n%100 == 0 {
			log.Warn("EndpointSlices unavailable, resolving with DNS", zap.String("host", host), zap.Int64("times", n), zap.Error(err))
		}
	}}, nil
}
