package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/authz"
	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/node"
	"github.com/dripmesh/drip/internal/topology"
)

type brokerFlags struct {
	log LogFlags

	topology string
	id       uint32
	name     string
	mesh     string
	client   string
	peer     string
	metrics  string
	peers    []string

	wan        bool
	costRTT    bool
	bloomBits  int
	bloomK     int
	bloomSchm  string
	linkMark   int
	linkQueue  int
	linkWait   time.Duration
	adInterval time.Duration
	compress   bool
	adDeltas   bool
	notSent    int
	subQueue   int
	memBudget  int
	maxSubs    int
	maxFilters int
	maxConstr  int
	maxString  int
	maxAttrs   int
	maxPayload int
	// Churn (docs/design.md §10).
	drainTimeout, drainOverlap time.Duration
	joinTimeout                time.Duration
	dedupWindow                int
	maxRouterID                uint32
	maxAdFilters               int
	matchAll                   string
	pprof                      bool

	// --hello-interval and --dead-interval (0: the default's or --wan's).
	helloInterval, deadInterval time.Duration
	// --keepalive and --suspect-multiplier (negative: the default's or
	// --wan's; 0 turns them off).
	keepalive         time.Duration
	suspectMultiplier int

	tlsCert, tlsKey, tlsCA string
	tlsClientCA            string
	tlsPeerIdentity        bool
	tlsClientAuth          bool
	tlsClientAuthOptional  bool

	endpointSlices string // --peer-endpointslices: the headless Service

	authzPolicy string // --authz-policy: the policy file
	// The metrics listener's TLS (--metrics-tls-*).
	metricsCert, metricsKey, metricsClientCA string
}

func newBrokerCmd() *cobra.Command { return newBrokerCmdWith(&brokerFlags{}) }

