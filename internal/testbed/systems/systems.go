package systems

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/topology"
)

// System is a publish/subscribe system the experiments can deploy.
type System interface {
	// Name is the system's name on the command line: drip, activemq, nats.
	Name() string
	// Available says why the system cannot run on this machine (a missing
	// binary), or nil.
	Available() error
	// Start deploys one broker per site of spec.Topology, linked as its
	// links say, and returns once every broker accepts clients. On error
	// nothing is left running.
	Start(ctx context.Context, spec Spec) (Deployment, error)
}

// Spec is what to deploy and where.
type Spec struct {
	// Topology names the sites (its brokers; their addresses are ignored)
	// and the links between them.
	Topology *topology.Topology
	// Dir receives generated configuration, logs and broker data. It must
	// exist; the deployment does not remove it.
	Dir string
	// Placement runs processes and opens connections at sites; nil means
	// Loopback.
	Placement Placement
}

func (s Spec) placement() Placement {
	if s.Placement == nil {
		return Loopback{}
	}
	return s.Placement
}

// Deployment is a running system.
type Deployment interface {
	// Info describes what runs: version and configuration, for reports.
	Info() Info
	// Connect opens a client connection at site (bench.Connector).
	Connect(ctx context.Context, site string) (bench.Endpoint, error)
	// Ready waits until subscriptions installed so far can be served from
	// every site: routes are up and interest has propagated (Carzaniga09
	// §5.1.4 step 5).
	Ready(ctx context.Context) error
	// Links counts the bytes the system sent over each direction of each
	// topology link, or is nil when the system cannot tell.
	Links() LinkCounter
	// Close stops every broker and waits for them.
	Close() error
}

// Restarter is a deployment whose brokers can crash and come back: drip's
// broker processes. Neither method may run concurrently with the
// Deployment's others but Connect.
type Restarter interface {
	// Kill kills the site's broker at once, as a crash does.
	Kill(site string) error
	// Restart starts the killed broker of the site again, on the same
	// addresses and configuration, and waits until it takes clients.
	Restart(ctx context.Context, site string) error
}

// Server is one broker process of a deployment, for measurements that need
// more than the Deployment interface gives: the process to read CPU time
// from, and the addresses to reach it without the bench adapters.
type Server struct {
	Site string `json:"site"`
	// PID is the broker's process, or 0 when the broker runs in this
	// process (drip without DripOptions.Binary).
	PID int `json:"pid"`
	// Client is where clients connect (host:port): drip's client API,
	// NATS's client port, ActiveMQ's STOMP connector.
	Client string `json:"client"`
	// Monitor is the HTTP monitoring endpoint (host:port): drip's
	// /metrics, NATS's /varz; empty where there is none.
	Monitor string `json:"monitor,omitempty"`
}

// MetricReader is implemented by deployments whose brokers export
// Prometheus metrics an experiment reads while it runs (drip's).
type MetricReader interface {
	// Metric returns the values of the gauge or counter name at site's
	// broker, by the value of its label (one series, "", when it has no
	// label).
	Metric(ctx context.Context, site, name, label string) (map[string]float64, error)
}

// SumOverBrokers sums metric name over every broker of topo, by its
// label's value.
func SumOverBrokers(ctx context.Context, mr MetricReader, topo *topology.Topology, name, label string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, b := range topo.Brokers {
		got, err := mr.Metric(ctx, b.Name, name, label)
		if err != nil {
			return nil, err
		}
		for k, v := range got {
			out[k] += v
		}
	}
	return out, nil
}

// ServerLister is implemented by the deployments of every system: the
// brokers it runs, in site order.
type ServerLister interface {
	Servers() []Server
}

// Info describes a deployment for the record.
type Info struct {
	System  string `json:"system"`
	Version string `json:"version"`
	// Config holds the settings that shape the measurement.
	Config map[string]string `json:"config"`
	// Files are the generated configuration files of one broker, by name,
	// as examples of what every broker ran with.
	Files map[string]string `json:"files,omitempty"`
}

// Direction is one direction of a topology link.
type Direction struct {
	From, To string
}

func (d Direction) String() string { return d.From + "→" + d.To }

// LinkCounter reads cumulative byte counts per link direction.
type LinkCounter interface {
	// LinkBytes returns the bytes sent so far over each direction of each
	// link. Counts only grow; a direction with no traffic may be missing.
	LinkBytes(ctx context.Context) (map[Direction]uint64, error)
}

// Placement says where the processes and connections of a site live. On
// loopback every site is this host; the lab (internal/testbed/lab) gives each site
// its own network namespace behind emulated WAN links.
type Placement interface {
	// Host is the IP address processes of site listen on and are reached
	// at by other sites and by clients.
	Host(site string) string
	// Start starts cmd as a process of site.
	Start(site string, cmd *exec.Cmd) error
	// DialContext connects from site to addr, as a client placed there.
	DialContext(ctx context.Context, site, network, addr string) (net.Conn, error)
	// Listen listens at site.
	Listen(ctx context.Context, site, network, addr string) (net.Listener, error)
}

// Loopback places every site on 127.0.0.1 of this host.
type Loopback struct{}

// Host implements Placement.
func (Loopback) Host(string) string { return "127.0.0.1" }

// Start implements Placement.
func (Loopback) Start(_ string, cmd *exec.Cmd) error { return cmd.Start() }

// DialContext implements Placement.
func (Loopback) DialContext(ctx context.Context, _, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// Listen implements Placement.
func (Loopback) Listen(ctx context.Context, _, network, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, network, addr)
}

