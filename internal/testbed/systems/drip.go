package systems

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/buildinfo"
	"github.com/dripmesh/drip/internal/topology"
	"github.com/dripmesh/drip/internal/transport"
)

// DripOptions configure the drip system.
type DripOptions struct {
	// Binary, when set, runs each broker as the process
	// `Binary broker --topology FILE --name SITE` at its site (how the lab
	// runs it); otherwise every broker runs in this process, on listeners
	// the Placement opens.
	Binary string
	// Env is added to the broker processes' environment (with Binary).
	Env []string
	// Args are added to every broker process's command line (with
	// Binary), after the flags the system sets: --wan, --pprof, ….
	Args []string
	// NoPeerCompression turns off the compression of peer links: the
	// system is then called drip-uncompressed, so that reports can show
	// what B-DRP routing and what compression contribute.
	NoPeerCompression bool
	// Configure adjusts each in-process broker's configuration.
	Configure func(*broker.Config)
	// Subscribe are the options of every subscription clients make (a
	// deadline, two paths).
	Subscribe []client.SubscribeOption
	// Client are the options of every client connection (congestion
	// control on or off, feedback asked or not).
	Client []client.Option
	// CongestionFeedback makes every client's subscriptions ask their
	// publishers to slow the flows that lose messages
	// (client.WithCongestionFeedback; publishers listen by default), and
	// says so in Info.
	CongestionFeedback bool
}

// NewDrip returns the drip system.
func NewDrip(o DripOptions) System { return &dripSystem{opts: o} }

type dripSystem struct{ opts DripOptions }

func (s *dripSystem) Name() string {
	if s.opts.NoPeerCompression {
		return "drip-uncompressed"
	}
	return "drip"
}

func (s *dripSystem) Available() error {
	if s.opts.Binary == "" {
		return nil
	}
	_, err := exec.LookPath(s.opts.Binary)
	return err
}

// dripSite is one broker's addresses.
type dripSite struct {
	name                  string
	id                    uint32
	client, peer, metrics string
	srv                   *broker.Server // in-process only
	proc                  *process       // exec only
	argv                  []string       // exec only: the command line, for Restart
	restarts              int            // exec only: Restart calls, naming their logs
	serveErr              chan error     // in-process: Serve's result
}

type dripDeployment struct {
	name   string
	spec   Spec
	place  Placement
	opts   DripOptions
	sites  map[string]*dripSite
	order  []string
	topo   []byte // the topology file, with addresses
	cancel context.CancelFunc
	wg     sync.WaitGroup
	http   *http.Client
}

func (s *dripSystem) Start(ctx context.Context, spec Spec) (Deployment, error) {
	if len(s.opts.Args) > 0 && s.opts.Binary == "" {
		return nil, fmt.Errorf("drip: broker flags %q need broker processes (a drip binary); in-process brokers take Configure", s.opts.Args)
	}
	d := &dripDeployment{name: s.Name(), spec: spec, place: spec.placement(), opts: s.opts, sites: map[string]*dripSite{}, order: sites(spec.Topology)}
	d.http = monitorClient(d.place, func(addr string) (string, bool) {
		for name, s := range d.sites {
			if s.metrics == addr {
				return name, true
			}
		}
		return "", false
	})
	ok := false
	defer func() {
		if !ok {
			_ = d.Close()
		}
	}()
	if err := d.start(ctx); err != nil {
		return nil, fmt.Errorf("drip: %w", err)
	}
	ok = true
	return d, nil
}

