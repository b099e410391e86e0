package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/dripmesh/drip/internal/bench"
)

func newBenchCmd() *cobra.Command {
	var (
		conn         connFlags
		brokers      []string
		workloadName string
		names        int
		seed         int64
		cfg          bench.Config
		mode         string
		perSec       = rateValue(100)
		rateStart    rateValue
		reportPath   string
		asJSON       bool
		quiet        bool
	)
	cmd := &cobra.Command{
		Use:   "bench --broker ADDR[,ADDR...]",
		Short: "Drive the Carzaniga09 §5.1.4 workload against a running mesh and check exactness",
		Long: `Run the experimental program of Carzaniga09 §5.1.4 against a running mesh:
subscribers set generated predicates (spread round-robin over the brokers),
wait --warmup for routing state to propagate, then publishers (round-robin too)
send generated messages for --duration at a constant rate, as Poisson
processes, or as Poisson processes on a linear ramp from --rate-start to --rate.

Every message is checked against every subscriber's predicate, so the bench
knows the ideal deliveries exactly; it reports undelivered messages, false
positives (deliveries a predicate does not match) and duplicates, and
end-to-end latency from send times embedded in the payloads (the bench's own
clock). A progress line goes to standard error every second and a summary to
standard output at the end; the full JSON report (a series per second) to
--report FILE or, with --json, to standard output. The report is written also
when the run fails or is interrupted (Ctrl-C). The exit status is 1 if any
delivery was a false positive or a duplicate.

Clients fail over: each is given every broker, its own first, and moves to the
next when its broker fails or drains. The summary and the report count the
gaps (subscriptions installed again after their broker failed, and for how
long), publisher failovers and what they had in flight, and per second what
was undelivered and duplicated, so churn can be measured with the same oracle.

Workloads: "single" is the comparative workload of Carzaniga09 §5.2.1 (filters of
one constraint over 200 names; with 80 subscribers of 20 filters a message
matches about 5% of them); "default" is the generative model of §5.1.4 (one to
five constraints over 10 names: far higher replication); "ranges" is single with
mostly numeric ranges ("price between"). --names changes the vocabulary, the
knob for replication.`,
		Example: `  drip bench --broker localhost:7000 --duration 10s --rate 500
  drip bench --broker b0:7000,b1:7000,b2:7000,b3:7000 --mode ramp --rate-start 80 --rate 8000 \
      --duration 60s --report ramp.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := bench.Preset(workloadName)
			if err != nil {
				return fmt.Errorf("--workload: %w", err)
			}
			if cmd.Flags().Changed("names") {
				w.Names = names
			}
			w.Seed = seed
			cfg.Brokers, cfg.WorkloadName, cfg.Workload = brokers, workloadName, w
			cfg.Mode, cfg.Rate, cfg.RateStart = bench.Mode(mode), float64(perSec), float64(rateStart)
			if cfg.Mode != bench.Ramp && cmd.Flags().Changed("rate-start") {
				return fmt.Errorf("--rate-start applies to --mode ramp only")
			}
			if len(cfg.Brokers) == 0 {
				return errors.New("--broker is required: the addresses of the mesh's brokers, comma-separated")
			}
			if cfg.ClientOptions, err = conn.options(); err != nil {
				return err
			}
			if !quiet {
				cfg.Progress = cmd.ErrOrStderr()
			}
			// Open the report first: a bad path should fail before the run.
			var reportFile *os.File
			if reportPath != "" && reportPath != "-" {
				if reportFile, err = os.Create(reportPath); err != nil {
					return fmt.Errorf("--report: %w", err)
				}
				defer reportFile.Close()
			}

			cfg.ConnectTimeout = conn.timeout
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			rep, runErr := bench.Run(ctx, cfg)
			if rep == nil {
				return runErr
			}
			// The report is written whatever happened: an interrupted or
			// failed run still leaves its numbers (and says why it stopped).
			// The summary goes to standard output, or to standard error when
			// the JSON does; with -q not at all (in a container log, stdout
			// and stderr are merged chunk by chunk, and a stderr line written
			// while the report is read would land inside it).
			summary := cmd.OutOrStdout()
			if asJSON || reportPath == "-" {
				summary = cmd.ErrOrStderr()
				if err := writeReport(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			}
			if reportFile != nil {
				if err := writeReport(reportFile, rep); err != nil {
					return err
				}
				if err := reportFile.Close(); err != nil {
					return fmt.Errorf("writing the report: %w", err)
				}
			}
			if !quiet {
				printBenchSummary(summary, rep)
			}
			switch {
			case errors.Is(runErr, context.Canceled):
				return errors.New("interrupted: the report holds what was measured until then")
			case runErr != nil:
				return runErr
			case !rep.Exact():
				return fmt.Errorf("exactness violated: %d false positives, %d duplicates", rep.Totals.FalsePositives, rep.Totals.Duplicates)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&brokers, "broker", nil, "broker addresses, host:port, comma-separated or repeated")
	fl.StringVar(&workloadName, "workload", "single", "workload preset: single, default or ranges")
	fl.IntVar(&names, "names", 0, "attribute-name vocabulary size (default: the preset's)")
	fl.Int64Var(&seed, "seed", 1, "seed of the predicates and messages")
	fl.IntVar(&cfg.Subscribers, "subscribers", 80, "subscribers, one generated predicate each")
	fl.IntVar(&cfg.Publishers, "publishers", 80, "publishers, sharing the rate equally")
	fl.StringVar(&mode, "mode", string(bench.Poisson), "send mode: constant, poisson or ramp")
	fl.Var(&perSec, "rate", "total messages per second (the final rate for ramp)")
	fl.Var(&rateStart, "rate-start", "total messages per second at the start of a ramp")
	fl.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long to send")
	fl.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "pause after subscribing, for routing state to propagate")
	fl.DurationVar(&cfg.Drain, "drain", 10*time.Second, "longest wait for outstanding deliveries after sending")
	fl.DurationVar(&cfg.FailoverWait, "failover-wait", 30*time.Second, "how long a client may go without a broker, failing over, before the run gives up (0: no limit)")
	fl.DurationVar(&cfg.Settle, "settle", 500*time.Millisecond, "how long to keep listening for stray deliveries once all expected ones arrived")
	fl.StringVar(&reportPath, "report", "", "write the JSON report to this `file` (- for standard output)")
	fl.BoolVar(&asJSON, "json", false, "write the JSON report to standard output, and the summary to standard error")
	fl.BoolVarP(&quiet, "quiet", "q", false, "nothing on standard error (no progress lines, no summary): for a report read from a merged log")
	conn.register(cmd, "drip-bench")
	_ = cmd.MarkFlagRequired("broker")
	_ = cmd.RegisterFlagCompletionFunc("workload", fixedCompletions("single", "default", "ranges"))
	_ = cmd.RegisterFlagCompletionFunc("mode", fixedCompletions(string(bench.Constant), string(bench.Poisson), string(bench.Ramp)))
	_ = cmd.MarkFlagFilename("report", "json")
	fl.SortFlags = false
	return cmd
}

func writeReport(w io.Writer, rep *bench.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

// printBenchSummary writes the few numbers a reader wants first.
func printBenchSummary(w io.Writer, rep *bench.Report) {
	t := rep.Totals
	pct := 100.0
	if t.Ideal > 0 {
		pct = 100 * float64(t.Delivered) / float64(t.Ideal)
	}
	fmt.Fprintf(w, "drip bench: sent %s, %s expected (replication %.2f)\n",
		Plural(int64(t.Sent), "message", "messages"), Plural(int64(t.Ideal), "delivery", "deliveries"), rep.Replication.Client)
	fmt.Fprintf(w, "  delivered %d (%.1f%%), undelivered %d, lost to slow reading %d\n", t.Delivered, pct, t.Undelivered, t.Lost)
	fmt.Fprintf(w, "  false positives %d, duplicates %d", t.FalsePositives, t.Duplicates)
	if t.ClientSuppressed > 0 {
		fmt.Fprintf(w, " (the clients dropped %d copies while subscriptions moved)", t.ClientSuppressed)
	}
	fmt.Fprintln(w)
	if t.Gaps > 0 || t.Failovers > 0 || t.InFlightLost > 0 {
		fmt.Fprintf(w, "  churn: %s (longest %.0f ms), %s (resent %d, in flight to failed brokers %d)\n",
			Plural(int64(t.Gaps), "gap", "gaps"), t.MaxGapMs, Plural(int64(t.Failovers), "publisher failover", "publisher failovers"), t.Resent, t.InFlightLost)
	}
	if t.CongestionFeedback > 0 || t.CongestionLossEvents > 0 {
		fmt.Fprintf(w, "  congestion control: %s seen, %s taken, %d messages in limited flows, %d held (%.0f ms in all)\n",
			Plural(int64(t.CongestionLossEvents), "loss event", "loss events"), Plural(int64(t.CongestionFeedback), "feedback message", "feedback messages"),
			t.CongestionControlled, t.CongestionHeld, t.CongestionWaitedMs)
	}
	fmt.Fprintf(w, "  latency ms: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", rep.Latency.P50, rep.Latency.P90, rep.Latency.P99, rep.Latency.Max)
	if rep.Error != "" {
		fmt.Fprintf(w, "  stopped early: %s\n", rep.Error)
	}
}
