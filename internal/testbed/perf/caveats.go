package perf

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// busyFloor is the server CPU, in cores, under which a max-rate run's pace
// was set by something else: on a machine of two cores, the clients in
// driplab or other work.
const busyFloor = 0.6

// caveats says what c's runs imply about its numbers, per system: a server
// that was not the bottleneck, drains that ended while deliveries still
// came, publishers abandoned, failed runs.
func caveats(c *CaseResult) []string {
	var out []string
	for _, sys := range c.Systems {
		var mine []RunResult
		for _, r := range c.Runs {
			if r.System == sys {
				mine = append(mine, r)
			}
		}
		if len(mine) == 0 {
			continue
		}
		var failed, timeouts, unsettled, idle int
		var lost uint64
		var server, clients []float64
		for _, r := range mine {
			switch {
			case r.Error != "":
				failed++
				continue
			case r.DrainEnd == "timeout":
				timeouts++
			case r.DrainEnd == "unsettled":
				unsettled++
			}
			lost += r.Lost + r.BrokerDropped
			w := float64(r.Window)
			server = append(server, float64(r.ServerCores))
			clients = append(clients, (float64(r.HarnessCPU)+zeroIfNaN(float64(r.SubscriberCPU)))/w)
			if c.Name != CaseLatency && float64(r.ServerCores) < busyFloor {
				idle++
			}
		}
		n := len(mine)
		if failed > 0 {
			out = append(out, fmt.Sprintf("%s: %s failed (see the runs).", sys, of(failed, n)))
		}
		if timeouts > 0 {
			out = append(out, fmt.Sprintf("%s: %s ended the drain while deliveries still arrived, so their undelivered count includes messages still queued for the subscribers, not only lost ones (%s reported %s drops).",
				sys, of(timeouts, n), sys, group(float64(lost))))
		}
		if unsettled > 0 {
			out = append(out, fmt.Sprintf("%s: in %s the system had not taken everything sent when the harness stopped waiting: those runs' rates stand, their totals are unknown.", sys, of(unsettled, n)))
		}
		if idle > 0 && len(server) > 0 {
			out = append(out, fmt.Sprintf("%s: in %s the servers were busy less than %.1f cores (median %.2f; the clients in driplab %.2f): the server was not the bottleneck there, the clients or other work on the same cores set the pace.",
				sys, of(idle, n), busyFloor, Median(server), Median(clients)))
		}
	}
	return out
}

// of says "k of n runs" (or "every run", "the run").
func of(k, n int) string {
	switch {
	case k == n && n == 1:
		return "the run"
	case k == n:
		return "every run"
	}
	return strconv.Itoa(k) + " of " + strconv.Itoa(n) + " runs"
}

func zeroIfNaN(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return x
}

// ShellQuote quotes args for a POSIX shell, as a reader would retype
// them.
func ShellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		safe := a != "" && !strings.ContainsFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || slices.Contains([]rune("_-./:=,@%+"), r))
		})
		if safe {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