// newBrokerCmdWith binds the command's flags to f (tests read f back).
func newBrokerCmdWith(f *brokerFlags) *cobra.Command {
	def := broker.DefaultConfig(0, "")
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run a broker",
		Long: `Run one drip broker until SIGINT or SIGTERM, then shut down gracefully:
withdraw from the mesh, drain queued messages, end subscriptions.

The broker's identity and neighbours come either from a topology file
(--topology FILE --name NAME) or from flags (--id, --name, --peer ...).`,
		Example: `  drip broker --topology mesh.yaml --name b0
  drip broker --id 1 --name b1 --client-addr :7001 --peer-addr :7101 --peer 0=10.0.0.5:7100`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, sc, err := f.config(cmd.Flags().Changed)
			if err != nil {
				return err
			}
			log, err := f.log.Logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			if f.endpointSlices != "" {
				if sc.PeerResolver, err = endpointSlicesResolver(f.endpointSlices, log); err != nil {
					return err
				}
			}
			warnOpen(log, f)
			srv, err := broker.NewServer(cfg, sc, broker.WithLogger(log))
			if err != nil {
				return err
			}
			setMemoryLimit(cfg.MemoryBudget, log)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if f.authzPolicy != "" {
				hup := make(chan os.Signal, 1)
				signal.Notify(hup, syscall.SIGHUP)
				defer signal.Stop(hup)
				go reloadPolicyOnHangup(ctx, hup, f.authzPolicy, srv.Broker(), log)
			}
			return srv.Serve(ctx)
		},
	}
	fl := cmd.Flags()
	f.log.Register(cmd)
	fl.StringVar(&f.topology, "topology", "", "topology file (YAML); the broker is the one named by --name")
	fl.Uint32Var(&f.id, "id", 0, "router ID (unique in the mesh, small: destination sets are bitsets over IDs)")
	fl.StringVar(&f.name, "name", "", "broker name (required)")
	fl.StringVar(&f.mesh, "mesh", "", "mesh name; links form only within one mesh (default: the topology's, else \"drip\")")
	fl.StringVar(&f.client, "client-addr", ":7000", "listen address for publishers and subscribers")
	fl.StringVar(&f.peer, "peer-addr", ":7100", "listen address for neighbouring brokers")
	fl.StringVar(&f.metrics, "metrics-addr", ":9100", "listen address for Prometheus /metrics (empty: off)")
	fl.BoolVar(&f.pprof, "pprof", false, "serve Go's profiler under /debug/pprof/ on the metrics listener (docs/metrics.md)")
	fl.StringSliceVar(&f.peers, "peer", nil, "neighbour to dial as ID=HOST:PORT[@WEIGHT] (repeatable)")
	fl.BoolVar(&f.wan, "wan", false, "use wide-area link-state timers (slower hellos, longer dead interval)")
	fl.BoolVar(&f.costRTT, "cost-rtt", false, "use measured RTT as link cost instead of configured weights (Kim10)")
	fl.DurationVar(&f.helloInterval, "hello-interval", 0, "how often a hello goes to each neighbour (0: 1s, or 2s with --wan); unlike --wan it leaves link costs alone. Every broker of a mesh should use the same timers")
	fl.DurationVar(&f.deadInterval, "dead-interval", 0, "how long a neighbour may go unheard (no frame of any kind) before its adjacency is dropped (0: 4s, or 10s with --wan); at least 3× the hello interval, and longer where brokers may be starved of CPU or links carry only tens of kB/s (docs/design.md §3)")
	fl.DurationVar(&f.keepalive, "keepalive", -1, "longest a peer link stays silent: an idle link sends an empty frame this often, and hellos announce it so neighbours detect a failed link fast (default 250ms, or 500ms with --wan; 0: none)")
	fl.IntVar(&f.suspectMultiplier, "suspect-multiplier", -1, "route around a link at once when nothing arrived on it for this many of its neighbour's keepalives, and take it back at the first frame (default 4; 0: only the dead interval drops links; docs/design.md §3)")
	fl.StringVar(&f.bloomSchm, "bloom-scheme", def.Encoding.Scheme.String(), "Bloom encoding scheme: cat-v2 keeps ranges, prefixes and substrings selective; cat-v1 (Carzaniga09 §3) is what brokers older than the flag run. Every broker of a mesh must agree: brokers of different schemes refuse to link")
	fl.IntVar(&f.bloomBits, "bloom-bits", 0, "Bloom filter width M in bits, if not the scheme's (2048 for cat-v2, 512 for cat-v1); every broker of a mesh must agree")
	fl.IntVar(&f.bloomK, "bloom-hashes", 0, "Bloom hash positions K per category, if not the scheme's (6); every broker of a mesh must agree")
	_ = cmd.RegisterFlagCompletionFunc("bloom-scheme", fixedCompletions("cat-v2", "cat-v1"))
	fl.BoolVar(&f.adDeltas, "peer-predicate-deltas", def.PeerPredicateDeltas, "send predicate advertisements as deltas against the last one sent on the link, to neighbours that accept them")
	fl.BoolVar(&f.compress, "peer-compression", def.PeerCompression, "compress peer links (DEFLATE) with neighbours that accept it; --peer-compression=false saves CPU where links are fast")
	fl.IntVar(&f.notSent, "peer-notsent-lowat", def.PeerNotSentLowat, "bytes each peer connection may keep unsent in the kernel (TCP_NOTSENT_LOWAT): on a slow link the rest waits in the link queue, where control frames go first, instead of seconds of it in the socket; 0: the kernel's default (docs/design.md §4)")
	fl.DurationVar(&f.adInterval, "advertise-interval", def.AdvertiseInterval, "least time between two predicate advertisements; subscription changes within it are advertised together")
	fl.IntVar(&f.linkQueue, "link-queue-bytes", def.LinkQueueBytes, "bound on data queued per neighbour link; beyond it bundles wait (--link-wait) or are dropped")
	fl.IntVar(&f.linkMark, "link-mark-bytes", def.LinkMarkBytes, "data queued on a neighbour link from which its bundles are marked (congestion experienced): subscriptions with congestion control back off at a mark as at a loss, before the queue overflows; 0: no marks. Where the connection below stalls for longer than the queue lasts, marks come too late to help (docs/design.md §12, \"Marks\")")
	fl.DurationVar(&f.linkWait, "link-wait", def.SlowLinks.Behind, "how long a full link queue makes publishers and upstream brokers wait for room while the link still sends, before its bundles are dropped (0: drop at once)")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", def.DrainTimeout, "bound on a graceful shutdown (SIGTERM): clients moving away, withdrawal, links draining; keep it below Kubernetes' termination grace period")
	fl.DurationVar(&f.joinTimeout, "join-timeout", def.JoinTimeout, "how long a starting broker waits to be linked to every configured neighbour before it reports ready and takes publications anyway")
	fl.DurationVar(&f.drainOverlap, "drain-overlap", def.DrainOverlap, "how long a moving subscriber keeps both subscriptions: the time the mesh needs to learn where it went")
	fl.IntVar(&f.dedupWindow, "dedup-window", def.Dedup.Window, "messages per ingress broker remembered to pass each on once; a copy overtaken by more is dropped as stale")
	fl.Uint32Var(&f.maxRouterID, "max-router-id", def.MaxRouterID, "largest router ID of the mesh; bundles naming a larger one are refused")
	fl.IntVar(&f.maxAdFilters, "max-advertised-filters", def.LinkState.MaxFilters, "bound on the Bloom filters of one broker's predicate advertisement: larger ones from neighbours are refused (drip_advertisements_refused_total{reason=\"limit\"}), this broker's own are merged to fit; every broker of a mesh should use the same (0: none)")
	fl.StringVar(&f.matchAll, "match-all", def.MatchAll.Mode, "what this broker, as an ingress, does with other brokers' filters that match every message ('k exists' subscriptions, or a peer asking for everything): allow, refuse, or limit:<messages per second per broker>; what it leaves out is counted as drip_route_dropped_destinations_total{reason=\"match_all\"}")
	fl.IntVar(&f.subQueue, "subscriber-queue", def.SubscriberQueue, "bound on deliveries queued per subscriber; beyond it they are dropped and reported as lost")
	fl.IntVar(&f.memBudget, "memory-budget", def.MemoryBudget, "the broker's memory budget in bytes, also its Go memory limit unless GOMEMLIMIT is set: half bounds what all subscriber and link queues hold together, beyond which the subscribers holding the most lose their oldest deliveries (0: none)")
	fl.IntVar(&f.maxSubs, "max-subscriptions", def.MaxSubscriptions, "bound on subscriptions held by this broker")
	fl.IntVar(&f.maxFilters, "max-filters", def.Predicates.MaxFilters, "bound on filters (|| terms) per predicate")
	fl.IntVar(&f.maxConstr, "max-constraints", def.Predicates.MaxConstraints, "bound on constraints (&& terms) per filter")
	fl.IntVar(&f.maxString, "max-string", def.Messages.MaxString, "bound on the bytes of a string value in messages and predicates")
	fl.IntVar(&f.maxAttrs, "max-attributes", def.Messages.MaxAttributes, "bound on attributes per message")
	fl.IntVar(&f.maxPayload, "max-payload", def.Messages.MaxPayload, "bound on the payload bytes per message")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate for both listeners (enables TLS; needs --tls-ca)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "PEM key of --tls-cert")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "PEM CA that signs neighbours' certificates (mutual TLS between brokers) and, with --tls-client-auth, clients'")
	fl.BoolVar(&f.tlsClientAuth, "tls-client-auth", false, "require client certificates signed by --tls-client-ca (default --tls-ca)")
	fl.BoolVar(&f.tlsClientAuthOptional, "tls-client-auth-optional", false, "verify the certificates clients present against --tls-client-ca (default --tls-ca) but admit clients without one: certificate and token clients of --authz-policy on one port")
	fl.BoolVar(&f.tlsPeerIdentity, "tls-peer-identity", false, "require each peer's certificate to name the router it claims, as the URI SAN drip://<mesh>/router/<id> or the DNS SAN <id>.router.<mesh>.drip.internal, and sign every advertisement this broker originates with its certificate's key and verify every received one (needs --tls-ca, and per-router certificates on every broker of the mesh)")
	fl.StringVar(&f.tlsClientCA, "tls-client-ca", "", "PEM CA that signs clients' certificates, if not --tls-ca: a client certificate from its own issuer can never open a peer link")
	fl.StringVar(&f.endpointSlices, "peer-endpointslices", "", endpointSlicesFlagHelp)
	fl.StringVar(&f.authzPolicy, "authz-policy", "", "authorization policy `file` (YAML, docs/design.md §13): which clients may publish and see which messages; clients no rule matches are refused. SIGHUP reloads it for streams opened afterwards")
	fl.StringVar(&f.metricsCert, "metrics-tls-cert", "", "PEM certificate to serve /metrics (and pprof) over HTTPS; a TLS mesh should set it: /metrics names subscribers and links")
	fl.StringVar(&f.metricsKey, "metrics-tls-key", "", "PEM key of --metrics-tls-cert")
	fl.StringVar(&f.metricsClientCA, "metrics-tls-client-ca", "", "PEM CA whose client certificates alone may read /metrics and pprof (needs --metrics-tls-cert)")
	_ = cmd.MarkFlagFilename("authz-policy", "yaml", "yml")
	_ = cmd.MarkFlagFilename("topology", "yaml", "yml")
	return cmd
}

