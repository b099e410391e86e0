package perf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/testbed/perf"
	"github.com/dripmesh/drip/internal/testbed/systems"
)

var smoke = flag.Bool("perf", false, "run the quick perf harness against real nats-server, ActiveMQ and drip broker processes (about 2 minutes)")

// TestQuick runs `driplab perf --quick` end to end: every case against
// real server processes, the subscriber child process, the outputs. It
// checks what must hold at any speed — every run measured something, drip
// lost nothing at its own pace, the Henjes07 model fitted, the files are
// there — and that no process is left behind. Run it with
//
//	go test ./internal/testbed/perf -run TestQuick -v -args -perf
func TestQuick(t *testing.T) {
	if !*smoke {
		t.Skip("starts nats-server, ActiveMQ and drip brokers for about 2 minutes: run with -args -perf")
	}
	if err := systems.NewNATS(systems.NATSOptions{}).Available(); err != nil {
		t.Fatalf("the harness compares with NATS: %v", err)
	}
	cfg := perf.QuickConfig()
	cfg.DripBinary, cfg.DripEnv = os.Args[0], []string{actAs + "=drip"}
	cfg.SubscriberCommand, cfg.SubscriberEnv = []string{os.Args[0], "perf", "subscribers"}, []string{actAs + "=driplab"}
	dir := t.TempDir()
	cfg.Out, cfg.Report, cfg.Command = filepath.Join(dir, "out"), filepath.Join(dir, "perf.md"), "go test -run TestQuick -args -perf"
	var progress bytes.Buffer
	cfg.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	sum, err := perf.Run(ctx, cfg)
	t.Logf("progress:\n%s", progress.String())
	require.NoError(t, err)

	byName := map[string]*perf.CaseResult{}
	for _, c := range sum.Cases {
		byName[c.Name] = c
	}
	for _, name := range append(perf.CaseNames(), perf.CaseCPU) {
		require.Contains(t, byName, name)
	}
	amq := systems.NewActiveMQ(systems.ActiveMQOptions{}).Available() == nil
	for _, c := range sum.Cases {
		t.Run(c.Name, func(t *testing.T) {
			if c.Name == perf.CaseHenjes && !amq {
				assert.NotEmpty(t, c.Skipped, "ActiveMQ is not installed: skipped, saying why")
				return
			}
			assert.Empty(t, c.Skipped)
			assert.NotEmpty(t, c.Rows)
			for _, r := range c.Runs {
				assert.Empty(t, r.Error, "%s rep %d %s", r.System, r.Rep, r.Variant)
				assert.Positive(t, r.Delivered, "%s %s delivered in the window", r.System, r.Variant)
				assert.Positive(t, float64(r.ServerCPU), "%s %s: its servers' CPU is measured", r.System, r.Variant)
				if strings.HasPrefix(r.System, "drip") && r.DrainEnd != "timeout" {
					// Whatever drip did not deliver it dropped and said so
					// (a Lost event per subscriber, counted by the broker
					// too): once the drain has seen the end of the
					// deliveries, the harness's count and drip's agree,
					// give or take a report still on its way.
					assert.LessOrEqual(t, int64(r.Lost), r.Undelivered, "%s %s", r.System, r.Variant)
					assert.LessOrEqual(t, r.Undelivered, int64(r.Lost)+int64(r.Expected/1000), "%s %s: undelivered but not reported lost", r.System, r.Variant)
					assert.Equal(t, r.Lost, r.BrokerDropped, "%s %s: the broker counts what its subscribers hear", r.System, r.Variant)
				}
			}
			switch c.Name {
			case perf.CaseLatency:
				for _, r := range c.Runs {
					require.NotNil(t, r.Latency)
					assert.Greater(t, r.Latency.N, 1000, "%s: latencies of the window's messages", r.System)
					assert.LessOrEqual(t, float64(r.Latency.P50), float64(r.Latency.P99))
					assert.InDelta(t, cfg.LatencyRate, float64(r.PublishRate), 0.2*cfg.LatencyRate, "%s paced", r.System)
				}
			case perf.CaseContent:
				for _, r := range c.Runs {
					assert.Positive(t, float64(r.SubscriberCPU), "%s: the subscriber process's CPU is measured", r.System)
					if r.System == "nats" {
						assert.Greater(t, r.Filtered, r.Delivered, "NATS subscribers discard most messages")
					} else {
						assert.Zero(t, r.Filtered)
					}
				}
			case perf.CaseHenjes:
				require.NotNil(t, c.Henjes)
				assert.Len(t, c.Henjes.Models, 2, "a model fitted for each system: %v", c.Henjes.ModelErrors)
				for sys, pts := range c.Henjes.Points {
					assert.Len(t, pts, len(cfg.HenjesFilters)*len(cfg.HenjesReplication), sys)
				}
			}
		})
	}

	for _, f := range []string{"perf-summary.json", "perf-one-to-one.json", "perf-henjes07.json", "perf-ratios.png", "perf-throughput.png", "perf-latency.png"} {
		assert.FileExists(t, filepath.Join(cfg.Out, f))
	}
	var back perf.Summary
	b, err := os.ReadFile(filepath.Join(cfg.Out, "perf-summary.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Len(t, back.Cases, len(sum.Cases))
	md, err := os.ReadFile(cfg.Report)
	require.NoError(t, err)
	for _, want := range []string{"## Targets", "## 1. ", "## 4. ", "## 7. ", "## 8. ", "out/perf-ratios.png", cfg.Command} {
		assert.Contains(t, string(md), want)
	}
	assert.Empty(t, children(t), "every server and subscriber process has been stopped and reaped")
}

// children lists this process's child processes.
func children(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	me := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			if f := strings.Fields(s[i+1:]); len(f) > 1 && f[1] == me {
				out = append(out, e.Name()+" "+s[:i+1])
			}
		}
	}
	return out
}