func (d *dripDeployment) start(ctx context.Context) error {
	t := d.spec.Topology
	// Addresses first: every broker dials its neighbours' peer addresses.
	listeners := map[string][3]net.Listener{}
	defer func() {
		for _, ls := range listeners {
			for _, l := range ls {
				if l != nil {
					l.Close()
				}
			}
		}
	}()
	file := topology.Topology{Mesh: t.Mesh, Links: t.Links}
	for _, b := range t.Brokers {
		host := d.place.Host(b.Name)
		site := &dripSite{name: b.Name, id: *b.ID, serveErr: make(chan error, 1)}
		if d.opts.Binary == "" {
			var ls [3]net.Listener
			for i := range ls {
				l, err := d.place.Listen(ctx, b.Name, "tcp", net.JoinHostPort(host, "0"))
				if err != nil {
					return fmt.Errorf("site %s: %w", b.Name, err)
				}
				ls[i] = l
			}
			listeners[b.Name] = ls
			site.client, site.peer, site.metrics = ls[0].Addr().String(), ls[1].Addr().String(), ls[2].Addr().String()
		} else {
			ports, err := freePorts(ctx, d.place, b.Name, 3)
			if err != nil {
				return err
			}
			site.client, site.peer, site.metrics = hostPort(host, ports[0]), hostPort(host, ports[1]), hostPort(host, ports[2])
		}
		d.sites[b.Name] = site
		id := *b.ID
		file.Brokers = append(file.Brokers, topology.Broker{Name: b.Name, ID: &id, Client: site.client, Peer: site.peer, Metrics: site.metrics})
	}
	var err error
	if d.topo, err = file.Marshal(); err != nil {
		return err
	}
	topoPath := filepath.Join(d.spec.Dir, "drip-topology.yaml")
	if err := os.WriteFile(topoPath, d.topo, 0o644); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	for _, name := range d.order {
		site := d.sites[name]
		if d.opts.Binary != "" {
			argv := []string{d.opts.Binary, "broker", "--topology", topoPath, "--name", name, "--log-format", "json",
				"--peer-compression=" + strconv.FormatBool(!d.opts.NoPeerCompression)}
			argv = append(argv, d.opts.Args...)
			site.argv = argv
			if site.proc, err = startProcess(d.place, name, "drip broker", filepath.Join(d.spec.Dir, "drip-"+name+".log"), argv, d.opts.Env); err != nil {
				return err
			}
			continue
		}
		cfg := broker.DefaultConfig(site.id, name)
		cfg.Mesh = t.Mesh
		for _, n := range t.Neighbors(name) {
			cfg.Peers = append(cfg.Peers, broker.Peer{ID: *n.Broker.ID, Addr: d.sites[n.Broker.Name].peer, Weight: n.Link.Weight})
		}
		cfg.PeerCompression = !d.opts.NoPeerCompression
		if d.opts.Configure != nil {
			d.opts.Configure(&cfg)
		}
		ls := listeners[name]
		dialer := transport.GRPCDialer{NotSentLowat: cfg.PeerNotSentLowat, DialContext: func(ctx context.Context, addr string) (net.Conn, error) {
			return d.place.DialContext(ctx, name, "tcp", addr)
		}}
		srv, err := broker.NewServer(cfg, broker.ServerConfig{ClientListener: ls[0], PeerListener: ls[1], MetricsListener: ls[2]}, broker.WithDialer(dialer))
		if err != nil {
			return fmt.Errorf("site %s: %w", name, err)
		}
		delete(listeners, name) // the server owns them now
		site.srv, site.metrics = srv, srv.MetricsAddr()
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			site.serveErr <- srv.Serve(runCtx)
		}()
	}
	for _, name := range d.order {
		site := d.sites[name]
		if err := waitTCP(ctx, d.place, name, site.client, site.alive); err != nil {
			return fmt.Errorf("site %s: %w", name, err)
		}
	}
	return nil
}

func (s *dripSite) alive() error {
	if s.proc != nil {
		return s.proc.alive()
	}
	select {
	case err := <-s.serveErr:
		s.serveErr <- err
		return fmt.Errorf("broker %s stopped: %v", s.name, err)
	default:
		return nil
	}
}