// timers applies --hello-interval, --dead-interval, --keepalive and
// --suspect-multiplier over the timers of the default or --wan. The dead interval must be at least three hellos:
// two hellos late (a busy neighbour, a frame of data ahead of them) must
// not drop an adjacency, whose flap costs the whole mesh a reroute.
func (f *brokerFlags) timers(ls *linkstate.Config) error {
	switch {
	case f.helloInterval < 0:
		return fmt.Errorf("--hello-interval %v is negative (0: the default)", f.helloInterval)
	case f.deadInterval < 0:
		return fmt.Errorf("--dead-interval %v is negative (0: the default)", f.deadInterval)
	}
	if f.helloInterval > 0 {
		ls.HelloInterval = f.helloInterval
	}
	if f.deadInterval > 0 {
		ls.DeadInterval = f.deadInterval
	}
	if (f.helloInterval > 0 || f.deadInterval > 0) && ls.DeadInterval < 3*ls.HelloInterval {
		return fmt.Errorf("dead interval %v is shorter than three hello intervals (%v): set --dead-interval to at least %v or a shorter --hello-interval",
			ls.DeadInterval, ls.HelloInterval, 3*ls.HelloInterval)
	}
	if f.keepalive >= 0 {
		ls.Keepalive = f.keepalive
	}
	if f.suspectMultiplier >= 0 {
		ls.SuspectMultiplier = f.suspectMultiplier
	}
	return nil
}

