package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	dripcli "github.com/dripmesh/drip/internal/cli"
	"github.com/dripmesh/drip/internal/testbed/lab"
	"github.com/dripmesh/drip/internal/topology"
)

// newLabCmd is the emulated-WAN lab: sites in network namespaces joined by
// links that a userspace daemon shapes (Carzaniga09 §5.1.2, docs/design.md §8).
func newLabCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Emulated wide-area lab in network namespaces",
		Long: `Run a topology as an emulated WAN on this machine (root only): every site
(broker) gets a network namespace with one address, and a lab daemon carries
the packets between sites along the topology's links, applying each link's
bandwidth, one-way delay, jitter and loss in userspace (no sch_netem needed).
See docs/lab.md.`,
		Example: `  driplab lab gen --shape square --bandwidth 1MBps --delay 20ms > square.yaml
  driplab lab up square.yaml
  driplab lab exec b0 -- drip broker --topology square.yaml --name b0
  driplab lab set b0 b1 --delay 50ms --loss 1%
  driplab lab cut b0 b2
  driplab lab status
  driplab lab down`,
	}
	cmd.PersistentFlags().StringVar(&name, "name", lab.DefaultName, "lab name; labs with different names coexist")
	cmd.AddCommand(
		newLabGenCmd(), newLabUpCmd(&name), newLabDownCmd(&name), newLabStatusCmd(&name),
		newLabSetCmd(&name), newLabCutHealCmd(&name, true), newLabCutHealCmd(&name, false),
		newLabExecCmd(&name), newLabDaemonCmd(&name),
	)
	return cmd
}

func newLabGenCmd() *cobra.Command {
	var (
		o      lab.GenOptions
		bw     string
		delay  string
		jitter time.Duration
		loss   string
		prefix string
	)
	cmd := &cobra.Command{
		Use:   "gen",
		Short: "Print a lab topology of one of the paper's shapes",
		Long: `Print a topology file whose brokers b0, b1, ... listen at their lab addresses
(client :7000, peer :7100, metrics :9100). Shapes (Carzaniga09 §5.2):
  line    --n sites in a row
  square  4 sites: a square plus one diagonal (the paper's 4-broker network)
  eight   8 sites, BRITE-like, diameter 3 (the paper's 8-broker network)
  brite   --n sites, BRITE-like; --diameter and --degree shape it
          (the paper's large network: --n 42 --diameter 11)
Every link gets --bandwidth, --delay, --jitter and --loss; with brite,
--delay geo uses distance-based delays instead.`,
		Example: `  driplab lab gen --shape line --n 3 --delay 20ms > line.yaml
  driplab lab gen --shape brite --n 42 --diameter 11 --delay geo > paper.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Bandwidth, err = topology.ParseRate(bw); err != nil {
				return fmt.Errorf("--bandwidth: %w", err)
			}
			if o.Loss, err = parseLoss(loss); err != nil {
				return err
			}
			if o.Prefix, err = netip.ParsePrefix(prefix); err != nil {
				return fmt.Errorf("--prefix: %w", err)
			}
			if delay == "geo" {
				o.GeoDelay = true
			} else if o.Delay, err = time.ParseDuration(delay); err != nil || o.Delay < 0 {
				return fmt.Errorf("--delay %q: want a duration like 20ms, or geo", delay)
			}
			o.Jitter = jitter
			t, err := lab.Generate(o)
			if err != nil {
				return err
			}
			out, err := t.Marshal()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Shape, "shape", lab.ShapeSquare, "shape: "+strings.Join(lab.Shapes, ", "))
	fl.IntVar(&o.N, "n", 0, "number of sites (line, brite)")
	fl.IntVar(&o.Diameter, "diameter", 0, "brite: target diameter in hops (0: any)")
	fl.Float64Var(&o.Degree, "degree", 0, "brite: target average degree, 2 to 4 (0: about 2.2)")
	fl.Uint64Var(&o.Seed, "seed", 1, "seed of the random shapes (eight, brite)")
	fl.StringVar(&bw, "bandwidth", "1MBps", "link bandwidth (1MBps, 10Mbit; 0: unlimited)")
	fl.StringVar(&delay, "delay", "10ms", "one-way delay of every link, or geo (brite: by distance)")
	fl.DurationVar(&jitter, "jitter", 0, "delay jitter of every link (uniform ±)")
	fl.StringVar(&loss, "loss", "0", "loss probability of every link (0.01 or 1%)")
	fl.StringVar(&prefix, "prefix", lab.DefaultPrefix.String(), "IPv4 range the sites are numbered from")
	return cmd
}

func parseLoss(s string) (topology.Probability, error) {
	var p topology.Probability
	v := strings.TrimSpace(s)
	scale := 1.0
	if strings.HasSuffix(v, "%") {
		v, scale = strings.TrimSuffix(v, "%"), 0.01
	}
	var f float64
	if _, err := fmt.Sscan(v, &f); err != nil || f*scale < 0 || f*scale > 1 {
		return p, fmt.Errorf("--loss %q: want a probability in [0, 1] like 0.01 or 1%%", s)
	}
	return topology.Probability(f * scale), nil
}

func newLabUpCmd(name *string) *cobra.Command {
	var (
		o      lab.UpOptions
		prefix string
	)
	cmd := &cobra.Command{
		Use:   "up FILE",
		Short: "Start a lab from a topology file",
		Long: `Create a network namespace per site (drip-lab-<name>.<site>) with the site's
address, start the lab daemon in the background, wait until the lab is ready,
and print each site's namespace and address. A lab of the same name that
crashed is cleaned up first; one that runs is an error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := topology.Load(args[0])
			if err != nil {
				return err
			}
			if o.Prefix, err = netip.ParsePrefix(prefix); err != nil {
				return fmt.Errorf("--prefix: %w", err)
			}
			o.Name, o.Topology = *name, t
			l, err := lab.Up(cmd.Context(), o)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SITE\tNAMESPACE\tADDRESS")
			for _, s := range l.Sites() {
				fmt.Fprintf(w, "%s\t%s\t%s\n", s.Name, s.Namespace, s.Addr)
			}
			return w.Flush()
		},
	}
	fl := cmd.Flags()
	fl.Uint64Var(&o.Seed, "seed", 1, "seed of the links' loss and jitter")
	fl.DurationVar(&o.QueueTime, "queue", lab.DefaultQueueTime, "link queue size, as time at the link rate")
	fl.StringVar(&o.MetricsAddr, "metrics-addr", "", "also serve Prometheus metrics on this TCP address (host namespace)")
	fl.StringVar(&prefix, "prefix", lab.DefaultPrefix.String(), "IPv4 range the sites are numbered from")
	fl.DurationVar(&o.Timeout, "timeout", 20*time.Second, "how long to wait for the lab to be ready")
	return cmd
}

