package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/topology"
)

func newLocalCmd() *cobra.Command {
	var (
		log      LogFlags
		topoFile string
		demo     bool
		duration time.Duration
	)
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run a whole mesh of brokers in this process, on loopback",
		Long: `Run every broker of a topology in this process, each with its own
listeners, until SIGINT/SIGTERM or --duration. Without --topology it runs the
embedded default: four brokers on 127.0.0.1 (clients on ports 7000-7003) in a
square with one diagonal. No root, no cluster.

With --demo it also starts two subscribers and a publisher and prints every
delivery, showing content-based routing across the mesh.

The brokers log to stderr at --log-level warn by default, so that the demo
reads alone: only what went wrong shows. --log-level info shows their link,
routing and subscription events, as drip broker logs them. Every broker runs
with the defaults drip broker --help shows (limits, queues, timers).

SIGINT (Ctrl-C) or SIGTERM stops the mesh and exits 0.`,
		Example: `  drip local --demo
  drip local --topology mesh.yaml
  drip local --print-topology > mesh.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if p, _ := cmd.Flags().GetBool("print-topology"); p {
				_, err := cmd.OutOrStdout().Write(topology.DefaultYAML())
				return err
			}
			t := topology.Default()
			if topoFile != "" {
				var err error
				if t, err = topology.Load(topoFile); err != nil {
					return err
				}
			}
			logger, err := log.Logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer func() { _ = logger.Sync() }()
			return runUntil(cmd.Context(), duration, func(ctx context.Context) error {
				return runLocal(ctx, t, logger, demo, cmd.OutOrStdout())
			})
		},
	}
	log.RegisterLevel(cmd, "warn")
	cmd.Flags().StringVar(&topoFile, "topology", "", "topology file (default: the embedded 4-broker mesh)")
	cmd.Flags().BoolVar(&demo, "demo", false, "run a demo publisher and subscribers and print deliveries")
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop after this long (0: run until interrupted)")
	cmd.Flags().Bool("print-topology", false, "print the embedded default topology and exit")
	return cmd
}

// localConfig is the configuration of broker b of t when drip local runs
// it: drip broker's defaults with the topology's identity, addresses and
// neighbours.
func localConfig(t *topology.Topology, b topology.Broker) (broker.Config, broker.ServerConfig, error) {
	cfg := broker.DefaultConfig(*b.ID, b.Name)
	sc := broker.ServerConfig{ClientAddr: b.Client, PeerAddr: b.Peer, MetricsAddr: b.Metrics}
	if sc.ClientAddr == "" || sc.PeerAddr == "" {
		return cfg, sc, fmt.Errorf("topology: broker %q needs client and peer addresses to run locally", b.Name)
	}
	err := fromTopology(&cfg, &sc, t, b.Name)
	return cfg, sc, err
}

// runLocal serves every broker of t until ctx ends. Its end by a signal is
// a clean stop, not an error.
func runLocal(ctx context.Context, t *topology.Topology, logger *zap.Logger, demo bool, out io.Writer) error {
	servers := make([]*broker.Server, 0, len(t.Brokers))
	for _, b := range t.Brokers {
		cfg, sc, err := localConfig(t, b)
		if err != nil {
			return err
		}
		srv, err := broker.NewServer(cfg, sc, broker.WithLogger(logger))
		if err != nil {
			return err
		}
		servers = append(servers, srv)
	}
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	var wg sync.WaitGroup
	errs := make([]error, len(servers))
	for i, srv := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = srv.Serve(serveCtx)
		}()
	}
	logger.Info("local mesh running", zap.Int("brokers", len(servers)), zap.String("mesh", t.Mesh))
	fmt.Fprintf(out, "mesh %s: %s in this process, clients at", t.Mesh, Plural(int64(len(servers)), "broker", "brokers"))
	for i, srv := range servers {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(out, "%s %s %s", sep, srv.Broker().Config().Name, srv.ClientAddr())
	}
	fmt.Fprintln(out, " (Ctrl-C stops it)")

	var demoErr error
	if demo {
		demoErr = runDemo(ctx, servers, out)
		if errors.Is(ctx.Err(), context.Canceled) {
			// Interrupted: whatever the demo was in the middle of
			// failing is the interruption, not news.
			demoErr = nil
		}
	}
	if demoErr == nil {
		<-ctx.Done()
	}
	stopServing()
	wg.Wait()
	return errors.Join(append(errs, demoErr)...)
}

// runDemo subscribes at two brokers with different predicates, publishes
// quotes from a third, and prints what arrives where. It fails if nothing
// arrived, so CI can use it as a smoke test.
func runDemo(ctx context.Context, servers []*broker.Server, out io.Writer) error {
	if len(servers) < 2 {
		return errors.New("demo needs at least two brokers")
	}
	// In the default square-with-diagonal, b1 reaches b3 in two hops.
	out = NewLockedWriter(out) // subscribers print concurrently
	pubAt := servers[1]
	subsAt := []*broker.Server{servers[0], servers[len(servers)-1]}
	preds := []string{`symbol = "DRIP" && price > 10`, `symbol prefix "NAT" || volume >= 5000`}

	var delivered atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()
	for k, srv := range subsAt {
		c, err := client.Dial(ctx, srv.ClientAddr(), client.WithName("demo-sub"))
		if err != nil {
			return err
		}
		defer c.Close()
		sub, err := c.Subscribe(ctx, preds[k])
		if err != nil {
			return fmt.Errorf("demo subscribe at %s: %w", srv.Broker().Config().Name, err)
		}
		fmt.Fprintf(out, "subscribed at %-4s %s\n", sub.Broker(), sub.Predicate())
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			for {
				d, err := sub.Next(ctx)
				if err != nil {
					return
				}
				delivered.Add(1)
				fmt.Fprintf(out, "  %-4s ← %s  (router %d, %s, %s)\n", sub.Broker(), formatAttrs(d.Attrs), d.Ingress,
					Plural(int64(d.Hops), "hop", "hops"), time.Since(d.PublishedAt).Round(10*time.Microsecond))
			}
		}()
	}
	if err := waitForRoutes(ctx, pubAt.Broker(), len(servers)); err != nil {
		return err
	}
	c, err := client.Dial(ctx, pubAt.ClientAddr(), client.WithName("demo-pub"))
	if err != nil {
		return err
	}
	defer c.Close()
	pub, err := c.NewPublisher(ctx)
	if err != nil {
		return err
	}
	symbols := []string{"DRIP", "NATS", "AMQ", "DRIP", "NATO"}
	rng := rand.New(rand.NewPCG(1, 2))
	published := 0
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil {
		m := client.Message{Attrs: client.Attrs{
			"symbol": symbols[published%len(symbols)],
			"price":  float64(rng.IntN(2000)) / 100,
			"volume": rng.IntN(10000),
		}}
		fmt.Fprintf(out, "published at %-4s %s\n", pubAt.Broker().Config().Name, formatAttrs(m.Attrs))
		if err := pub.Publish(m); err != nil {
			return err
		}
		published++
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	_, _ = pub.Close()
	time.Sleep(100 * time.Millisecond) // let the last deliveries print
	fmt.Fprintf(out, "demo: published %s, %s\n", Plural(int64(published), "message", "messages"),
		Plural(delivered.Load(), "delivery", "deliveries"))
	// Only a demo that ran its --duration judges the deliveries: one
	// interrupted in its first second may not have seen any yet.
	if published > 0 && delivered.Load() == 0 && !errors.Is(ctx.Err(), context.Canceled) {
		return errors.New("demo: no message was delivered")
	}
	return nil
}

// waitForRoutes waits until b reaches n routers and holds their predicates.
func waitForRoutes(ctx context.Context, b *broker.Broker, n int) error {
	for {
		in, err := b.Inspect(ctx)
		if err != nil {
			return err
		}
		withFilters := 0
		for _, f := range in.Predicates {
			if f > 0 {
				withFilters++
			}
		}
		if len(in.Routers) == n && withFilters >= 2 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func formatAttrs(a client.Attrs) string {
	names := make([]string, 0, len(a))
	for n := range a {
		names = append(names, n)
	}
	sort.Strings(names)
	s := "{"
	for i, n := range names {
		if i > 0 {
			s += ", "
		}
		switch v := a[n].(type) {
		case string:
			s += fmt.Sprintf("%s: %q", n, v)
		default:
			s += fmt.Sprintf("%s: %v", n, v)
		}
	}
	return s + "}"
}