// config builds the broker's configuration; changed says which flags were
// given explicitly, which then win over the topology file.
func (f *brokerFlags) config(changed func(flag string) bool) (broker.Config, broker.ServerConfig, error) {
	if f.name == "" {
		return broker.Config{}, broker.ServerConfig{}, fmt.Errorf("--name is required")
	}
	cfg := broker.DefaultConfig(f.id, f.name)
	sc := broker.ServerConfig{ClientAddr: f.client, PeerAddr: f.peer, MetricsAddr: f.metrics, Pprof: f.pprof}
	if f.topology != "" {
		t, err := topology.Load(f.topology)
		if err != nil {
			return cfg, sc, err
		}
		if err := fromTopology(&cfg, &sc, t, f.name); err != nil {
			return cfg, sc, err
		}
		// In Kubernetes the topology names pods by DNS, which is how
		// neighbours reach them; the pod itself listens on the flags'
		// wildcard addresses.
		if changed("client-addr") {
			sc.ClientAddr = f.client
		}
		if changed("peer-addr") {
			sc.PeerAddr = f.peer
		}
		if changed("metrics-addr") {
			sc.MetricsAddr = f.metrics
		}
	}
	for _, p := range f.peers {
		peer, err := parsePeer(p)
		if err != nil {
			return cfg, sc, err
		}
		cfg.Peers = append(cfg.Peers, peer)
	}
	if f.mesh != "" {
		cfg.Mesh = f.mesh
	}
	if f.wan {
		cfg.LinkState = linkstate.DefaultWANConfig(cfg.ID, cfg.Name)
	}
	if f.costRTT {
		cfg.LinkState.CostMode = linkstate.CostRTT
	}
	if err := f.timers(&cfg.LinkState); err != nil {
		return cfg, sc, err
	}
	scheme, err := encoding.ParseScheme(f.bloomSchm)
	if err != nil {
		return cfg, sc, fmt.Errorf("--bloom-scheme: %w", err)
	}
	cfg.Encoding = scheme.DefaultParams()
	if f.bloomBits != 0 {
		cfg.Encoding.M = f.bloomBits
	}
	if f.bloomK != 0 {
		cfg.Encoding.K = f.bloomK
	}
	cfg.LinkQueueBytes, cfg.SubscriberQueue, cfg.MaxSubscriptions = f.linkQueue, f.subQueue, f.maxSubs
	cfg.SlowLinks.Behind, cfg.LinkMarkBytes = f.linkWait, f.linkMark
	cfg.DrainTimeout, cfg.DrainOverlap, cfg.Dedup.Window, cfg.MaxRouterID = f.drainTimeout, f.drainOverlap, f.dedupWindow, f.maxRouterID
	cfg.LinkState.MaxFilters = f.maxAdFilters
	if cfg.MatchAll, err = node.ParseMatchAllPolicy(f.matchAll); err != nil {
		return cfg, sc, err // names the policy, as --match-all's help does
	}
	cfg.JoinTimeout, cfg.MemoryBudget = f.joinTimeout, f.memBudget
	cfg.AdvertiseInterval, cfg.PeerCompression, cfg.PeerNotSentLowat = f.adInterval, f.compress, f.notSent
	cfg.PeerPredicateDeltas = f.adDeltas
	cfg.Predicates.MaxFilters, cfg.Predicates.MaxConstraints = f.maxFilters, f.maxConstr
	cfg.Predicates.MaxString, cfg.Messages.MaxString = f.maxString, f.maxString
	cfg.Messages.MaxAttributes, cfg.Messages.MaxPayload = f.maxAttrs, f.maxPayload
	tlsFiles := broker.TLSFiles{CertFile: f.tlsCert, KeyFile: f.tlsKey, CAFile: f.tlsCA}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return cfg, sc, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if f.tlsClientAuth && f.tlsCA == "" {
		return cfg, sc, fmt.Errorf("--tls-client-auth needs --tls-ca")
	}
	if f.tlsClientAuthOptional && (f.tlsClientAuth || f.tlsCA == "") {
		return cfg, sc, fmt.Errorf("--tls-client-auth-optional needs --tls-ca and excludes --tls-client-auth")
	}
	if f.tlsCert != "" && f.tlsCA == "" {
		// Without a CA the peer listener could verify no neighbour, and
		// any process that reached the port would join the mesh.
		return cfg, sc, fmt.Errorf("--tls-cert needs --tls-ca, the CA that signs the brokers' certificates: without it any peer could join the mesh")
	}
	sc.PeerTLS = tlsFiles
	sc.PeerTLS.RequireClientCert = f.tlsCA != ""
	if f.tlsPeerIdentity && f.tlsCA == "" {
		return cfg, sc, fmt.Errorf("--tls-peer-identity needs --tls-cert, --tls-key and --tls-ca")
	}
	sc.PeerIdentity = f.tlsPeerIdentity
	sc.ClientTLS = tlsFiles
	sc.ClientTLS.RequireClientCert = f.tlsClientAuth
	sc.ClientTLS.VerifyClientCertIfGiven = f.tlsClientAuthOptional
	if (f.metricsCert == "") != (f.metricsKey == "") {
		return cfg, sc, fmt.Errorf("--metrics-tls-cert and --metrics-tls-key go together")
	}
	if f.metricsClientCA != "" && f.metricsCert == "" {
		return cfg, sc, fmt.Errorf("--metrics-tls-client-ca needs --metrics-tls-cert and --metrics-tls-key: client certificates are checked over HTTPS")
	}
	sc.MetricsTLS = broker.TLSFiles{CertFile: f.metricsCert, KeyFile: f.metricsKey, CAFile: f.metricsClientCA, RequireClientCert: f.metricsClientCA != ""}
	if f.authzPolicy != "" {
		p, err := authz.Load(f.authzPolicy)
		if err != nil {
			return cfg, sc, err
		}
		sc.AuthzPolicy = p
	}
	if f.tlsClientCA != "" {
		if !f.tlsClientAuth && !f.tlsClientAuthOptional {
			return cfg, sc, fmt.Errorf("--tls-client-ca needs --tls-client-auth or --tls-client-auth-optional: it verifies client certificates")
		}
		sc.ClientTLS.CAFile = f.tlsClientCA
	}
	return cfg, sc, cfg.Validate()
}

