package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dripmesh/drip/internal/testbed/experiment"
	"github.com/dripmesh/drip/internal/testbed/stomp"
	"github.com/dripmesh/drip/internal/testbed/systems"
)

// System names. drip-uncompressed is drip with --peer-compression=false,
// the setting for a fast LAN, where DEFLATE costs CPU and saves nothing
// the link needs.
const (
	sysDrip         = "drip"
	sysDripNoDeflat = "drip-uncompressed"
	// sysDripMaps is drip's brokers with clients written as most users
	// write them: a fresh Attrs map for every message published, and
	// deliveries decoded into Attrs maps. The other drip systems' clients
	// reuse client.Fields and subscribe WithFields.
	sysDripMaps = "drip-maps"
	sysNATS     = "nats"
	sysActiveMQ = "activemq"
)

// target is a system deployed for a case: its servers, one process each,
// on loopback.
type target struct {
	name    string // as reported: the system, or a variant of it
	system  string // sysDrip, sysNATS, ...
	dep     systems.Deployment
	servers []systems.Server
	info    systems.Info
	http    *http.Client
}

// startTimeout bounds starting a system and waiting for its routes.
const startTimeout = 2 * time.Minute

// manyStreamsArgs are the flags of a drip broker that holds the 10,000
// inert subscriptions of the inert-filters and Henjes07 cases: each is a
// stream the memory budget charges 32 KiB at rest, and the default budget
// (256 MiB) admits about 3,000 of them. A gigabyte admits 12,000; NATS and
// ActiveMQ (1 GB of heap) hold theirs with no such bound.
var manyStreamsArgs = []string{"--memory-budget", strconv.Itoa(1 << 30)}

// deploy starts system with n brokers (linked in a line, the experiment
// runner's topologies) under dir; args are added to drip brokers' flags.
func (h *harness) deploy(ctx context.Context, name, system string, n int, args ...string) (*target, error) {
	var sys systems.System
	switch system {
	case sysDrip, sysDripNoDeflat, sysDripMaps:
		sys = systems.NewDrip(systems.DripOptions{Binary: h.cfg.DripBinary, Env: h.cfg.DripEnv, Args: args, NoPeerCompression: system == sysDripNoDeflat})
	case sysNATS:
		sys = systems.NewNATS(systems.NATSOptions{})
	case sysActiveMQ:
		// Henjes07 §3.2 gave the JVM 1024 MB "to store received messages
		// and filters"; 10,000 subscriptions need more than the lab's 256.
		sys = systems.NewActiveMQ(systems.ActiveMQOptions{HeapMB: 1024})
	default:
		return nil, fmt.Errorf("no system %q", system)
	}
	if err := sys.Available(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(h.dir, name+"-")
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	dep, err := sys.Start(sctx, systems.Spec{Topology: experiment.Topology(n), Dir: dir})
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	t := &target{name: name, system: system, dep: dep, info: dep.Info(), http: &http.Client{Timeout: 10 * time.Second}}
	lister, ok := dep.(systems.ServerLister)
	if !ok {
		dep.Close()
		return nil, fmt.Errorf("%s: the deployment does not list its servers", name)
	}
	t.servers = lister.Servers()
	for _, s := range t.servers {
		if s.PID == 0 {
			dep.Close()
			return nil, fmt.Errorf("%s: broker %s runs inside driplab, where its CPU cannot be told from the harness's", name, s.Site)
		}
	}
	// NATS's full mesh of routes (ActiveMQ's bridges) first; the runs'
	// probes then wait for the subscriptions' interest. drip's Ready
	// expects every broker to advertise subscriptions, which none has
	// yet: for drip the probes wait for routes and interest alike.
	if system == sysNATS || system == sysActiveMQ {
		if err := dep.Ready(sctx); err != nil {
			dep.Close()
			return nil, fmt.Errorf("%s: waiting for routes: %w", name, err)
		}
	}
	if system == sysActiveMQ {
		// ActiveMQ accepts TCP connections on its STOMP port a moment
		// before it speaks STOMP on them.
		if err := stompReady(sctx, t.first().Client); err != nil {
			dep.Close()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	h.progress("  started %s: %d broker(s), %s", name, n, t.info.Version)
	return t, nil
}

// stompReady waits until a STOMP handshake at addr succeeds.
func stompReady(ctx context.Context, addr string) error {
	for {
		c, err := stomp.Dial(ctx, addr, stomp.Options{})
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no STOMP handshake at %s: %w (last: %v)", addr, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// close stops the system's servers.
func (t *target) close() error {
	t.http.CloseIdleConnections()
	if err := t.dep.Close(); err != nil {
		return fmt.Errorf("stopping %s: %w", t.name, err)
	}
	return nil
}

// first is the broker publishers use; last the one subscribers use (the
// same one with a single broker).
func (t *target) first() systems.Server { return t.servers[0] }
func (t *target) last() systems.Server  { return t.servers[len(t.servers)-1] }

// dripDropCounters are the drip counters of messages a broker dropped:
// at a subscriber's full queue (reported to it as Lost), at a full link
// queue, and destinations forwarding could not reach.
var dripDropCounters = []string{"drip_subscriber_dropped_total", "drip_link_dropped_bundles_total", "drip_route_dropped_destinations_total"}

// dropped sums the drops the system's brokers count, over every broker:
// drip's drop counters, NATS's slow consumers (connections it cut off for
// not reading). ActiveMQ, without JMX, counts none the harness can read.
func (t *target) dropped(ctx context.Context) (uint64, error) {
	var total uint64
	for _, s := range t.servers {
		var n uint64
		var err error
		switch t.system {
		case sysDrip, sysDripNoDeflat, sysDripMaps:
			n, err = t.dripDrops(ctx, s.Monitor)
		case sysNATS:
			n, err = t.natsSlowConsumers(ctx, s.Monitor)
		}
		if err != nil {
			return 0, fmt.Errorf("%s at %s: %w", t.name, s.Site, err)
		}
		total += n
	}
	return total, nil
}

func (t *target) get(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.Body, nil
}

func (t *target) dripDrops(ctx context.Context, addr string) (uint64, error) {
	body, err := t.get(ctx, "http://"+addr+"/metrics")
	if err != nil {
		return 0, err
	}
	defer body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(body)
	if err != nil {
		return 0, fmt.Errorf("parsing %s/metrics: %w", addr, err)
	}
	var n float64
	for _, name := range dripDropCounters {
		for _, m := range fams[name].GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return uint64(n), nil
}

func (t *target) natsSlowConsumers(ctx context.Context, addr string) (uint64, error) {
	body, err := t.get(ctx, "http://"+addr+"/varz")
	if err != nil {
		return 0, err
	}
	defer body.Close()
	var v struct {
		SlowConsumers uint64 `json:"slow_consumers"`
	}
	if err := json.NewDecoder(body).Decode(&v); err != nil {
		return 0, fmt.Errorf("parsing %s/varz: %w", addr, err)
	}
	return v.SlowConsumers, nil
}

// closeAll stops targets, in parallel, and joins their errors.
func closeAll(ts ...*target) error {
	errs := make(chan error, len(ts))
	n := 0
	for _, t := range ts {
		if t == nil {
			continue
		}
		n++
		go func() { errs <- t.close() }()
	}
	var all []error
	for range n {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}