func (d *dripDeployment) Info() Info {
	mode := "in-process brokers (one Go process)"
	if d.opts.Binary != "" {
		mode = "one process per broker: " + d.opts.Binary + " broker"
	}
	cfg := broker.DefaultConfig(0, "x")
	cfg.PeerCompression = !d.opts.NoPeerCompression
	if d.opts.Configure != nil {
		d.opts.Configure(&cfg)
	}
	info := Info{
		System:  d.name,
		Version: buildinfo.String(),
		Config: map[string]string{
			"mode":               mode,
			"routing":            "B-DRP: link-state routes, Bloom-encoded predicates matched once at the ingress, DRP forwarding (Carzaniga09 §2-3)",
			"link_state":         fmt.Sprintf("hello %v, dead %v, cost %s", cfg.LinkState.HelloInterval, cfg.LinkState.DeadInterval, costMode(cfg)),
			"bloom":              cfg.Encoding.String(),
			"link_queue_bytes":   strconv.Itoa(cfg.LinkQueueBytes),
			"peer_notsent_lowat": strconv.Itoa(cfg.PeerNotSentLowat),
			"peer_compression":   map[bool]string{true: "deflate (one stream per link direction, sync flush per frame)", false: "none"}[cfg.PeerCompression],
			"advertise_interval": cfg.AdvertiseInterval.String(),
			"subscriber_queue":   fmt.Sprintf("%d messages / %d bytes, drops reported as lost", cfg.SubscriberQueue, cfg.SubscriberQueueBytes),
			"clients":            "drip client package over gRPC: one connection per site shared by that site's subscribers and publishers",
		},
		Files: map[string]string{"drip-topology.yaml": string(d.topo)},
	}
	if d.opts.Binary != "" && len(d.opts.Args) > 0 {
		// The flags override what the defaults above say; the record
		// keeps them as given.
		info.Config["broker_args"] = strings.Join(d.opts.Args, " ")
	}
	if d.opts.CongestionFeedback {
		info.Config["congestion_control"] = "subscriptions ask publishers to slow the flows that lose messages (Malekpour11, docs/design.md §12)"
	}
	return info
}

func costMode(cfg broker.Config) string {
	if cfg.LinkState.CostMode == 0 {
		return "configured weights"
	}
	return fmt.Sprint(cfg.LinkState.CostMode)
}

func (d *dripDeployment) Connect(ctx context.Context, site string) (bench.Endpoint, error) {
	s, ok := d.sites[site]
	if !ok {
		return nil, fmt.Errorf("drip: no site %q", site)
	}
	opts := append([]client.Option{client.WithName("drip-experiment"), client.WithDialOptions(
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return d.place.DialContext(ctx, site, "tcp", addr)
		}))}, d.opts.Client...)
	if d.opts.CongestionFeedback {
		opts = append(opts, client.WithCongestionFeedback(true))
	}
	c, err := client.Dial(ctx, s.client, opts...)
	if err != nil {
		return nil, err
	}
	return bench.DripEndpoint(c, d.opts.Subscribe...), nil
}

// Ready waits until every broker knows every router, holds the predicate
// advertisement of every broker that advertises one, and has the same
// link-state database digest as every other (the same version of every
// advertisement: on slow links a broker may still hold an older predicate
// of a neighbour), for three polls in a row.
func (d *dripDeployment) Ready(ctx context.Context) error {
	n := float64(len(d.order))
	last, stable := "", 0
	return poll(ctx, readyPoll(100*time.Millisecond, len(d.order)), func() (bool, string, error) {
		var routers, lsdb, advertised, digests, pending []float64
		advertisers := 0.0
		for _, name := range d.order {
			if err := d.sites[name].alive(); err != nil {
				return false, "", err
			}
			fams, err := d.scrape(ctx, name)
			if err != nil {
				return false, err.Error(), nil
			}
			routers = append(routers, gauge(fams, "drip_routers_known"))
			lsdb = append(lsdb, gauge(fams, "drip_lsdb_entries"))
			digests = append(digests, gauge(fams, "drip_lsdb_digest"))
			pending = append(pending, gauge(fams, "drip_advertisement_pending"))
			a := gauge(fams, "drip_advertised_filters")
			advertised = append(advertised, a)
			if a > 0 {
				advertisers++
			}
		}
		status := fmt.Sprintf("routers known %v of %v, LSDB entries %v, advertised filters %v, LSDB digests %v, advertisements pending %v",
			routers, n, lsdb, advertised, digests, pending)
		for i := range routers {
			// One LSA per router and one predicate advertisement per
			// broker that has subscribers, at least: a broker without
			// subscribers may advertise an empty predicate (its
			// refresh), which equal digests then show everywhere. A lone
			// broker never runs a shortest-path computation, so it
			// reports no routers.
			if (routers[i] != n && n > 1) || lsdb[i] < n+advertisers || digests[i] != digests[0] || pending[i] != 0 {
				stable = 0
				return false, status, nil
			}
		}
		if status == last {
			stable++
		} else {
			last, stable = status, 0
		}
		return stable >= 3, status, nil
	})
}

