package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dripmesh/drip/internal/bench"
)

// helm runs helm against the suite's cluster.
func (c *cluster) helm(ctx context.Context, args ...string) ([]byte, error) {
	return run(ctx, "", c.helmBin, append(args, "--kubeconfig", c.kubeconfig)...)
}

// TestMesh installs the chart with opts.mesh into a fresh namespace and
// checks the mesh it makes: pods ready, routing converged, `helm test`
// passing, the bench workload delivered exactly and nearly completely,
// every link of the topology up and carrying data, and what the netem
// sidecar could not emulate. Teardown (uninstall, namespace) is the
// suite's Finish; on failure the namespace's state goes to the test log.
func TestMesh(t *testing.T) {
	if !opts.runs(scenarioMesh) {
		t.Skipf("the single-mesh scenario; this run is -scenario %s", opts.scenario)
	}
	c := theSuite.cluster(t)
	m, b := opts.mesh, opts.bench
	ns := "drip-e2e-" + randomSuffix()
	ctx := t.Context()

	require.NoError(t, c.createNamespace(ctx, ns))
	theSuite.onFinish("namespace "+ns, func(ctx context.Context) error { return c.deleteNamespace(ctx, ns) })
	t.Logf("namespace %s; to look around: kubectl --kubeconfig %s --namespace %s get pods", ns, c.kubeconfig, ns)
	t.Cleanup(func() {
		if t.Failed() {
			// t's context is over by now.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c.dump(ctx, t, ns, m.Netem)
		}
	})

	step := func(name string, f func(t *testing.T)) bool {
		start := time.Now()
		ok := t.Run(name, f)
		t.Logf("%s: %v", name, time.Since(start).Round(100*time.Millisecond))
		if !ok {
			theSuite.failed(fmt.Sprintf("%s/%s failed", t.Name(), name))
		}
		return ok
	}

	if !step("install", func(t *testing.T) {
		values, err := valuesYAML(installValues(m, c.image, c.pullPolicy))
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "values.yaml")
		require.NoError(t, os.WriteFile(path, values, 0o600))
		t.Logf("values:\n%s", values)
		theSuite.onFinish("helm release "+release+" in "+ns, func(ctx context.Context) error {
			_, err := c.helm(ctx, "uninstall", release, "--namespace", ns, "--timeout", "2m", "--ignore-not-found")
			return err
		})
		// No --wait: the suite waits itself, and says which pod is not
		// ready and why.
		chart := filepath.Join(c.root, "deploy", "helm", "drip")
		_, err = c.helm(ctx, "install", release, chart, "--namespace", ns, "--values", path, "--timeout", "2m")
		require.NoError(t, err)
	}) {
		return
	}

	var res suiteResults
	res.Brokers, res.Shape, res.Netem = m.Brokers, m.Shape, m.Netem
	t.Cleanup(func() { res.write(t, c.root) })

	if !step("routing converged", func(t *testing.T) {
		// Measured from the start: the brokers' links and routes must not
		// wait for DNS records (CoreDNS caches a lookup that came before a
		// pod's record for 30 s), see docs/design.md §6.
		conv, err := c.measureConvergence(ctx, ns, m.Brokers, 3*time.Minute)
		require.NoError(t, err)
		res.ConvergenceS = conv.Took().Seconds()
		for name, at := range conv.Seen {
			t.Logf("%s knew every router %.2fs after the last broker started", name, at.Sub(conv.LastStart).Seconds())
		}
		t.Logf("routing converged %.2fs after the last broker started (%s)", conv.Took().Seconds(), conv.LastStart.Format(time.StampMilli))
	}) {
		return
	}
	// A slow convergence fails the test but not the steps after it.
	if took := time.Duration(res.ConvergenceS * float64(time.Second)); took > opts.maxConvergence {
		t.Errorf("routing converged %v after the last broker started, more than -max-convergence %v", took.Round(10*time.Millisecond), opts.maxConvergence)
		for i := range m.Brokers {
			t.Logf("%s's links:\n%s", brokerName(i), c.linkLog(ctx, ns, brokerName(i)))
		}
	}

	if !step("brokers ready", func(t *testing.T) {
		require.NoError(t, c.waitBrokersReady(ctx, ns, m.Brokers, 5*time.Minute))
	}) {
		return
	}

	if !step("helm test", func(t *testing.T) {
		// --logs, as the chart's notes and docs/kubernetes.md tell users:
		// the test pod stays after it passed, so helm can read its log.
		out, err := c.helm(ctx, "test", release, "--namespace", ns, "--timeout", "4m", "--logs")
		require.NoError(t, err, "helm test --logs:\n%s", out)
		t.Logf("helm test --logs:\n%s", out)
		assert.Contains(t, string(out), "routes: every subscriber hears every broker", "the selftest's log is in helm's output")
	}) {
		return
	}

	brokers := make([]string, m.Brokers)
	for i := range brokers {
		brokers[i] = brokerAddr(ns, i)
	}
	runBench := func(ctx context.Context, name string, b benchSpec) (*bench.Report, error) {
		job := benchJob(name, c.image, c.pullPolicy, benchArgs(b, brokers), b.timeout())
		log, ok, err := c.runJob(ctx, ns, job, b.timeout()+time.Minute)
		if err != nil {
			return nil, err
		}
		rep, err := parseReport(log)
		if err != nil {
			return nil, fmt.Errorf("%w; the end of the log:\n%s", err, tail(log, 2000))
		}
		if !ok && rep.Error == "" && rep.Exact() {
			rep.Error = "the job failed: " + tail(log, 500)
		}
		return rep, nil
	}
	ramp := func(name string, m meshSpec) {
		step(name, func(t *testing.T) {
			r := opts.ramp.runRamp(ctx, t, b, m, runBench)
			res.Ramps = append(res.Ramps, r)
			t.Logf("%s: %s", name, r.summary())
			require.NotEmpty(t, r.Steps)
			// The first step is the old fixed-rate bench: far below the
			// links' capacity, nearly everything must arrive.
			if first := r.Steps[0]; first.Ratio < b.MinDelivery {
				t.Errorf("%s: the first step (%.0f msg/s) delivered %.2f%%, below -min-delivery %.2f%%", name, first.Rate, 100*first.Ratio, 100*b.MinDelivery)
			}
		})
	}
	if opts.doRamp {
		ramp("ramp", m)
	}

	if opts.doRestart {
		step("rolling restart", func(t *testing.T) {
			rr := &restartResult{Brokers: m.Brokers, Netem: m.Netem, Rate: opts.restart.Rate}
			res.Restart = rr
			rb := opts.restart.bench(b)
			job := benchJob("restart", c.image, c.pullPolicy, benchArgs(rb, brokers), rb.timeout())
			t.Logf("drip %s", strings.Join(job.Spec.Template.Spec.Containers[0].Args, " "))
			_, err := c.client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
			require.NoError(t, err)
			started, err := c.jobPodRunning(ctx, ns, job, 2*time.Minute)
			require.NoError(t, err)
			// Subscribing takes a moment, then the warmup: restart once
			// messages flow.
			sending := started.Add(rb.Warmup + 5*time.Second)
			rr.SendingFrom, rr.SendingSeconds = sending.UTC().Format(time.RFC3339), rb.Duration.Seconds()
			// Every broker's drop counters, the replaced ones' included,
			// until the bench is over.
			var rec dropRecorder
			recCtx, stopRec := context.WithCancel(ctx)
			recDone := make(chan struct{})
			go func() { defer close(recDone); rec.record(recCtx, c, ns, 500*time.Millisecond) }()
			defer func() { stopRec(); <-recDone }()
			time.Sleep(time.Until(sending))
			rolloutStart := time.Now()
			rr.RolloutStart = rolloutStart.UTC().Format(time.RFC3339)
			require.NoError(t, c.rolloutRestart(ctx, ns, release, rolloutStart))
			rollErr := c.waitRolledOut(ctx, ns, release, rb.Duration)
			rr.RolloutSeconds = time.Since(rolloutStart).Seconds()
			t.Logf("rollout restart of %d brokers took %.1fs", m.Brokers, rr.RolloutSeconds)
			if rollErr != nil {
				t.Errorf("the rollout did not finish while the bench sent: %v", rollErr)
				theSuite.failed(fmt.Sprintf("rolling restart: the rollout did not finish while the bench sent: %v", rollErr))
			} else if end := sending.Add(rb.Duration); time.Now().After(end) {
				t.Errorf("the rollout finished %v after the bench stopped sending: raise -restart-duration", time.Since(end).Round(time.Second))
			}
			log, ok, err := c.waitJob(ctx, ns, job, rb.timeout()+time.Minute)
			require.NoError(t, err)
			stopRec()
			<-recDone
			var dropLines []string
			rr.Drops, dropLines = rec.totals()
			t.Logf("broker drops over the restart, replaced pods included: %v", rr.Drops)
			for _, l := range dropLines {
				t.Logf("  %s", l)
			}
			rep, err := parseReport(log)
			require.NoError(t, err, "bench log:\n%s", tail(log, 4000))
			rr.Report = rep
			t.Logf("restart bench: %s; gaps %d (longest %.0f ms), failovers %d, resent %d, in flight to failed brokers %d, client-suppressed copies %d",
				summary(rep), rep.Totals.Gaps, rep.Totals.MaxGapMs, rep.Totals.Failovers, rep.Totals.Resent, rep.Totals.InFlightLost, rep.Totals.ClientSuppressed)
			rr.RejoinNoRoute = rec.rejoinNoRoute()
			rr.Problems, rr.Known = checkRestart(rep, rr.RejoinNoRoute, opts.restart.KnownLoss)
			for _, p := range rr.Problems {
				t.Errorf("rolling restart: %s", p)
				theSuite.failed("rolling restart: " + p)
			}
			for _, k := range rr.Known {
				t.Logf("rolling restart: %s", k)
			}
			for _, l := range missLines(rep) {
				t.Logf("undelivered: %s", l)
			}
			if rep.Totals.Undelivered > 0 || rr.Drops["drip_route_dropped_destinations_total{no_route}"] > 0 ||
				rr.Drops["drip_route_dropped_destinations_total{hop_limit}"] > 0 || rr.Drops["drip_link_dropped_bundles_total{link_down}"] > 0 {
				// Every pod's joining, draining and drops, the deleted
				// ones' included, followed while they ran.
				for _, l := range rec.trace() {
					t.Logf("%s", l)
				}
			}
			if !ok && len(rr.Problems) == 0 {
				t.Errorf("rolling restart: the bench job failed; the end of its log:\n%s", tail(log, 2000))
			}
			if t.Failed() {
				for _, line := range perSecond(rep) {
					t.Log(line)
				}
			}
			require.NoError(t, c.waitConverged(ctx, ns, m.Brokers, 2*time.Minute), "after the rollout")
		})
	}

	step("links", func(t *testing.T) {
		topo, err := c.topology(ctx, ns)
		require.NoError(t, err)
		for i := range m.Brokers {
			name := brokerName(i)
			mm, err := c.scrape(ctx, ns, name, metricsPort)
			if err != nil {
				t.Error(err)
				continue
			}
			var neighbours []string
			for _, n := range topo.Neighbors(name) {
				neighbours = append(neighbours, n.Broker.Name)
			}
			t.Logf("%s: %s", name, linkLine(mm))
			for _, p := range checkLinks(mm, neighbours) {
				t.Errorf("%s: %s", name, p)
			}
		}
	})

	if m.Netem {
		step("netem", func(t *testing.T) {
			topo, err := c.topology(ctx, ns)
			require.NoError(t, err)
			lacking := map[string]bool{}
			for i := range m.Brokers {
				name := brokerName(i)
				mm, err := c.scrape(ctx, ns, name, netemPort)
				if err != nil {
					t.Errorf("netem sidecar of %s: %v", name, err)
					continue
				}
				// Shaping to the bandwidth (htb) is the sidecar's job on
				// any node; delay, jitter and loss need sch_netem, which
				// the node may lack (the sidecar then says so).
				links, _ := mm.value("drip_netem_links", nil)
				if want := len(topo.Neighbors(name)); int(links) != want {
					t.Errorf("netem sidecar of %s shapes %d links, want %d", name, int(links), want)
				}
				unsupported := unsupportedFeatures(mm)
				for _, f := range unsupported {
					lacking[f] = true
				}
				var errs []string
				for stage, n := range mm.byLabel("drip_netem_errors_total", "stage") {
					if n > 0 {
						errs = append(errs, fmt.Sprintf("%s %.0f", stage, n))
					}
				}
				slices.Sort(errs)
				t.Logf("netem %s: %d links shaped; unsupported: %s; errors: %s", name, int(links), orNone(unsupported), orNone(errs))
			}
			for _, r := range res.Ramps {
				if r.Netem {
					r.NetemUnsupported = slices.Sorted(maps.Keys(lacking))
				}
			}
			if len(lacking) > 0 {
				t.Logf("netem: the node's kernel cannot apply %s (no sch_netem): links were shaped to their bandwidth only",
					strings.Join(slices.Sorted(maps.Keys(lacking)), ", "))
			}
		})
	}

	if opts.doRamp && opts.rampPlain && m.Netem {
		plain := m
		plain.Netem = false
		if step("upgrade without netem", func(t *testing.T) {
			chart := filepath.Join(c.root, "deploy", "helm", "drip")
			_, err := c.helm(ctx, "upgrade", release, chart, "--namespace", ns, "--reuse-values", "--set", "netem.enabled=false", "--timeout", "2m")
			require.NoError(t, err)
			require.NoError(t, c.waitRolledOut(ctx, ns, release, 5*time.Minute))
			require.NoError(t, c.waitConverged(ctx, ns, m.Brokers, 2*time.Minute))
		}) {
			ramp("ramp without netem", plain)
		}
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
