package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/netem"
	"github.com/dripmesh/drip/internal/topology"
)

type netemFlags struct {
	log      LogFlags
	topology string
	name     string
	dev      string
	interval time.Duration
	strict   bool
	metrics  string
	once     bool
	// endpointSlices is --peer-endpointslices: the headless Service.
	endpointSlices string
}

func newNetemCmd() *cobra.Command {
	var f netemFlags
	cmd := &cobra.Command{
		Use:   "netem",
		Short: "Shape this host's egress per neighbour as the topology's links say (tc-netem sidecar)",
		Long: `Shape the traffic this broker sends to each neighbour like the wide-area link
the topology describes: an htb class at the link's bandwidth, a netem leaf for
its delay, jitter and loss, and a u32 filter on the neighbour's address, all
programmed over netlink on --dev. Needs CAP_NET_ADMIN in the broker's network
namespace (in Kubernetes: a sidecar container of the broker's pod).

Every --interval the neighbours' names are resolved again (pods move) and the
device is brought to the plan, changing only what differs. On SIGINT or
SIGTERM everything installed is removed; at start, what an earlier run left
behind (qdisc handle d1:) is removed first.

When the kernel has no netem qdisc, links are shaped to their bandwidth only,
one warning per link names what was not applied, and
drip_netem_unsupported{feature} is 1; --strict makes that an error instead.

--once applies one pass and exits, leaving the shaping in place and not
removing an earlier run's first (for debugging: with --log-level debug every
change is logged, so a repeated --once shows what still differs; inspect with
'tc -s class show dev DEV'; remove with 'tc qdisc del dev DEV root handle d1:').`,
		Example: `  drip netem --topology /etc/drip/topology.yaml --name b0 --dev eth0
  drip netem --topology mesh.yaml --name b1 --dev eth0 --once --log-level debug`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	fl := cmd.Flags()
	f.log.Register(cmd)
	fl.StringVar(&f.topology, "topology", "", "topology file (YAML), re-read every interval (required)")
	fl.StringVar(&f.name, "name", "", "the broker whose egress is shaped, as named in the topology (required)")
	fl.StringVar(&f.dev, "dev", "eth0", "network device to shape")
	fl.DurationVar(&f.interval, "interval", 10*time.Second, "how often to re-resolve neighbours and reconcile")
	fl.BoolVar(&f.strict, "strict", false, "exit with an error when the kernel lacks netem and a link asks for delay, jitter or loss")
	fl.StringVar(&f.metrics, "metrics-addr", ":9101", "listen address for Prometheus /metrics (empty: off)")
	fl.BoolVar(&f.once, "once", false, "apply one pass and exit without removing the shaping (debugging)")
	fl.StringVar(&f.endpointSlices, "peer-endpointslices", "", endpointSlicesFlagHelp)
	_ = cmd.MarkFlagFilename("topology", "yaml", "yml")
	return cmd
}

func (f *netemFlags) run(cmd *cobra.Command) error {
	if f.topology == "" || f.name == "" {
		return errors.New("--topology and --name are required")
	}
	if f.interval <= 0 {
		return fmt.Errorf("--interval %v: must be positive", f.interval)
	}
	load := func() (*topology.Topology, error) { return topology.Load(f.topology) }
	t, err := load()
	if err != nil {
		return err
	}
	if _, ok := t.Find(f.name); !ok {
		return fmt.Errorf("%s has no broker named %q", f.topology, f.name)
	}
	log, err := f.log.Logger(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	log = log.With(zap.String("broker", f.name), zap.String("dev", f.dev))

	tc, err := netem.OpenNetlink(f.dev)
	if err != nil {
		return err
	}
	defer tc.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg := netem.Config{
		Load: load, Self: f.name, TC: tc, Interval: f.interval, Strict: f.strict,
		Log: log, Metrics: netem.NewMetrics(reg),
	}
	if f.endpointSlices != "" {
		if cfg.Resolver, err = endpointSlicesResolver(f.endpointSlices, log); err != nil {
			return err
		}
	}
	sh, err := netem.NewShaper(cfg)
	if err != nil {
		return err
	}

	ctx, stop := signalContext(cmd.Context())
	defer stop()
	if f.once {
		// No cleanup before or after: a repeated --once reconciles over
		// what the last one installed, which shows what would change.
		_, err := sh.Apply(ctx)
		return err
	}
	if f.metrics != "" {
		stopMetrics, err := serveNetemMetrics(f.metrics, reg, log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	log.Info("shaping", zap.String("topology", f.topology), zap.Duration("interval", f.interval), zap.Bool("strict", f.strict))
	return sh.Run(ctx)
}

// serveNetemMetrics serves reg on addr until the returned function is called.
func serveNetemMetrics(addr string, reg *prometheus.Registry, log *zap.Logger) (func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", zap.Error(err))
		}
	}()
	log.Info("serving metrics", zap.String("addr", lis.Addr().String()))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
