package cli

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	dripcli "github.com/dripmesh/drip/internal/cli"
	"github.com/dripmesh/drip/internal/testbed/perf"
)

func newPerfCmd() *cobra.Command {
	var (
		quick      bool
		quiet      bool
		o          perf.Config
		cases      []string
		henjesF    []int
		henjesR    []int
		dripBinary string
	)
	def := perf.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "perf",
		Short: "Measure drip's data plane against nats-server and ActiveMQ on this machine (issue 12)",
		Long: `Run drip broker processes, nats-server and Apache ActiveMQ side by side on
loopback and measure them with their own clients, interleaved (drip, NATS, drip,
NATS, ...), the median of --reps repetitions:

  one-to-one       1 publisher → 1 subscriber, max rate, 16-byte payloads
  one-to-one-maps  the same, drip's clients with a fresh attribute map per message
  fan-out          1 publisher → --fan-out subscribers (20)
  two-brokers      publisher on one broker, subscriber on the other; drip with
                   --peer-compression=false (and once with compression, the default)
  (cpu-per-delivery, the servers' CPU per delivered message, from the three above)
  latency          p50/p99/max at a fixed --latency-rate (10,000 msg/s)
  inert-filters    drip alone: --inert-filters (10,000) inert filters vs none
  content-routing  100 subscribers, Carzaniga09's single-constraint workload:
                   drip matching vs NATS filtering in its clients
  henjes07         Henjes07's method on one broker, drip vs ActiveMQ: received
                   msg/s against non-matching filters and replication grade, with
                   the fitted model t_rcv + n_fltr·t_fltr + r·t_tx

Brokers are the drip beside this executable (make build puts bin/drip beside
bin/driplab), else drip on PATH, or --drip-binary. Results go to --out: perf-CASE.json
per case, perf-summary.json and PNG plots; --report writes a Markdown page from them.
The full run takes about 13 minutes on 2 cores; --quick runs every case briefly.
ActiveMQ missing skips henjes07; nats-server missing fails the cases that need it.`,
		Example: `  driplab perf --quick --out /tmp/perf
  driplab perf --cases one-to-one,latency --reps 5
  driplab perf --out docs/results/perf --report docs/results/perf.md   # make perf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := def
			if quick {
				cfg = perf.QuickConfig()
			}
			fl := cmd.Flags()
			set := func(name string, apply func()) {
				if fl.Changed(name) {
					apply()
				}
			}
			set("cases", func() { cfg.Cases = cases })
			set("reps", func() { cfg.Reps = o.Reps })
			set("warmup", func() { cfg.Warmup = o.Warmup })
			set("duration", func() { cfg.Duration = o.Duration })
			set("drain", func() { cfg.Drain = o.Drain })
			set("fan-out", func() { cfg.FanOut = o.FanOut })
			set("latency-rate", func() { cfg.LatencyRate = o.LatencyRate })
			set("inert-filters", func() { cfg.InertFilters = o.InertFilters })
			set("content-subscribers", func() { cfg.ContentSubscribers = o.ContentSubscribers })
			set("henjes-filters", func() { cfg.HenjesFilters = henjesF })
			set("henjes-replication", func() { cfg.HenjesReplication = henjesR })
			set("henjes-warmup", func() { cfg.HenjesWarmup = o.HenjesWarmup })
			set("henjes-duration", func() { cfg.HenjesDuration = o.HenjesDuration })
			set("henjes-drain", func() { cfg.HenjesDrain = o.HenjesDrain })
			cfg.Out, cfg.Report, cfg.Dir, cfg.Note, cfg.Source = o.Out, o.Report, o.Dir, o.Note, o.Source
			var err error
			if dripBinary == "" {
				if dripBinary, err = findDrip(); err != nil {
					return err
				}
			}
			cfg.DripBinary = dripBinary
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("finding this executable, which runs the content-routing subscribers: %w", err)
			}
			cfg.SubscriberCommand = []string{exe, "perf", "subscribers"}
			cfg.Command = perf.ShellQuote(os.Args)
			if !quiet {
				cfg.Progress = dripcli.NewLockedWriter(cmd.ErrOrStderr())
			}
			ctx, stop := dripcli.SignalContext(cmd.Context())
			defer stop()
			sum, err := perf.Run(ctx, cfg)
			if sum != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "results in %s", cfg.Out)
				if cfg.Report != "" {
					fmt.Fprintf(cmd.OutOrStdout(), ", report %s", cfg.Report)
				}
				fmt.Fprintf(cmd.OutOrStdout(), " (%.1f minutes)\n", float64(sum.Seconds)/60)
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&quick, "quick", false, "a smoke run of every case: 1 repetition of 1 s, 1,000 inert filters, a 2×2 Henjes07 grid (flags given explicitly still apply)")
	fl.StringSliceVar(&cases, "cases", nil, "cases to run, comma-separated (default all): "+strings.Join(perf.CaseNames(), ", "))
	fl.IntVar(&o.Reps, "reps", def.Reps, "interleaved repetitions per system")
	fl.DurationVar(&o.Warmup, "warmup", def.Warmup, "sending before each run's measured window")
	fl.DurationVar(&o.Duration, "duration", def.Duration, "each run's measured window")
	fl.DurationVar(&o.Drain, "drain", def.Drain, "longest wait for late deliveries after sending")
	fl.IntVar(&o.FanOut, "fan-out", def.FanOut, "subscribers of the fan-out case")
	fl.Float64Var(&o.LatencyRate, "latency-rate", def.LatencyRate, "publishing rate of the latency case, msg/s")
	fl.IntVar(&o.InertFilters, "inert-filters", def.InertFilters, "inert filters of the inert-filters case")
	fl.IntVar(&o.ContentSubscribers, "content-subscribers", def.ContentSubscribers, "subscribers of the content-routing case")
	fl.IntSliceVar(&henjesF, "henjes-filters", def.HenjesFilters, "Henjes07: non-matching filters installed, one point per value")
	fl.IntSliceVar(&henjesR, "henjes-replication", def.HenjesReplication, "Henjes07: replication grades (matching subscribers)")
	fl.DurationVar(&o.HenjesWarmup, "henjes-warmup", def.HenjesWarmup, "Henjes07: warm-up of each run")
	fl.DurationVar(&o.HenjesDuration, "henjes-duration", def.HenjesDuration, "Henjes07: measured window of each run")
	fl.DurationVar(&o.HenjesDrain, "henjes-drain", def.HenjesDrain, "Henjes07: longest wait for late deliveries (the case measures throughput only)")
	fl.StringVar(&dripBinary, "drip-binary", "", "the drip binary whose brokers are measured (default: beside this executable, else on PATH)")
	fl.StringVar(&o.Out, "out", "perf-results", "directory for the JSON and PNG results")
	fl.StringVar(&o.Report, "report", "", "write a Markdown report here (make perf: docs/results/perf.md)")
	fl.StringVar(&o.Dir, "keep", "", "keep the servers' configuration and logs in this directory (default: a temporary one, removed)")
	fl.StringVar(&o.Note, "note", "", "a note for the top of the report, such as why it was measured")
	fl.StringVar(&o.Source, "source", "", "what code is measured, for the record (make perf: the git commit)")
	fl.BoolVarP(&quiet, "quiet", "q", false, "no progress lines")
	_ = cmd.RegisterFlagCompletionFunc("cases", dripcli.FixedCompletions(perf.CaseNames()...))
	cmd.AddCommand(newPerfSubscribersCmd(), newPerfReportCmd())
	return cmd
}

// newPerfReportCmd redraws the results of a run from its JSON.
func newPerfReportCmd() *cobra.Command {
	var out, report string
	cmd := &cobra.Command{
		Use:   "report --out DIR [--report FILE]",
		Short: "Rewrite the summary, plots and Markdown report from the JSON of an earlier driplab perf",
		Long: `Read perf-summary.json and perf-CASE.json from --out and write the summary, the
plots and (with --report) the Markdown page again, as driplab perf would have:
after a change to how results are shown, without measuring again.`,
		Example: `  driplab perf report --out docs/results/perf --report docs/results/perf.md`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := perf.Render(out, report)
			return err
		},
	}
	cmd.Flags().StringVar(&out, "out", "perf-results", "directory holding the JSON results; plots are written there")
	cmd.Flags().StringVar(&report, "report", "", "write the Markdown report here")
	return cmd
}

// newPerfSubscribersCmd is the content-routing case's subscriber process,
// which driplab perf starts and drives over its standard input and output.
func newPerfSubscribersCmd() *cobra.Command {
	var spec perf.SubscribersSpec
	var file string
	cmd := &cobra.Command{
		Use:    "subscribers --system drip|nats --addr HOST:PORT --predicates FILE",
		Short:  "Run counting subscribers for driplab perf (started by it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := os.Open(file)
			if err != nil {
				return fmt.Errorf("--predicates: %w", err)
			}
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				if line := strings.TrimSpace(sc.Text()); line != "" {
					spec.Predicates = append(spec.Predicates, line)
				}
			}
			f.Close()
			if err := sc.Err(); err != nil {
				return fmt.Errorf("--predicates %s: %w", file, err)
			}
			ctx, stop := dripcli.SignalContext(cmd.Context())
			defer stop()
			return perf.RunSubscribers(ctx, spec, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&spec.System, "system", "", "drip or nats")
	fl.StringVar(&spec.Addr, "addr", "", "the broker's client address")
	fl.StringVar(&file, "predicates", "", "file of predicates, one per line: one subscriber each")
	fl.Uint32Var(&spec.Run, "run", 0, "the run whose messages count (their payloads name it)")
	for _, f := range []string{"system", "addr", "predicates"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}
