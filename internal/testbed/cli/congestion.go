package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	dripcli "github.com/dripmesh/drip/internal/cli"
	"github.com/dripmesh/drip/internal/testbed/congestion"
	"github.com/dripmesh/drip/internal/testbed/experiment"
	"github.com/dripmesh/drip/internal/testbed/lab"
)

func newCongestionCmd() *cobra.Command {
	var (
		scenarios string
		out       string
		keep      string
		labName   string
		variants  string
		cfg       = congestion.DefaultConfig()
	)
	cmd := &cobra.Command{
		Use:   "congestion --scenario fig7|fig8|fig9|fig10|ive|all --out DIR",
		Short: "Run Malekpour11 §IV's congestion-control experiments on drip with and without control in the lab",
		Long: `Run the experiments of content-aware congestion control (Malekpour11 §IV,
docs/design.md §12) in the emulated WAN lab (root), each on drip without
control, drip with control (subscriptions ask, publishers listen) and, for
fig7 and fig8, NATS and ActiveMQ (--variants picks):

  fig7   one pair through a 500 kbit/s bottleneck; the publisher ramps from
         400 to 4000 kbit/s of payload, then sends in bursts
  fig8   one pair; the bottleneck alternates 2 and 1 Mbit/s
  fig9   three pairs taking 20%, 50% and 100% of their publishers' messages;
         the bottleneck goes 2 → 1 → 0.5 Mbit/s
  fig10  one pair on 1 Mbit/s, joined by a bulk TCP transfer
  ive    eight brokers, 64 subscribers, two fast publishers, one 1 Mbit/s
         bottleneck (§IV-E)

drip's brokers drop at a full link queue (--link-queue bytes), as the paper's
routers do; by default a drip broker makes publishers wait instead and loses
nothing. Results go to --out: SCENARIO.json (configuration, per variant the
time series, the findings against issue 13's targets) and SCENARIO.png.
Durations are scaled by --scale (1: about 22 minutes for all; see
docs/results/congestion.md).`,
		Example: `  make experiments-congestion
  bin/driplab congestion --scenario fig7 --scale 0.5 --out /tmp/cc`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list := congestion.Names()
			if scenarios != "all" {
				list = strings.Split(scenarios, ",")
			}
			all := congestion.Scenarios(cfg.Scale, cfg.BandwidthScale, cfg.PayloadSize)
			for _, sc := range list {
				if _, ok := all[sc]; !ok {
					return fmt.Errorf("--scenario %q: want one of %s, or all", sc, strings.Join(congestion.Names(), ", "))
				}
			}
			if out == "" {
				return fmt.Errorf("--out: a directory for the results is required")
			}
			check := cfg
			check.Dir = out // checked before a lab starts; the runs get their own
			if err := check.Validate(); err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			progress := dripcli.NewLockedWriter(cmd.ErrOrStderr())
			ctx, stop := dripcli.SignalContext(cmd.Context())
			defer stop()
			for _, name := range list {
				s := all[name]
				l, err := lab.Up(ctx, lab.UpOptions{Name: labName, Topology: s.Topology, Seed: cfg.Seed})
				if err != nil {
					return err
				}
				c := cfg
				c.Placement, c.Network, c.Progress = experiment.LabPlacement{Lab: l}, congestion.LabNetwork{Lab: l}, progress
				dir, cleanup, err := runDir(keep, "congestion-"+name)
				if err == nil {
					c.Dir = dir
					var r *congestion.Result
					vs, perr := pickVariants(congestion.Variants(s), variants)
					if perr != nil {
						err = perr
					} else if len(vs) == 0 {
						err = fmt.Errorf("--variants %q: none of them runs in %s", variants, name)
					} else {
						r, err = congestion.Run(ctx, c, s, vs)
					}
					cleanup()
					if err == nil {
						r.Command = "driplab " + strings.Join(os.Args[1:], " ")
						err = writeCongestion(out, r, progress)
					}
				}
				if derr := l.Down(cmd.Context()); err == nil {
					err = derr
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&scenarios, "scenario", "all", "fig7, fig8, fig9, fig10, ive (comma-separated) or all")
	labRunFlags(cmd, &out, &keep, &labName, "congestion")
	f.StringVar(&variants, "variants", "", "run only these variants (comma-separated: drip, drip+cc, NATS, ActiveMQ; default all that apply)")
	f.Float64Var(&cfg.Scale, "scale", cfg.Scale, "multiplies every duration of the scenarios")
	f.Float64Var(&cfg.BandwidthScale, "bandwidth-scale", cfg.BandwidthScale, "multiplies every bandwidth and publishing rate of the scenarios")
	f.IntVar(&cfg.LinkQueueBytes, "link-queue", cfg.LinkQueueBytes, "drip's link queue in bytes")
	f.IntVar(&cfg.LinkMarkBytes, "link-mark", cfg.LinkMarkBytes, "drip's brokers mark the bundles queued on a link from this many bytes queued (drip broker --link-mark-bytes; 0: no marks)")
	f.BoolVar(&cfg.DropAtLinks, "drop-at-links", cfg.DropAtLinks, "drip's brokers drop at a full link queue (false: publishers wait, drip's default)")
	f.IntVar(&cfg.NotSentLowat, "not-sent-lowat", cfg.NotSentLowat, "bound the unsent bytes of every TCP connection (TCP_NOTSENT_LOWAT; 0: the kernel default)")
	f.IntVar(&cfg.PeerNotSentLowat, "peer-notsent-lowat", cfg.PeerNotSentLowat, "drip brokers' own bound on their peer connections' unsent bytes (drip broker --peer-notsent-lowat; 0: none), over --not-sent-lowat's")
	f.BoolVar(&cfg.RangeFilters, "range-filters", cfg.RangeFilters, "subscribers take one range of k each instead of a filter per decade (coarse flows under cat-v2)")
	f.IntVar(&cfg.PayloadSize, "payload", cfg.PayloadSize, "payload bytes per message")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seeds the payloads and the lab's links")
	return cmd
}

func writeCongestion(out string, r *congestion.Result, progress io.Writer) error {
	name := r.Scenario.Name
	if err := writeJSONFile(filepath.Join(out, name+".json"), r); err != nil {
		return err
	}
	for _, f := range r.Findings {
		fmt.Fprintf(progress, "congestion: %s: %s\n", name, f)
	}
	return congestion.Plot(r, filepath.Join(out, name+".png"))
}

// pickVariants keeps the variants named in list, in any case (all when it
// is empty). A scenario need not run every variant, but a name that is no
// variant of any is refused rather than dropped.
func pickVariants(all []congestion.Variant, list string) ([]congestion.Variant, error) {
	if list == "" {
		return all, nil
	}
	names := strings.Split(list, ",")
	var known []string
	for _, v := range congestion.AllVariants() {
		known = append(known, v.Name)
	}
	for _, n := range names {
		if !slices.ContainsFunc(known, func(k string) bool { return strings.EqualFold(k, n) }) {
			return nil, fmt.Errorf("--variants: unknown variant %q: want some of %s", n, strings.Join(known, ", "))
		}
	}
	var out []congestion.Variant
	for _, v := range all {
		if slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(v.Name, n) }) {
			out = append(out, v)
		}
	}
	return out, nil
}
