package perf

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// writeReport writes sum as Markdown to path, linking the JSON and plots in
// outDir.
func writeReport(path, outDir string, sum *Summary, plots []string) error {
	rel, err := filepath.Rel(filepath.Dir(path), outDir)
	if err != nil {
		rel = outDir
	}
	rel = filepath.ToSlash(rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(markdown(sum, rel, plots)), 0o644)
}

// numbered are the cases in issue 12's numbering, and issue 36's
// one-to-one with maps beside the one-to-one case.
var numbered = map[string]string{CaseOneToOne: "1", CaseMaps: "1b", CaseFanOut: "2", CaseTwoBrokers: "3", CaseCPU: "4", CaseLatency: "5", CaseInert: "6", CaseContent: "7", CaseHenjes: "8"}

// displayName is how tables name a system.
func displayName(s string) string {
	switch s {
	case sysNATS:
		return "NATS"
	case sysActiveMQ:
		return "ActiveMQ"
	}
	return s
}

func markdown(sum *Summary, rel string, plots []string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Data plane: drip against NATS and ActiveMQ on one machine\n\n")
	p("<!-- Written by driplab perf (internal/testbed/perf) from %s/perf-summary.json; edits are overwritten by the next make perf. -->\n\n", rel)
	if sum.Note != "" {
		p("> **%s**\n\n", sum.Note)
	}
	p("The data plane against NATS and ActiveMQ, against the targets of issue 36 (\"Data plane at NATS's speed\"; issue 12's cases): every system runs as its own server processes on loopback "+
		"(drip as `drip broker` processes, `nats-server`, Apache ActiveMQ), the clients in the driplab process (drip's client package, "+
		"nats.go, STOMP with JMS selectors), except content routing's subscribers, which run in a child driplab process so that their CPU is counted. "+
		"The systems run interleaved (drip, NATS, drip, NATS, …), %d repetition(s) of %s of sending after a %s warm-up; the tables give medians, "+
		"the ratio of the medians and the ratio of every interleaved pair. Payloads are %d bytes; max-rate publishers send as fast as the system "+
		"takes messages, and subscribers only count. Server CPU is read from /proc/PID/stat over the measured window.\n\n",
		sum.Settings.Reps, sum.Settings.Duration, sum.Settings.Warmup, sum.Settings.PayloadBytes)
	p("```sh\n%s\n```\n\n", sum.Command)
	m := sum.Machine
	p("Machine: %d cores (%s), %s. Measured: %s", m.Cores, m.CPU, m.Kernel, orDash(m.Drip))
	if m.Source != "" {
		p(" from %s", m.Source)
	}
	p(", driven by %s; nats-server %s", m.Driplab, orDash(m.NATS))
	if m.ActiveMQ != "" {
		p("; %s", m.ActiveMQ)
	}
	p(". Load average (1, 5, 15 min) %s before, %s after. Started %s, took %.1f minutes.\n\n",
		m.LoadBefore, m.LoadAfter, sum.Started.Format(time.RFC3339), float64(sum.Seconds)/60)
	if f := strings.Fields(m.LoadBefore); len(f) > 0 {
		if load, err := strconv.ParseFloat(f[0], 64); err == nil && m.Cores > 0 && load > float64(m.Cores) {
			p("The machine was shared: a load average of %.1f on %d cores at the start means other work competed for the cores, so absolute rates are low and noisy; the ratios of interleaved runs are what the targets judge.\n\n", load, m.Cores)
		}
	}

	p("## Targets\n\n")
	p("| # | case | metric | drip | compared | ratio | target | met |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range sum.Cases {
		for _, r := range c.targetRows() {
			a, bName := c.Systems[0], ""
			if len(c.Systems) > 1 {
				bName = c.Systems[1]
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", numbered[c.Name], c.Name, r.Metric, value(r.Values[a], r.Unit),
				compared(r, bName), ratioCell(r), r.Target, metCell(r))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(sum.Failed)) {
		p("| %s | %s | failed: %s | | | | | no |\n", numbered[name], name, oneLine(sum.Failed[name]))
	}
	p("\n")
	for _, f := range plots {
		p("![%s](%s/%s)\n\n", strings.TrimSuffix(f, ".png"), rel, f)
	}
	for _, c := range sum.Cases {
		p("## %s. %s (`%s`)\n\n", numbered[c.Name], c.Title, c.Name)
		p("%s\n\n", c.Description)
		if c.Skipped != "" {
			p("Skipped: %s\n\n", c.Skipped)
			continue
		}
		if len(c.Deployments) > 0 {
			var ds []string
			for _, name := range slices.Sorted(maps.Keys(c.Deployments)) {
				d := c.Deployments[name]
				ds = append(ds, fmt.Sprintf("%s: %d broker(s), %s", name, d.Brokers, d.Version))
			}
			p("Deployed: %s.\n\n", strings.Join(ds, "; "))
		}
		caseTable(&b, c)
		for _, n := range c.Notes {
			p("%s\n\n", n)
		}
		for _, n := range c.Caveats {
			p("- %s\n", n)
		}
		if len(c.Caveats) > 0 {
			p("\n")
		}
		if c.Henjes != nil {
			henjesTable(&b, c)
		} else if len(c.Runs) > 0 {
			runsTable(&b, c)
		}
		if c.Name != CaseCPU {
			p("Runs: [`perf-%s.json`](%s/perf-%s.json).\n\n", c.Name, rel, c.Name)
		}
	}
	return b.String()
}

func caseTable(b *strings.Builder, c *CaseResult) {
	if len(c.Rows) == 0 {
		return
	}
	cols := c.Systems
	fmt.Fprintf(b, "| metric |")
	for _, s := range cols {
		fmt.Fprintf(b, " %s |", displayName(s))
	}
	fmt.Fprintf(b, " ratio | per repetition | target | met |\n|---|")
	for range cols {
		fmt.Fprintf(b, "---|")
	}
	fmt.Fprintf(b, "---|---|---|---|\n")
	for _, r := range c.Rows {
		fmt.Fprintf(b, "| %s |", r.Metric)
		for _, s := range cols {
			if v, ok := r.Values[s]; ok {
				fmt.Fprintf(b, " %s |", value(v, r.Unit))
			} else {
				fmt.Fprintf(b, " |")
			}
		}
		var pairs []string
		for _, x := range r.PairRatios {
			pairs = append(pairs, ratio(x))
		}
		fmt.Fprintf(b, " %s | %s | %s | %s |\n", ratioCell(r), strings.Join(pairs, ", "), r.Target, metCell(r))
	}
	fmt.Fprintf(b, "\n")
}

func runsTable(b *strings.Builder, c *CaseResult) {
	latency := slices.ContainsFunc(c.Runs, func(r RunResult) bool { return r.Latency != nil })
	sub := slices.ContainsFunc(c.Runs, func(r RunResult) bool { return r.SubscriberCPU > 0 })
	fmt.Fprintf(b, "| system | rep | published/s | delivered/s | accepted | expected | undelivered | loss | drops reported | broker dropped | drain | server cores | µs/delivery |")
	if sub {
		fmt.Fprintf(b, " filtered/s | subscriber cores |")
	}
	if latency {
		fmt.Fprintf(b, " p50 / p99 / max ms |")
	}
	fmt.Fprintf(b, " harness cores |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	if sub {
		fmt.Fprintf(b, "---|---|")
	}
	if latency {
		fmt.Fprintf(b, "---|")
	}
	fmt.Fprintf(b, "---|\n")
	for _, r := range c.Runs {
		if r.Error != "" {
			fmt.Fprintf(b, "| %s | %d | failed: %s |\n", r.System, r.Rep, oneLine(r.Error))
			continue
		}
		w := float64(r.Window)
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s s, %s | %s | %s |", r.System, r.Rep, group(float64(r.PublishRate)), group(float64(r.DeliveryRate)),
			group(float64(r.Accepted)), group(float64(r.Expected)), group(float64(r.Undelivered)), percent(float64(r.Loss)),
			group(float64(r.Lost)), group(float64(r.BrokerDropped)), fixed(float64(r.Drain), 1), r.DrainEnd,
			fixed(float64(r.ServerCores), 2), fixed(float64(r.CPUPerDelivery), 2))
		if sub {
			fmt.Fprintf(b, " %s | %s |", group(float64(r.Filtered)/w), fixed(float64(r.SubscriberCPU)/w, 2))
		}
		if latency {
			if l := r.Latency; l != nil {
				fmt.Fprintf(b, " %s / %s / %s |", fixed(float64(l.P50), 3), fixed(float64(l.P99), 3), fixed(float64(l.Max), 3))
			} else {
				fmt.Fprintf(b, " |")
			}
		}
		fmt.Fprintf(b, " %s |\n", fixed(float64(r.HarnessCPU)/w, 2))
	}
	fmt.Fprintf(b, "\n")
}

