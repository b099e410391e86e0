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

	"github.com/stretchr/testify/require"
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

	if !step("brokers ready", func(t *testing.T) {
		require.NoError(t, c.waitBrokersReady(ctx, ns, m.Brokers, 5*time.Minute))
	}) {
		return
	}

	if !step("routing converged", func(t *testing.T) {
		require.NoError(t, c.waitConverged(ctx, ns, m.Brokers, 2*time.Minute))
	}) {
		return
	}

	if !step("helm test", func(t *testing.T) {
		// Not --logs: the test pod is deleted when it succeeds (its
		// hook-delete-policy), before helm would read its log; a failed
		// one stays for the dump.
		out, err := c.helm(ctx, "test", release, "--namespace", ns, "--timeout", "4m")
		require.NoError(t, err)
		t.Logf("helm test:\n%s", out)
	}) {
		return
	}

	if !step("bench", func(t *testing.T) {
		brokers := make([]string, m.Brokers)
		for i := range brokers {
			brokers[i] = brokerAddr(ns, i)
		}
		job := benchJob("bench", c.image, c.pullPolicy, benchArgs(b, brokers), b.timeout())
		t.Logf("drip %s", strings.Join(job.Spec.Template.Spec.Containers[0].Args, " "))
		log, ok, err := c.runJob(ctx, ns, job, b.timeout()+time.Minute)
		require.NoError(t, err)
		rep, err := parseReport(log)
		require.NoError(t, err, "bench log:\n%s", tail(log, 4000))
		t.Logf("bench: %s", summary(rep))
		for _, p := range checkReport(rep, b.MinDelivery) {
			t.Errorf("bench: %s", p)
		}
		if !ok {
			t.Errorf("bench: the job failed; the end of its log:\n%s", tail(log, 2000))
		}
	}) {
		return
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
			if len(lacking) > 0 {
				t.Logf("netem: the node's kernel cannot apply %s (no sch_netem): links were shaped to their bandwidth only",
					strings.Join(slices.Sorted(maps.Keys(lacking)), ", "))
			}
		})
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
