package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	dripcli "github.com/dripmesh/drip/internal/cli"
	"github.com/dripmesh/drip/internal/testbed/churn"
)

func newChurnCmd() *cobra.Command {
	var (
		scenario   string
		out        string
		keep       string
		dripBinary string
		quiet      bool
		cfg        = churn.DefaultConfig(churn.Scenario{})
	)
	cmd := &cobra.Command{
		Use:   "churn --scenario kill|term|kill-cut|all",
		Short: "Kill, stop and restart brokers of a 12-process mesh on loopback under the bench, and measure what clients see",
		Long: `Measure drip through broker failures as a user would see them: 12 separate
drip broker processes on loopback on a random mesh of 18 links (drawn by --seed,
with at least one cut vertex), the bench's clients on 8 of them, and one fault
per run at --fault-at after sending starts:

  kill      kill -9 of a broker that is no cut vertex, restart 10 s later
  term      SIGTERM (graceful drain) of the same broker, restart 5 s later
  kill-cut  kill -9 of a cut vertex (the mesh partitions), restart 10 s later
  all       the three in turn, each on a fresh mesh

The victim always has clients. Every broker's /metrics is scraped every 100 ms:
the reconvergence times (from the fault until the surviving parts agree, from
the restart until all twelve do) and the brokers' drop and duplicate counters
come from there. Results go to --out: SCENARIO.json (the bench's report, the
fault's times, gaps and failovers beside them, the brokers' counters, checks),
SCENARIO.png, summary.json and, for all, all.png. The brokers are the drip
binary beside this one (make build), else drip on PATH, or --drip-binary.
The exit status is 1 if a run failed or a check did not pass: a duplicate or
false positive reaching the bench, a subscriber not back within 2 s of its
broker's restart (or at once on another broker), loss in the graceful stop.`,
		Example: `  make build && bin/driplab churn --scenario all --out docs/results/churn
  bin/driplab churn --scenario kill-cut --seed 7 --keep /tmp/churn-logs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scenarios, err := churn.Lookup(scenario)
			if err != nil {
				return fmt.Errorf("--scenario: %w", err)
			}
			if dripBinary == "" {
				if dripBinary, err = findDrip(); err != nil {
					return err
				}
			}
			cfg.Binary = dripBinary
			if !quiet {
				cfg.Progress = dripcli.NewLockedWriter(cmd.ErrOrStderr())
			}
			ctx, stop := dripcli.SignalContext(cmd.Context())
			defer stop()
			var results []*churn.Result
			var failed []string
			for _, sc := range scenarios {
				c := cfg
				c.Scenario = sc
				dir, cleanup, err := runDir(keep, sc.Name)
				if err != nil {
					return err
				}
				c.Dir = dir
				r, err := churn.Run(ctx, c)
				cleanup()
				if r == nil {
					return err
				}
				results = append(results, r)
				if !r.OK() {
					failed = append(failed, sc.Name)
				}
				if ctx.Err() != nil {
					break
				}
			}
			files, err := churn.Save(out, "driplab "+strings.Join(os.Args[1:], " "), results)
			if !quiet {
				printChurnSummary(cmd.OutOrStdout(), results)
			}
			for _, f := range files {
				fmt.Fprintln(cmd.OutOrStdout(), f)
			}
			switch {
			case err != nil:
				return err
			case ctx.Err() != nil:
				return errors.New("interrupted: the results hold what was measured until then")
			case len(failed) > 0:
				return fmt.Errorf("scenario(s) %s failed a check or did not complete; see the checks in their JSON", strings.Join(failed, ", "))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&scenario, "scenario", "all", "scenario: "+strings.Join(churn.Names(), ", "))
	fl.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the random mesh and the roles of its brokers")
	fl.Float64Var(&cfg.Rate, "rate", cfg.Rate, "total messages per second of the bench's publishers")
	fl.IntVar(&cfg.Subscribers, "subscribers", cfg.Subscribers, "subscribers, spread over the 8 client brokers")
	fl.IntVar(&cfg.Publishers, "publishers", cfg.Publishers, "publishers, spread over the 8 client brokers")
	fl.StringVar(&cfg.Workload, "workload", cfg.Workload, "bench workload preset: single, default or ranges")
	fl.Int64Var(&cfg.WorkloadSeed, "workload-seed", cfg.WorkloadSeed, "seed of the predicates and messages")
	fl.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the bench sends")
	fl.DurationVar(&cfg.FaultAt, "fault-at", cfg.FaultAt, "when the fault hits, after sending starts")
	fl.DurationVar(&cfg.ConvergeTimeout, "converge-timeout", cfg.ConvergeTimeout, "bound on each wait for the mesh to agree")
	fl.StringVar(&out, "out", "churn-results", "directory for the JSON and PNG results")
	fl.StringVar(&keep, "keep", "", "keep the topology file and the brokers' logs in this directory, a subdirectory per scenario (default: a temporary one, removed)")
	fl.StringVar(&dripBinary, "drip-binary", "", "the drip binary whose `drip broker` processes form the mesh (default: the drip beside this executable, else on PATH)")
	fl.BoolVarP(&quiet, "quiet", "q", false, "no progress lines and no summary table")
	_ = cmd.RegisterFlagCompletionFunc("scenario", dripcli.FixedCompletions(churn.Names()...))
	return cmd
}

// runDir is where a scenario's topology and logs go: under keep, or a
// temporary directory that cleanup removes.
func runDir(keep, name string) (dir string, cleanup func(), err error) {
	if keep != "" {
		dir = keep + "/" + name
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, fmt.Errorf("--keep: %w", err)
		}
		return dir, func() {}, nil
	}
	dir, err = os.MkdirTemp("", "driplab-churn-"+name+"-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}

func printChurnSummary(w io.Writer, rs []*churn.Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tVICTIM\tUNDELIVERED\tDUPLICATES\tCLIENT-DROPPED\tGAPS (LONGEST)\tFAILOVERS (IN FLIGHT)\tPARTS AGREE\tRECONVERGED\tCHECKS")
	for _, r := range rs {
		s := churn.Summarize(r)
		checks := "ok"
		if !s.OK {
			checks = "FAILED: " + strings.Join(s.Failed, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%d of %d\t%d\t%d\t%d (%.0f ms)\t%d (%d)\t%s\t%s\t%s\n",
			s.Scenario, s.Signal, s.Victim, s.Undelivered, s.Ideal, s.Duplicates, s.ClientSuppressed,
			s.Gaps, s.LongestGapMs, s.Failovers, s.InFlight, secs(s.PartsAgreeAfterFaultS), secs(s.ReconvergedS), checks)
	}
	_ = tw.Flush()
}

func secs(f *float64) string {
	if f == nil {
		return "never"
	}
	return (time.Duration(*f * float64(time.Second))).Round(100 * time.Millisecond).String()
}
