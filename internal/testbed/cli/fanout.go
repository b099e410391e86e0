package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dripmesh/drip/internal/testbed/fanout"
)

func newFanoutCmd() *cobra.Command {
	cfg := fanout.DefaultConfig()
	var out string
	var plotRuns []string
	cmd := &cobra.Command{
		Use:   "fanout --drip PATH --out FILE",
		Short: "Measure one drip broker's memory under a wide fan-out with subscribers that never read",
		Long: `Start one drip broker process on loopback with --memory-budget, subscribe
--subscribers to it (every --slow-every-th never reads its stream) and publish
--rate messages a second from --publishers for --duration, sampling the
broker's resident set (/proc/PID/status VmRSS) and its budget gauge. The load
runs in this process, so the broker's RSS is its own. Writes the samples as
JSON to --out (docs/results/memory-budget.md).`,
		Example: `  go build -o /tmp/drip ./cmd/drip
  driplab fanout --drip /tmp/drip --budget 268435456 --duration 60s --out after.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out: a file for the samples is required")
			}
			if len(plotRuns) > 0 {
				return plotFanout(out, plotRuns)
			}
			path, err := exec.LookPath(cfg.Drip)
			if err != nil {
				return fmt.Errorf("--drip %q: %w", cfg.Drip, err)
			}
			cfg.Drip = path
			res, runErr := fanout.Run(cmd.Context(), cfg, cmd.ErrOrStderr())
			if res != nil {
				b, err := json.MarshalIndent(res, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "fanout: budget %d MiB: max RSS %d MiB over %d samples; sent %d, accepted %d (closing took %.1f s), received %d\n",
					cfg.Budget>>20, res.MaxRSS>>20, len(res.Samples), res.Sent, res.Accepted, res.CloseSeconds, res.Received)
			}
			return runErr
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.Drip, "drip", "drip", "the drip binary whose broker is measured")
	fl.IntVar(&cfg.Budget, "budget", 256<<20, "the broker's --memory-budget in bytes (0: none; -1: not passed, for a drip that predates the flag)")
	fl.IntVar(&cfg.Subscribers, "subscribers", cfg.Subscribers, "subscribers")
	fl.IntVar(&cfg.Publishers, "publishers", cfg.Publishers, "publishers")
	fl.IntVar(&cfg.Groups, "groups", cfg.Groups, "subscriber groups; each message goes to one (fan-out = subscribers / groups)")
	fl.IntVar(&cfg.SlowEvery, "slow-every", cfg.SlowEvery, "every n-th subscriber never reads (0: none)")
	fl.Float64Var(&cfg.Rate, "rate", cfg.Rate, "messages per second, all publishers together")
	fl.IntVar(&cfg.Payload, "payload", cfg.Payload, "payload bytes per message")
	fl.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to publish")
	fl.DurationVar(&cfg.Sample, "sample", cfg.Sample, "how often to read the broker's RSS")
	fl.StringSliceVar(&cfg.BrokerArgs, "drip-args", nil, "flags added to the broker's command line, comma-separated (--drip-args=--pprof)")
	fl.StringVar(&out, "out", "", "write the samples as JSON to this `file`")
	fl.StringArrayVar(&plotRuns, "plot", nil, "instead of a run, plot the RSS of earlier runs' JSON `files` (LABEL=FILE, repeatable) as a PNG to --out")
	return cmd
}

// plotFanout draws earlier runs (LABEL=FILE) into one PNG.
func plotFanout(out string, runs []string) error {
	var labels []string
	var results []*fanout.Result
	for _, r := range runs {
		label, file, ok := strings.Cut(r, "=")
		if !ok {
			return fmt.Errorf("--plot %q: want LABEL=FILE", r)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
		res := new(fanout.Result)
		if err := json.Unmarshal(b, res); err != nil {
			return fmt.Errorf("--plot %s: %w", file, err)
		}
		labels, results = append(labels, label), append(results, res)
	}
	return fanout.Plot(out, labels, results)
}