func (d *dripDeployment) scrape(ctx context.Context, site string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.sites[site].metrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", site, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scraping %s: %s: %s", site, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", site, err)
	}
	return fams, nil
}

// Metric implements MetricReader.
func (d *dripDeployment) Metric(ctx context.Context, site, name, label string) (map[string]float64, error) {
	if _, ok := d.sites[site]; !ok {
		return nil, fmt.Errorf("no site %q", site)
	}
	fams, err := d.scrape(ctx, site)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range fams[name].GetMetric() {
		key := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				key = lp.GetValue()
			}
		}
		out[key] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	return out, nil
}

// gauge returns the value of an unlabelled gauge, or -1 when absent.
func gauge(fams map[string]*dto.MetricFamily, name string) float64 {
	f, ok := fams[name]
	if !ok || len(f.GetMetric()) == 0 {
		return -1
	}
	return f.GetMetric()[0].GetGauge().GetValue()
}

// Kill implements Restarter: SIGKILL to the site's broker process group,
// as a crash would, and a wait until it is gone.
func (d *dripDeployment) Kill(site string) error {
	s, ok := d.sites[site]
	if !ok || s.proc == nil {
		return fmt.Errorf("drip: no broker process at site %q (brokers in this process cannot be killed)", site)
	}
	_ = syscall.Kill(-s.proc.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-s.proc.done:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("drip: broker %s (pid %d) still running %v after SIGKILL", site, s.proc.cmd.Process.Pid, killWait)
	}
}

// killWait bounds the wait for a killed broker to be reaped.
const killWait = 5 * time.Second

// Restart implements Restarter: the site's broker again, with the same
// command line and addresses, logging to drip-SITE.restart-N.log; it
// returns once its client port answers. The broker must have been killed.
func (d *dripDeployment) Restart(ctx context.Context, site string) error {
	s, ok := d.sites[site]
	if !ok || s.proc == nil {
		return fmt.Errorf("drip: no broker process at site %q to restart", site)
	}
	if s.proc.alive() == nil {
		return fmt.Errorf("drip: broker %s still runs; kill it first", site)
	}
	s.restarts++
	proc, err := startProcess(d.place, site, "drip broker", filepath.Join(d.spec.Dir, fmt.Sprintf("drip-%s.restart-%d.log", site, s.restarts)), s.argv, d.opts.Env)
	if err != nil {
		return err
	}
	s.proc = proc
	return waitTCP(ctx, d.place, site, s.client, s.alive)
}

// Servers implements ServerLister.
func (d *dripDeployment) Servers() []Server {
	var out []Server
	for _, name := range d.order {
		s := d.sites[name]
		sv := Server{Site: name, Client: s.client, Monitor: s.metrics}
		if s.proc != nil {
			sv.PID = s.proc.cmd.Process.Pid
		}
		out = append(out, sv)
	}
	return out
}

func (d *dripDeployment) Links() LinkCounter { return dripLinks{d} }

// dripLinks reads drip_link_sent_bytes_total{peer} from every broker.
type dripLinks struct{ d *dripDeployment }

func (l dripLinks) LinkBytes(ctx context.Context) (map[Direction]uint64, error) {
	out := map[Direction]uint64{}
	for _, name := range l.d.order {
		sent, err := l.d.Metric(ctx, name, "drip_link_sent_bytes_total", "peer")
		if err != nil {
			return nil, err
		}
		for peer, bytes := range sent {
			out[Direction{From: name, To: peer}] += uint64(bytes)
		}
	}
	return out, nil
}

func (d *dripDeployment) Close() error {
	var errs []error
	d.http.CloseIdleConnections()
	if d.cancel != nil {
		d.cancel()
	}
	d.wg.Wait()
	var procs []*process
	for _, name := range d.order {
		s := d.sites[name]
		if s == nil {
			continue
		}
		if s.srv != nil {
			if err := <-s.serveErr; err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("drip broker %s: %w", name, err))
			}
		}
		procs = append(procs, s.proc)
	}
	stopAll(procs, 10*time.Second)
	return errJoin(errs...)
}