func henjesTable(b *strings.Builder, c *CaseResult) {
	h := c.Henjes
	fmt.Fprintf(b, "Received msg/s (median) at every point; model: the system's fitted B = t_rcv + n_fltr·t_fltr + r·t_tx.\n\n")
	fmt.Fprintf(b, "| non-matching | r | n_fltr |")
	for _, s := range c.Systems {
		fmt.Fprintf(b, " %s | %s model | %s cores |", displayName(s), displayName(s), displayName(s))
	}
	fmt.Fprintf(b, " ratio |\n|---|---|---|")
	for range c.Systems {
		fmt.Fprintf(b, "---|---|---|")
	}
	fmt.Fprintf(b, "---|\n")
	if len(c.Systems) < 2 {
		return
	}
	a, o := h.Points[c.Systems[0]], h.Points[c.Systems[1]]
	for i := range min(len(a), len(o)) {
		fmt.Fprintf(b, "| %d | %d | %d |", a[i].NonMatching, a[i].R, a[i].Filters)
		for _, pt := range []HenjesMeasured{a[i], o[i]} {
			fmt.Fprintf(b, " %s | %s | %s |", group(float64(pt.Received)), group(float64(pt.Model)), fixed(float64(pt.ServerCores), 2))
		}
		fmt.Fprintf(b, " %s |\n", ratio(Num(Ratio(float64(a[i].Received), float64(o[i].Received)))))
	}
	fmt.Fprintf(b, "\n")
	for _, s := range c.Systems {
		if e, ok := h.ModelErrors[s]; ok {
			fmt.Fprintf(b, "%s: no model: %s\n\n", s, e)
		}
	}
	pub := h.Published
	fmt.Fprintf(b, "Henjes07's own fit for ActiveMQ 4.0 (2007): t_rcv = %s, t_fltr = %s, t_tx = %s.\n\n", seconds(pub.TRcv), seconds(pub.TFltr), seconds(pub.TTx))
}

func compared(r Row, name string) string {
	if name == "" {
		return ""
	}
	v, ok := r.Values[name]
	if !ok {
		return ""
	}
	return displayName(name) + " " + value(v, r.Unit)
}

func ratioCell(r Row) string {
	if r.RatioOf == "" {
		return ""
	}
	return ratio(r.Ratio)
}

func metCell(r Row) string {
	switch {
	case r.Target == "":
		return ""
	case r.Met == nil:
		return "–"
	case *r.Met:
		return "yes"
	default:
		return "**no**"
	}
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
