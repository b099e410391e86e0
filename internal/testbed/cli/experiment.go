package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	dripcli "github.com/dripmesh/drip/internal/cli"
	"github.com/dripmesh/drip/internal/testbed/experiment"
	"github.com/dripmesh/drip/internal/testbed/systems"
)

func newExperimentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "experiment",
		Short: "Run the comparative experiments of Carzaniga09 §5 on drip, ActiveMQ and NATS",
		Long: `Run the experiments of Carzaniga09 §5 (Figs. 3–5) on drip and on the systems it is
compared with: Apache ActiveMQ as a network of brokers with JMS selectors, and a
NATS cluster with filtering in the clients. Each scenario deploys one broker per
site, spreads the clients over the sites, installs their predicates, waits for
routing to settle, and drives a Poisson ramp of publications while an oracle
checks every delivery. Results are JSON (configuration embedded) and PNG plots.

On loopback the links have no capacity: the numbers measure CPU, not links.`,
	}
	cmd.AddCommand(newExperimentListCmd(), newExperimentRunCmd(), newExperimentPlotCmd(), newExperimentTopologyCmd())
	return cmd
}

func newExperimentListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the scenarios, scenario groups and systems",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SCENARIO\tSITES\tCLIENTS\tRATE/CLIENT\tDURATION\tDESCRIPTION")
			for _, s := range experiment.Scenarios() {
				fmt.Fprintf(w, "%s\t%d\t%d\t%g→%g/s\t%v\t%s\n", s.Name, len(s.Topology.Brokers), s.Clients, s.RateStart, s.RateEnd, s.Duration, s.Description)
			}
			fmt.Fprintln(w)
			fmt.Fprintln(w, "GROUP\tSCENARIOS\tDESCRIPTION")
			for _, g := range experiment.Groups() {
				fmt.Fprintf(w, "%s\t%s\t%s\n", g.Name, strings.Join(g.Scenarios, ","), g.Description)
			}
			fmt.Fprintln(w)
			fmt.Fprintln(w, "SYSTEM\tAVAILABLE")
			for _, s := range systems.All() {
				avail := "yes"
				if err := s.Available(); err != nil {
					avail = "no: " + err.Error()
				}
				fmt.Fprintf(w, "%s\t%s\n", s.Name(), avail)
			}
			return w.Flush()
		},
	}
}

