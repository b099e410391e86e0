package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	dripcli "github.com/dripmesh/drip/internal/cli"
	"github.com/dripmesh/drip/internal/testbed/experiment"
	"github.com/dripmesh/drip/internal/testbed/harmony"
	"github.com/dripmesh/drip/internal/testbed/lab"
)

func newHarmonyCmd() *cobra.Command {
	var (
		scenarios string
		variants  []string
		out       string
		keep      string
		labName   string
		cfg       = harmony.DefaultConfig(harmony.ScenarioDelay)
	)
	cmd := &cobra.Command{
		Use:   "harmony --scenario delay|failure|all --out DIR",
		Short: "Run Kim10 §4's dynamic-delay and path-failure experiments on drip's four variants and NATS in the lab",
		Long: `Run the experiments of Harmony (Kim10 §4) in the emulated WAN lab (root):
five sites, fully meshed, three topics published at 100 messages/s and six
subscriber-topic pairs. Every --period, each link degrades with probability
--probability for the period: its one-way delay becomes --degraded-delay
(scenario delay) or it drops everything (scenario failure). The same schedule
(drawn from --seed) meets, one after the other:

  DP         drip with hop-count routes: every pair's direct path
  BP         drip with RTT link costs checked every --best-path-interval
  BP+QoS     BP with subscriptions that carry the --deadline (reroute at once)
  BP+QoS+MP  BP+QoS with two-path subscriptions
  NATS       a NATS cluster (direct routes between servers)

The drip brokers run in this process, one per site namespace. Results go to
--out: SCENARIO.json (configuration, schedule, per variant and pair the
messages lost, latency quantiles and CDF, the fractions over the deadline and
over 100 ms, the bytes on the links), SCENARIO-latency.png and
SCENARIO-loss.png. Time is Kim10's scaled by 1/15 by default (periods of 12 s
instead of 3 minutes); a scenario takes about 12 minutes.`,
		Example: `  make experiments-harmony
  bin/driplab harmony --scenario delay --periods 3 --out /tmp/harmony`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(variants) > 0 {
				all := harmony.Variants()
				cfg.Variants = nil
				for _, name := range variants {
					i := slices.IndexFunc(all, func(v harmony.Variant) bool { return v.Name == name })
					if i < 0 {
						return fmt.Errorf("--variants: no variant %q (DP, BP, BP+QoS, BP+QoS+MP, NATS)", name)
					}
					cfg.Variants = append(cfg.Variants, all[i])
				}
			}
			var list []string
			switch scenarios {
			case "all":
				list = []string{harmony.ScenarioDelay, harmony.ScenarioFailure}
			case harmony.ScenarioDelay, harmony.ScenarioFailure:
				list = []string{scenarios}
			default:
				return fmt.Errorf("--scenario %q: want delay, failure or all", scenarios)
			}
			if out == "" {
				return fmt.Errorf("--out: a directory for the results is required")
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			progress := dripcli.NewLockedWriter(cmd.ErrOrStderr())
			ctx, stop := dripcli.SignalContext(cmd.Context())
			defer stop()
			l, err := lab.Up(ctx, lab.UpOptions{Name: labName, Topology: harmony.Topology(), Seed: cfg.Seed})
			if err != nil {
				return err
			}
			defer func() { _ = l.Down(cmd.Context()) }()
			for _, sc := range list {
				c := cfg
				c.Scenario = sc
				c.Placement, c.Network = experiment.LabPlacement{Lab: l}, harmony.LabNetwork{Lab: l}
				c.Progress = progress
				dir, cleanup, err := runDir(keep, "harmony-"+sc)
				if err != nil {
					return err
				}
				c.Dir = dir
				r, err := harmony.Run(ctx, c)
				cleanup()
				if err != nil {
					return err
				}
				r.Command = "driplab " + strings.Join(os.Args[1:], " ")
				if err := writeHarmony(out, r); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&scenarios, "scenario", "all", "delay, failure or all")
	f.StringSliceVar(&variants, "variants", nil, "run only these variants, in this order (default: all five)")
	labRunFlags(cmd, &out, &keep, &labName, "harmony")
	f.IntVar(&cfg.Periods, "periods", cfg.Periods, "periods per variant")
	f.DurationVar(&cfg.Period, "period", cfg.Period, "how long a degradation lasts")
	f.Float64Var(&cfg.Probability, "probability", cfg.Probability, "probability that a link degrades in a period")
	f.DurationVar(&cfg.DegradedDelay, "degraded-delay", cfg.DegradedDelay, "one-way delay of a degraded link (scenario delay)")
	f.DurationVar(&cfg.Deadline, "deadline", cfg.Deadline, "deadline of the BP+QoS subscriptions")
	f.DurationVar(&cfg.BestPathInterval, "best-path-interval", cfg.BestPathInterval, "how often BP's link costs are checked")
	f.DurationVar(&cfg.Keepalive, "keepalive", cfg.Keepalive, "drip's keepalive interval: the longest an idle link stays silent")
	f.IntVar(&cfg.SuspectMultiplier, "suspect-multiplier", cfg.SuspectMultiplier, "keepalives of silence after which drip routes around a link (0: the dead interval alone)")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "draws the schedule of degradations")
	return cmd
}

func writeHarmony(out string, r *harmony.Result) error {
	sc := r.Config.Scenario
	if err := writeJSONFile(filepath.Join(out, sc+".json"), r); err != nil {
		return err
	}
	if err := harmony.PlotLatency(r, filepath.Join(out, sc+"-latency.png")); err != nil {
		return err
	}
	return harmony.PlotLoss(r, filepath.Join(out, sc+"-loss.png"))
}

// labRunFlags are the flags of the commands that run scenarios in a lab
// of their own: where results go, where the brokers' files are kept, the
// lab's name.
func labRunFlags(cmd *cobra.Command, out, keep, labName *string, lab string) {
	f := cmd.Flags()
	f.StringVar(out, "out", "", "directory for SCENARIO.json and its plots")
	f.StringVar(keep, "keep", "", "keep the brokers' files under this directory (default: a temporary one, removed)")
	f.StringVar(labName, "lab", lab, "name of the lab to run in")
}

// writeJSONFile writes v, indented, to path.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