// reloadPolicyOnHangup loads the policy file again at each signal on hup
// and installs it; a file that no longer parses leaves the policy in force
// and says why.
func reloadPolicyOnHangup(ctx context.Context, hup <-chan os.Signal, file string, b *broker.Broker, log *zap.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		p, err := authz.Load(file)
		if err == nil {
			err = b.SetAuthzPolicy(p)
		}
		if err != nil {
			log.Error("authorization policy not reloaded; the previous one stays in force", zap.Error(err))
			continue
		}
		log.Info("authorization policy reloaded", zap.String("file", file), zap.Int("rules", len(p.Rules)))
	}
}

// fromTopology takes the broker's identity, addresses and neighbours from
// a topology file.
func fromTopology(cfg *broker.Config, sc *broker.ServerConfig, t *topology.Topology, name string) error {
	me, ok := t.Find(name)
	if !ok {
		return fmt.Errorf("topology has no broker named %q", name)
	}
	cfg.ID, cfg.Mesh = *me.ID, t.Mesh
	cfg.LinkState = linkstate.DefaultConfig(cfg.ID, name)
	if me.Client != "" {
		sc.ClientAddr = me.Client
	}
	if me.Peer != "" {
		sc.PeerAddr = me.Peer
	}
	if me.Metrics != "" {
		sc.MetricsAddr = me.Metrics
	}
	for _, n := range t.Neighbors(name) {
		if n.Broker.Peer == "" {
			return fmt.Errorf("topology: neighbour %q of %q has no peer address", n.Broker.Name, name)
		}
		cfg.Peers = append(cfg.Peers, broker.Peer{ID: *n.Broker.ID, Addr: n.Broker.Peer, Weight: n.Link.Weight})
	}
	return nil
}