func newLabDownCmd(name *string) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "down [NAME]",
		Short: "Remove a lab: daemon, processes in its sites, namespaces, state",
		Long: `Stop the lab daemon, end the processes still inside the lab's namespaces,
delete the namespaces and /run/drip-lab/<name>. Works after a crash too (it
finds leftovers by name), and does nothing for a lab that does not exist.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all {
				return lab.DownAll(cmd.Context())
			}
			n := *name
			if len(args) == 1 {
				n = args[0]
			}
			return lab.Down(cmd.Context(), n)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "remove every lab")
	return cmd
}

func newLabStatusCmd(name *string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print a lab's sites, links and counters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := lab.Open(*name)
			if err != nil {
				if others := lab.Labs(); len(others) > 0 {
					err = fmt.Errorf("%w (labs with state: %s)", err, strings.Join(others, ", "))
				}
				return err
			}
			s, err := l.Status(cmd.Context())
			if err != nil {
				return fmt.Errorf("lab %s: %w (if the daemon died, run `driplab lab down %s`)", *name, err, *name)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(s)
			}
			return printLabStatus(cmd.OutOrStdout(), s)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON (counters, configured parameters, uptime)")
	return cmd
}

func printLabStatus(out io.Writer, s *lab.Status) error {
	fmt.Fprintf(out, "lab %s: daemon pid %d, up %v, prefix %s, %s in flight\n\n",
		s.Name, s.PID, s.Uptime.Round(time.Second), s.Prefix, dripcli.Plural(int64(s.InFlight), "packet", "packets"))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SITE\tNAMESPACE\tADDRESS\tUNROUTABLE\tNO ROUTE")
	for _, site := range s.Sites {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\n", site.Name, site.Namespace, site.Addr, s.Unroutable[site.Name], s.NoRoute[site.Name])
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "LINK\tSTATE\tBANDWIDTH\tDELAY\tJITTER\tLOSS\tPACKETS\tBYTES\tSENT\tQUEUED\tDROP LOSS\tDROP QUEUE\tDROP CUT\t")
	for _, l := range s.Links {
		state := "up"
		if !l.Up {
			state = "cut"
		}
		bw := "unlimited"
		if l.Params.Bandwidth > 0 {
			bw = formatRate(l.Params.Bandwidth)
		}
		fmt.Fprintf(w, "%s→%s\t%s\t%s\t%v\t%v\t%.3g%%\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n",
			l.From, l.To, state, bw, l.Params.Delay, l.Params.Jitter, 100*l.Params.Loss,
			l.Packets, l.Bytes, l.Sent, l.Backlog, l.Loss, l.Queue, l.Cut)
	}
	return w.Flush()
}

func formatRate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.3gGBps", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.3gMBps", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.3gKBps", bps/1e3)
	}
	return fmt.Sprintf("%.3gBps", bps)
}

func newLabSetCmd(name *string) *cobra.Command {
	var bw, delay, jitter, loss string
	cmd := &cobra.Command{
		Use:   "set A B",
		Short: "Change a running lab's link between sites A and B (both directions)",
		Long: `Change the link's bandwidth, delay, jitter or loss while the lab runs; flags