func newExperimentRunCmd() *cobra.Command {
	var (
		scenario   string
		systemList []string
		duration   time.Duration
		ready      time.Duration
		scale      float64
		out        string
		keep       string
		dripBinary string
		dripArgs   []string
		faultList  []string
		noConduit  bool
		ccFeedback bool
		quiet      bool
		onLab      bool
		labCfg     experiment.LabConfig
	)
	cmd := &cobra.Command{
		Use:   "run --scenario NAME [--systems drip,activemq,nats]",
		Short: "Run a scenario (or a group of scenarios) on some systems and write JSON and PNG results",
		Long: `Run a scenario, or a group of scenarios, on each system in turn, on loopback
or, with --lab, in an emulated wide-area network (driplab lab; needs root).

Rates are the paper's per-client rates times --scale: the paper ramps 80 clients
from 1 to 100 messages/s each on 42 machines; --scale 0.1 ramps them from 0.1 to
10 on this machine. With --lab each scenario gets a lab of its topology: a
network namespace per site, where that site's broker and clients run, and links
of the paper's 1 MB/s times --lab-bandwidth-scale (default: --scale, so load and
capacity shrink together) with --lab-delay one-way delay. The lab's link counters
measure utilisation, and drip runs one drip broker process per site (the drip
binary beside this one, as make build puts bin/drip beside bin/driplab, else
drip on PATH; or --drip-binary); drip-uncompressed is drip with
--peer-compression=false. Results go to --out: SCENARIO-SYSTEM.json
and .png per run, SCENARIO-compare.png per scenario, and GROUP-grid.png and
GROUP-links.png for a group. A system that is not installed or fails is reported and skipped.`,
		Example: `  driplab experiment run --scenario smoke
  driplab experiment run --scenario scaling --systems drip,activemq,nats --scale 0.1 --duration 60s --out results/
  driplab experiment run --scenario single-broker --systems drip,activemq
  sudo bin/driplab experiment run --lab --scenario brokers-8 --systems drip,drip-uncompressed,activemq,nats --scale 0.1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scenarios, err := experiment.Lookup(scenario)
			if err != nil {
				return fmt.Errorf("--scenario: %w", err)
			}
			if onLab && dripBinary == "" {
				// Brokers run in the sites' namespaces as processes, like
				// the peers they are compared with.
				if dripBinary, err = findDrip(); err != nil {
					return err
				}
			}
			var syss []systems.System
			for _, name := range systemList {
				switch name {
				case "drip", "drip-uncompressed":
					syss = append(syss, systems.NewDrip(systems.DripOptions{Binary: dripBinary, NoPeerCompression: name == "drip-uncompressed", Args: dripArgs, CongestionFeedback: ccFeedback}))
				case "activemq":
					syss = append(syss, systems.NewActiveMQ(systems.ActiveMQOptions{NoConduit: noConduit}))
				default:
					s, err := systems.ByName(name)
					if err != nil {
						return fmt.Errorf("--systems: %w", err)
					}
					syss = append(syss, s)
				}
			}
			ctx, stop := dripcli.SignalContext(cmd.Context())
			defer stop()
			if ready < 0 {
				return fmt.Errorf("--ready-timeout %v: want a positive time, or 0 for the default", ready)
			}
			cfg := experiment.Config{Systems: syss, Scale: scale, Duration: duration, ReadyTimeout: ready, Dir: keep, PlacementName: "loopback"}
			for _, s := range faultList {
				f, err := experiment.ParseFault(s)
				if err != nil {
					return fmt.Errorf("--fault: %w", err)
				}
				cfg.Faults = append(cfg.Faults, f)
			}
			if onLab {
				cfg.Lab = &labCfg
			}
			if !quiet {
				cfg.Progress = dripcli.NewLockedWriter(cmd.ErrOrStderr())
			}
			var all [][]*experiment.Result
			failed := 0
			for _, sc := range scenarios {
				cfg.Scenario = sc
				rs, err := experiment.Run(ctx, cfg)
				if err != nil {
					return err
				}
				for _, r := range rs {
					if r.Error != "" {
						failed++
					}
				}
				all = append(all, rs)
			}
			files, err := experiment.Save(out, scenario, all)
			for _, f := range files {
				fmt.Fprintln(cmd.OutOrStdout(), f)
			}
			if err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%d run(s) failed; see the error field of their JSON", failed)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&scenario, "scenario", "", "scenario or group to run (see driplab experiment list)")
	fl.StringSliceVar(&systemList, "systems", []string{"drip"}, "systems to run, comma-separated: "+strings.Join(systems.Names(), ", "))
	fl.DurationVar(&duration, "duration", 0, "sending time (default: the scenario's)")
	fl.DurationVar(&ready, "ready-timeout", 0, "how long a system may take to settle its routing once the clients have subscribed (default: 2 minutes, or 4 s per site on larger meshes)")
	fl.Float64Var(&scale, "scale", 0.1, "factor applied to the paper's per-client rates, to fit this machine")
	fl.StringVar(&out, "out", "experiment-results", "directory for the JSON and PNG results")
	fl.StringVar(&keep, "keep", "", "keep the systems' configuration, logs and data in this directory (default: a temporary one, removed)")
	fl.StringVar(&dripBinary, "drip-binary", "", "run drip brokers as processes of this drip binary (drip broker ...) instead of in this process")
	fl.StringSliceVar(&dripArgs, "drip-args", nil, "flags added to every drip broker process, comma-separated (--drip-args=--wan,--pprof); with --drip-binary or --lab")
	fl.BoolVar(&ccFeedback, "drip-congestion-feedback", false, "drip: subscriptions ask publishers to slow the flows that lose messages (congestion control, docs/design.md §12); brokers lose only with --drip-args=--link-wait=0")
	fl.BoolVar(&noConduit, "activemq-no-conduit", false, "ActiveMQ: conduitSubscriptions=false (one network subscription per remote consumer)")
	fl.StringArrayVar(&faultList, "fault", nil, "inject a fault while sending, repeatable: cut:A/B@AT+FOR cuts the lab link A–B AT after sending starts and heals it FOR later; restart:SITE@AT+FOR kills SITE's drip broker (SIGKILL) and starts it again FOR later")
	fl.BoolVarP(&quiet, "quiet", "q", false, "no progress lines")
	fl.BoolVar(&onLab, "lab", false, "run in an emulated WAN lab built for each scenario (needs root; default --drip-binary: the drip beside this executable, else on PATH)")
	fl.StringVar(&labCfg.Name, "lab-name", "experiment", "name of the lab --lab builds")
	fl.DurationVar(&labCfg.Delay, "lab-delay", 10*time.Millisecond, "one-way delay of every lab link")
	fl.Float64Var(&labCfg.BandwidthScale, "lab-bandwidth-scale", 0, "factor applied to the paper's 1 MB/s lab links (default: --scale)")
	fl.DurationVar(&labCfg.QueueTime, "lab-queue", 0, "lab link queue size as time at the link rate (default: the lab's)")
	_ = cmd.MarkFlagRequired("scenario")
	_ = cmd.RegisterFlagCompletionFunc("systems", dripcli.FixedCompletions(systems.Names()...))
	return cmd
}

func newExperimentPlotCmd() *cobra.Command {
	var (
		scenario   string
		systemList []string
		dir        string
	)
	cmd := &cobra.Command{
		Use:   "plot --scenario NAME --dir DIR",
		Short: "Recompute the summaries and redraw the plots from the JSON results in a directory",
		Long: `Read SCENARIO-SYSTEM.json for the scenario (or every scenario of the group) and
each system from --dir, recompute each run's summary from its series, and write
the JSON and the plots run would have written. Use it after re-running one
system or one scenario into a directory of results.`,
		Example: `  driplab experiment plot --scenario scaling --systems drip,activemq,nats --dir docs/results/experiments`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			results, err := experiment.Load(dir, scenario, systemList)
			if err != nil {
				return err
			}
			files, err := experiment.Save(dir, scenario, results)
			for _, f := range files {
				fmt.Fprintln(cmd.OutOrStdout(), f)
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&scenario, "scenario", "", "scenario or group whose results to plot")
	fl.StringSliceVar(&systemList, "systems", systems.Names(), "systems to include, in this order")
	fl.StringVar(&dir, "dir", "experiment-results", "directory holding the JSON results; plots are written there")
	_ = cmd.MarkFlagRequired("scenario")
	return cmd
}

// findDrip finds the drip binary whose `drip broker` the lab's sites run:
// the one beside this executable (make build writes bin/drip and
// bin/driplab), else drip on PATH. Brokers are drip's, not driplab's: the
// experiment measures the binary that ships.
func findDrip() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "drip")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath("drip"); err == nil {
		return p, nil
	}
	return "", errors.New("--lab runs each site's broker as a drip broker process, and no drip binary is beside this executable or on PATH: run make build (bin/drip beside bin/driplab) or give --drip-binary")
}

func newExperimentTopologyCmd() *cobra.Command {
	var scenario, out string
	cmd := &cobra.Command{
		Use:   "topology --scenario NAME --out DIR",
		Short: "Write a scenario's topology as a file and a picture",
		Long: `Write the topology of a scenario (or of the first scenario of a group) to
--out as SCENARIO-topology.yaml (the topology file format, links at the
paper's bandwidth) and SCENARIO-topology.png (sites and links, force-directed
layout, with the diameter and the degree range).`,
		Example: `  driplab experiment topology --scenario scale-base --out docs/results/experiments/scale`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scenarios, err := experiment.Lookup(scenario)
			if err != nil {
				return fmt.Errorf("--scenario: %w", err)
			}
			sc := scenarios[0]
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			base := filepath.Join(out, sc.Name+"-topology")
			if err := experiment.WriteTopology(sc.Topology, base+".yaml"); err != nil {
				return err
			}
			if err := experiment.PlotTopology(sc.Topology, sc.Name, base+".png"); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), base+".yaml")
			fmt.Fprintln(cmd.OutOrStdout(), base+".png")
			return nil
		},
	}
	cmd.Flags().StringVar(&scenario, "scenario", "", "scenario or group whose topology to write")
	cmd.Flags().StringVar(&out, "out", "experiment-results", "directory to write into")
	_ = cmd.MarkFlagRequired("scenario")
	return cmd
}