// parsePeer parses ID=HOST:PORT[@WEIGHT].
func parsePeer(s string) (broker.Peer, error) {
	id, rest, ok := strings.Cut(s, "=")
	if !ok {
		return broker.Peer{}, fmt.Errorf("--peer %q: want ID=HOST:PORT[@WEIGHT]", s)
	}
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		return broker.Peer{}, fmt.Errorf("--peer %q: router ID %q is not a number", s, id)
	}
	p := broker.Peer{ID: uint32(n), Addr: rest, Weight: 1}
	if addr, w, ok := strings.Cut(rest, "@"); ok {
		wn, err := strconv.ParseUint(w, 10, 32)
		if err != nil || wn == 0 {
			return broker.Peer{}, fmt.Errorf("--peer %q: weight %q is not a positive number", s, w)
		}
		p.Addr, p.Weight = addr, uint32(wn)
	}
	if p.Addr == "" {
		return broker.Peer{}, fmt.Errorf("--peer %q: missing address", s)
	}
	return p, nil
}

// runUntil runs fn with a context that ends on SIGINT/SIGTERM or after d
// (0: no limit).
func runUntil(parent context.Context, d time.Duration, fn func(context.Context) error) error {
	ctx, stop := signal.NotifyContext(parent, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	return fn(ctx)
}

// setMemoryLimit makes seven eighths of the memory budget the Go
// runtime's soft memory limit too, unless GOMEMLIMIT sets one: the budget
// bounds what the queues hold, and the limit makes the collector return
// the rest before the heap doubles (GOGC=100 lets it reach twice what is
// live), so that the process's resident set stays under the budget
// (docs/design.md §14, docs/results/memory-budget.md). The eighth left is
// for what the runtime does not count (the binary, C and kernel buffers)
// and for the collector's lag: at the whole budget the resident set
// peaked 9% over it. The queues' accounting counts a message once per
// subscriber it waits for, so what is live stays well under the limit.
func setMemoryLimit(budget int, log *zap.Logger) {
	if budget <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := int64(budget) / 8 * 7
	debug.SetMemoryLimit(limit)
	log.Info("memory budget sets the Go memory limit", zap.Int("budget", budget), zap.Int64("limit", limit))
}

// warnOpen says once, at warn level, that a broker without TLS serves an
// open mesh, and how to close it: on its own, drip broker listens in
// plaintext on every interface, where anyone who reaches the peer port
// joins the mesh as any router.
func warnOpen(log *zap.Logger, f *brokerFlags) {
	if f.tlsCert != "" {
		return
	}
	log.Warn("this broker serves without TLS: the mesh is open. Whoever reaches its peer port can join as any router ID, "+
		"receive every message and inject its own; whoever reaches its client port can publish and subscribe. "+
		"Close it with --tls-cert, --tls-key and --tls-ca (mutual TLS between brokers), --tls-peer-identity (certificates that name their router, "+
		"signed advertisements), --tls-client-ca with --tls-client-auth (client certificates) and --authz-policy, or listen only on a private "+
		"network (--peer-addr, --client-addr); see docs/security.md",
		zap.String("peer_addr", f.peer), zap.String("client_addr", f.client), zap.Bool("all_interfaces", allInterfaces(f.peer) || allInterfaces(f.client)))
}

// allInterfaces says whether a listen address names no host: every
// interface.
func allInterfaces(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && (host == "" || host == "0.0.0.0" || host == "::")
}