not given keep their value. Packets already queued keep their schedule.`,
		Example: `  driplab lab set b0 b1 --bandwidth 500KBps --delay 40ms --loss 0.5%`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var c lab.Change
			fl := cmd.Flags()
			if fl.Changed("bandwidth") {
				r, err := topology.ParseRate(bw)
				if err != nil {
					return fmt.Errorf("--bandwidth: %w", err)
				}
				v := float64(r)
				c.Bandwidth = &v
			}
			for _, d := range []struct {
				flag, val string
				dst       **time.Duration
			}{{"delay", delay, &c.Delay}, {"jitter", jitter, &c.Jitter}} {
				if !fl.Changed(d.flag) {
					continue
				}
				v, err := time.ParseDuration(d.val)
				if err != nil {
					return fmt.Errorf("--%s: %w", d.flag, err)
				}
				*d.dst = &v
			}
			if fl.Changed("loss") {
				p, err := parseLoss(loss)
				if err != nil {
					return err
				}
				v := float64(p)
				c.Loss = &v
			}
			if c == (lab.Change{}) {
				return errors.New("nothing to change: give --bandwidth, --delay, --jitter or --loss")
			}
			l, err := lab.Open(*name)
			if err != nil {
				return err
			}
			return l.Set(cmd.Context(), args[0], args[1], c)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&bw, "bandwidth", "", "new bandwidth (1MBps, 10Mbit; 0: unlimited)")
	fl.StringVar(&delay, "delay", "", "new one-way delay")
	fl.StringVar(&jitter, "jitter", "", "new jitter")
	fl.StringVar(&loss, "loss", "", "new loss probability (0.01 or 1%)")
	return cmd
}

func newLabCutHealCmd(name *string, cut bool) *cobra.Command {
	use, short := "heal A B", "Bring a cut link between sites A and B back up"
	if cut {
		use, short = "cut A B", "Cut the link between sites A and B: traffic over it stops, queued packets are lost"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lab.Open(*name)
			if err != nil {
				return err
			}
			if cut {
				return l.Cut(cmd.Context(), args[0], args[1])
			}
			return l.Heal(cmd.Context(), args[0], args[1])
		},
	}
}

func newLabExecCmd(name *string) *cobra.Command {
	return &cobra.Command{
		Use:   "exec SITE -- COMMAND [ARGS...]",
		Short: "Run a command inside a site's network namespace",
		Long: `Replace this process with COMMAND running inside SITE's network namespace,
where the site's address and the routes to every other site are. The
command is terminated when the lab goes down.`,
		Example: `  driplab lab exec b0 -- ping -c 3 10.77.0.3
  driplab lab exec b2 -- drip broker --topology square.yaml --name b2`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return errors.New("usage: driplab lab exec SITE -- COMMAND [ARGS...]")
			}
			l, err := lab.Open(*name)
			if err != nil {
				return err
			}
			return l.Exec(args[0], args[1:])
		},
	}
}

func newLabDaemonCmd(name *string) *cobra.Command {
	var log dripcli.LogFlags
	cmd := &cobra.Command{
		Use:    "daemon",
		Short:  "Run a lab's daemon in the foreground (started by `driplab lab up`)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := log.Logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer func() { _ = logger.Sync() }()
			ctx, cancel := dripcli.SignalContext(cmd.Context())
			defer cancel()
			if err := lab.RunDaemon(ctx, *name, logger); err != nil {
				fmt.Fprintln(os.Stderr, "lab daemon:", err)
				return err
			}
			return nil
		},
	}
	log.Register(cmd)
	return cmd
}