// All returns the systems in the order reports list them.
func All() []System {
	return []System{NewDrip(DripOptions{}), NewDrip(DripOptions{NoPeerCompression: true}), NewActiveMQ(ActiveMQOptions{}), NewNATS(NATSOptions{})}
}

// Names lists the systems' names.
func Names() []string {
	var out []string
	for _, s := range All() {
		out = append(out, s.Name())
	}
	return out
}

// ByName returns the system with the given name and default options.
func ByName(name string) (System, error) {
	for _, s := range All() {
		if s.Name() == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("unknown system %q: want one of %s", name, strings.Join(Names(), ", "))
}

// sites returns the topology's site names in order.
func sites(t *topology.Topology) []string {
	out := make([]string, len(t.Brokers))
	for i, b := range t.Brokers {
		out[i] = b.Name
	}
	return out
}

// Diameter is the largest hop count between two sites of t, or -1 if t is
// not connected.
func Diameter(t *topology.Topology) int {
	d := 0
	names := sites(t)
	for _, s := range names {
		dist := hops(t, s)
		if len(dist) < len(names) {
			return -1
		}
		for _, h := range dist {
			d = max(d, h)
		}
	}
	return d
}

// hops returns the hop count from src to every reachable site.
func hops(t *topology.Topology, src string) map[string]int {
	dist := map[string]int{src: 0}
	queue := []string{src}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, n := range t.Neighbors(s) {
			if _, ok := dist[n.Broker.Name]; !ok {
				dist[n.Broker.Name] = dist[s] + 1
				queue = append(queue, n.Broker.Name)
			}
		}
	}
	return dist
}

// shortestPath returns the sites from src to dst (both included) along a
// path of fewest hops, preferring lower router IDs on ties, or nil if dst is
// unreachable.
func shortestPath(t *topology.Topology, src, dst string) []string {
	prev := map[string]string{src: ""}
	queue := []string{src}
	for len(queue) > 0 && prev[dst] == "" && dst != src {
		s := queue[0]
		queue = queue[1:]
		for _, n := range t.Neighbors(s) { // in router ID order
			if _, ok := prev[n.Broker.Name]; !ok {
				prev[n.Broker.Name] = s
				queue = append(queue, n.Broker.Name)
			}
		}
	}
	if _, ok := prev[dst]; !ok {
		return nil
	}
	var path []string
	for s := dst; s != ""; s = prev[s] {
		path = append(path, s)
		if s == src {
			break
		}
	}
	slices.Reverse(path)
	return path
}

// freePorts finds n distinct free TCP ports at site by listening on port
// 0. The ports are released before returning, so another process could in
// principle take one before the broker binds it; on a test machine that is
// rare, and a broker that cannot bind fails Start loudly.
// retryTakenPorts runs start up to three times while it fails because a
// port freePorts picked was taken by another process before the server
// bound it (freePorts must release its ports for the server to use them).
func retryTakenPorts(start func() (Deployment, error)) (Deployment, error) {
	for attempt := 1; ; attempt++ {
		d, err := start()
		if err == nil || attempt == 3 || !strings.Contains(strings.ToLower(err.Error()), "already in use") {
			return d, err
		}
	}
}

func freePorts(ctx context.Context, p Placement, site string, n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := p.Listen(ctx, site, "tcp", net.JoinHostPort(p.Host(site), "0"))
		if err != nil {
			return nil, fmt.Errorf("site %s: finding a free port: %w", site, err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// waitTCP waits until addr accepts a connection from site, or ctx ends, or
// alive reports an error (the process that should listen has died).
func waitTCP(ctx context.Context, p Placement, site, addr string, alive func() error) error {
	return waitAccepting(ctx, addr, alive, func(ctx context.Context) error {
		c, err := p.DialContext(ctx, site, "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// waitAccepting calls try, one second at most each time, every 100 ms
// until it succeeds, the process is no longer alive, or ctx ends.
func waitAccepting(ctx context.Context, addr string, alive func() error, try func(context.Context) error) error {
	for {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		err := try(tctx)
		cancel()
		if err == nil {
			return nil
		}
		if aerr := alive(); aerr != nil {
			return aerr
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never accepted a connection (last: %v): %w", addr, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// poll calls check every interval until it reports done, fails, or ctx
// ends; the error then says what check last reported.
// readyPoll is the pause between two readiness checks that read every
// site's monitoring endpoint: base for small meshes, and 25 ms per site
// beyond that, so that a 42-site check is made about once a second. Each
// check scrapes every broker in turn; at 100 ms the 42-site runs of
// docs/results/experiments/scale kept the runner and the brokers serving
// /metrics without pause (the runner alone about 0.15 of a core) while
// the brokers' routing was settling on a machine already short of CPU.
func readyPoll(base time.Duration, sites int) time.Duration {
	return max(base, time.Duration(sites)*25*time.Millisecond)
}

func poll(ctx context.Context, interval time.Duration, check func() (done bool, status string, err error)) error {
	for {
		done, status, err := check()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %s)", ctx.Err(), status)
		case <-time.After(interval):
		}
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// errJoin joins non-nil errors, or returns nil.
func errJoin(errs ...error) error { return errors.Join(errs...) }

// monitorClient is an HTTP client for the brokers' monitoring endpoints.
// Each endpoint is dialled from its own site, as an agent on the broker's
// host would scrape it, so that monitoring never crosses (and loads) the
// emulated links it is there to observe. siteOf maps an endpoint's
// host:port to its site.
func monitorClient(place Placement, siteOf func(addr string) (string, bool)) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			site, ok := siteOf(addr)
			if !ok {
				return nil, fmt.Errorf("monitoring endpoint %s belongs to no site", addr)
			}
			return place.DialContext(ctx, site, network, addr)
		},
	}}
}
