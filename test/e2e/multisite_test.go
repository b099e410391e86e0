package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/cli"
	"github.com/dripmesh/drip/internal/topology"
)

// multiSiteSpec is the mesh across clusters of TestMultiSite: sites
// releases of the chart, each in a namespace of its own as if in a cluster
// of its own, with brokers brokers each. Within a site the brokers form a
// line; the sites form a ring, the last broker of each linked to the first
// of the next, at that broker's external address, so that any one site can
// go away and the others stay connected.
type multiSiteSpec struct {
	Sites, Brokers int
	// Survive is the sending time of the bench among the other sites
	// while the last site is deleted and reinstalled.
	Survive time.Duration
}

// siteNames name the sites, in order.
var siteNames = []string{"eu", "us", "ap", "sa", "af"}

// siteRouterIDs is each site's range of router IDs: site i has
// siteRouterIDs·i onwards.
const siteRouterIDs = 10

// The CA Secrets every site's namespace holds, as the chart's
// tls.meshCA names them.
const (
	meshCASecret   = "drip-mesh-ca"
	clientCASecret = "drip-mesh-client-ca"
)

func defaultMultiSite() multiSiteSpec {
	return multiSiteSpec{Sites: 3, Brokers: 2, Survive: 60 * time.Second}
}

func (s multiSiteSpec) validate() error {
	switch {
	case s.Sites < 2 || s.Sites > len(siteNames):
		return fmt.Errorf("-sites %d: want 2 to %d", s.Sites, len(siteNames))
	case s.Brokers < 1 || s.Brokers > siteRouterIDs:
		return fmt.Errorf("-site-brokers %d: want 1 to %d", s.Brokers, siteRouterIDs)
	case s.Survive <= 0:
		return fmt.Errorf("-site-loss-duration %v: want a positive duration", s.Survive)
	}
	return nil
}

// routers is how many routers the whole mesh has.
func (s multiSiteSpec) routers() int { return s.Sites * s.Brokers }

// peerAddress is broker b of site i's external peer address: an IP of the
// benchmarking range (RFC 2544) that its peer Service lists as an external
// IP, which kube-proxy forwards on every node. Distinct per broker, so
// that the netem sidecars shape each link between sites on its own.
func peerAddress(i, b int) string { return fmt.Sprintf("198.18.%d.%d:7100", i+1, b+1) }

// siteBrokerName is broker b of site i's name in the mesh.
func siteBrokerName(i, b int) string { return siteNames[i] + "/" + brokerName(b) }

// remotePeers are the brokers of other sites that site i links to, as the
// chart's site.remotePeers: its last broker to the first of the next site,
// its first to the last of the previous one (both ends list a link).
func (s multiSiteSpec) remotePeers(i int) []map[string]any {
	type key struct{ site, broker int }
	from := map[key][]int{}
	next, prev := (i+1)%s.Sites, (i+s.Sites-1)%s.Sites
	from[key{next, 0}] = append(from[key{next, 0}], s.Brokers-1)
	if k := (key{prev, s.Brokers - 1}); !slices.Contains(from[k], 0) {
		from[k] = append(from[k], 0)
	}
	var out []map[string]any
	for _, k := range slices.SortedFunc(maps.Keys(from), func(a, b key) int { return (a.site*siteRouterIDs + a.broker) - (b.site*siteRouterIDs + b.broker) }) {
		out = append(out, map[string]any{
			"id":      k.site*siteRouterIDs + k.broker,
			"address": peerAddress(k.site, k.broker),
			"brokers": from[k],
		})
	}
	return out
}

// siteValues are the chart values of site i: its router IDs from its
// range, its brokers' peer Services at their external IPs, its links to
// the other sites with their WAN properties (m's), certificates from the
// mesh CA, and its client Service on a node port, named for nodeIP.
func siteValues(s multiSiteSpec, m meshSpec, i int, mesh string, img imageRef, pullPolicy corev1.PullPolicy, nodeIP string) map[string]any {
	v := installValues(meshSpec{Brokers: s.Brokers, Shape: "line", Netem: m.Netem}, img, pullPolicy)
	v["topology"] = map[string]any{"shape": "line", "mesh": mesh}
	var sites []map[string]any
	for j := range s.Sites {
		sites = append(sites, map[string]any{"name": siteNames[j], "routerIdBase": j * siteRouterIDs, "routerIds": siteRouterIDs})
	}
	v["sites"] = sites
	var addrs []string
	for b := range s.Brokers {
		addrs = append(addrs, peerAddress(i, b))
	}
	link := map[string]any{"weight": 10}
	for k, x := range map[string]string{"bandwidth": m.Bandwidth, "delay": m.Delay, "jitter": m.Jitter, "loss": m.Loss} {
		if x != "" {
			link[k] = x
		}
	}
	v["site"] = map[string]any{
		"name":        siteNames[i],
		"peerService": map[string]any{"type": "ClusterIP", "externalIPs": true, "addresses": addrs},
		"remotePeers": s.remotePeers(i),
		"remoteLink":  link,
	}
	v["tls"] = map[string]any{"meshCA": map[string]any{"secretName": meshCASecret, "clientSecretName": clientCASecret}}
	v["service"] = map[string]any{"type": "NodePort", "externalHosts": []string{nodeIP}}
	return v
}

// multiSiteResults is what one run of TestMultiSite keeps in
// -results/multisite.json.
type multiSiteResults struct {
	Date    string `json:"date"`
	Sites   int    `json:"sites"`
	Brokers int    `json:"brokers_per_site"`
	Netem   bool   `json:"netem"`
	// ConvergenceS is from the install of the first site until every
	// broker knew every router.
	ConvergenceS float64 `json:"convergence_s"`
	// IdleControl is the bytes per second of one direction of a link at
	// rest (no clients): between sites, and within one.
	IdleControl struct {
		RemoteMean float64 `json:"remote_mean"`
		RemoteMax  float64 `json:"remote_max"`
		LocalMean  float64 `json:"local_mean"`
		Seconds    float64 `json:"seconds"` // the window measured
	} `json:"idle_control_bytes_per_s"`
	Bench     *bench.Report `json:"bench,omitempty"`     // across all sites
	Survivors *bench.Report `json:"survivors,omitempty"` // among the others while the last site went and came back
	// RoutedAroundS is from the uninstall until the other sites' brokers
	// knew only their own routers; RejoinS from the reinstall until every
	// broker knew every router again.
	RoutedAroundS float64 `json:"routed_around_s"`
	RejoinS       float64 `json:"rejoin_s"`
	// RejoinBytes is what the reinstalled site's links to the other sites
	// carried, both ways, until it had rejoined: its share of the
	// database exchange and the predicates of the other sites' subscribers.
	RejoinBytes float64 `json:"rejoin_bytes"`
}

// TestMultiSite installs -sites releases of the chart in namespaces of
// their own, as the sites of one mesh: own router-ID ranges, own Services,
// joined only through their brokers' external addresses and the CAs they
// share, with netem on the links between sites. It checks that the mesh
// converges, that a client outside the cluster publishes and subscribes
// across sites with TLS through the sites' exposed client Services, that
// the bench across all sites is exact (nothing lost, nothing twice, no
// false positive), and then, under a bench among the other sites, deletes
// the last site's release and installs it again: the others must keep
// delivering exactly, route around it and count its links down, neither be
// restarted nor replaced, and see it rejoin.
func TestMultiSite(t *testing.T) {
	if !opts.runs(scenarioMultiSite) {
		t.Skipf("the multi-site scenario; this run is -scenario %s", opts.scenario)
	}
	c := theSuite.cluster(t)
	s, m, b := opts.multiSite, opts.mesh, opts.bench
	ctx := t.Context()
	suffix := randomSuffix()
	mesh := "e2e-" + suffix
	namespaces := make([]string, s.Sites)
	for i := range s.Sites {
		namespaces[i] = fmt.Sprintf("drip-e2e-%s-%s", suffix, siteNames[i])
	}
	last := s.Sites - 1
	res := &multiSiteResults{Sites: s.Sites, Brokers: s.Brokers, Netem: m.Netem}
	t.Cleanup(func() {
		res.Date = time.Now().UTC().Format(time.RFC3339)
		if path, err := writeJSON(resultsDir(c.root), "multisite.json", res); err != nil {
			t.Errorf("writing the results: %v", err)
		} else {
			t.Logf("results: %s", path)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for _, ns := range namespaces {
				c.dump(ctx, t, ns, m.Netem)
			}
		}
	})
	step := func(name string, f func(t *testing.T)) bool {
		start := time.Now()
		ok := t.Run(name, f)
		t.Logf("%s: %v", name, time.Since(start).Round(100*time.Millisecond))
		return ok
	}

	nodeIP, err := c.nodeIP(ctx)
	require.NoError(t, err)
	dir := t.TempDir() // files that outlive a step: the values (reinstall, upgrade), the client TLS files
	chart := filepath.Join(c.root, "deploy", "helm", "drip")
	valuesFiles := make([]string, s.Sites)
	install := func(ctx context.Context, i int) error {
		_, err := c.helm(ctx, "install", release, chart, "--namespace", namespaces[i], "--values", valuesFiles[i], "--timeout", "2m")
		return err
	}
	start := time.Now()
	if !step("install the sites", func(t *testing.T) {
		meshCA, clientCA := newCA(t, mesh+" mesh CA"), newCA(t, mesh+" client CA")
		for i, ns := range namespaces {
			require.NoError(t, c.createNamespace(ctx, ns))
			theSuite.onFinish("namespace "+ns, func(ctx context.Context) error { return c.deleteNamespace(ctx, ns) })
			for name, ca := range map[string]testCA{meshCASecret: meshCA, clientCASecret: clientCA} {
				_, err := c.client.CoreV1().Secrets(ns).Create(ctx, ca.secret(name), metav1.CreateOptions{})
				require.NoError(t, err)
			}
			values, err := valuesYAML(siteValues(s, m, i, mesh, c.image, c.pullPolicy, nodeIP))
			require.NoError(t, err)
			valuesFiles[i] = filepath.Join(dir, siteNames[i]+".yaml")
			require.NoError(t, os.WriteFile(valuesFiles[i], values, 0o600))
			t.Logf("site %s in namespace %s, values:\n%s", siteNames[i], ns, values)
			theSuite.onFinish("helm release "+release+" in "+ns, func(ctx context.Context) error {
				_, err := c.helm(ctx, "uninstall", release, "--namespace", ns, "--timeout", "2m", "--ignore-not-found")
				return err
			})
			require.NoError(t, install(ctx, i))
		}
	}) {
		return
	}

	if !step("routing converged across sites", func(t *testing.T) {
		for _, ns := range namespaces {
			require.NoError(t, c.waitBrokersReady(ctx, ns, s.Brokers, 5*time.Minute), ns)
		}
		for _, ns := range namespaces {
			require.NoError(t, c.waitRoutersKnown(ctx, ns, s.Brokers, s.routers(), 3*time.Minute), ns)
		}
		res.ConvergenceS = time.Since(start).Seconds()
		t.Logf("every broker of %d sites knows all %d routers %.1fs after the first install", s.Sites, s.routers(), res.ConvergenceS)
		for i, ns := range namespaces {
			topo, err := c.topology(ctx, ns)
			require.NoError(t, err)
			for _, br := range topo.Brokers {
				if !strings.HasPrefix(br.Name, siteNames[i]+"/") {
					assert.NotContains(t, br.Peer, ".svc", "site %s reaches %s by its external address only", siteNames[i], br.Name)
				}
			}
		}
	}) {
		return
	}

	if m.Netem {
		step("netem on the links between sites", func(t *testing.T) {
			lacking := map[string]bool{}
			for i, ns := range namespaces {
				topo, err := c.topology(ctx, ns)
				require.NoError(t, err)
				for br := range s.Brokers {
					name := siteBrokerName(i, br)
					mm, err := c.scrape(ctx, ns, brokerName(br), netemPort)
					require.NoError(t, err, "netem sidecar of %s", name)
					var remote int
					for _, n := range topo.Neighbors(name) {
						if siteOf(n.Broker.Name) != siteNames[i] {
							remote++
						}
					}
					links := value(mm, "drip_netem_links", nil)
					assert.Equal(t, float64(len(topo.Neighbors(name))), links, "netem sidecar of %s shapes a class per neighbour", name)
					for _, f := range unsupportedFeatures(mm) {
						lacking[f] = true
					}
					t.Logf("netem %s: %d links shaped, %d of them to other sites; resolve errors %.0f", name, int(links), remote,
						value(mm, "drip_netem_errors_total", map[string]string{"stage": "resolve"}))
				}
			}
			if len(lacking) > 0 {
				t.Logf("netem: the node's kernel cannot apply %s (no sch_netem): links between sites were shaped to their bandwidth only",
					strings.Join(slices.Sorted(maps.Keys(lacking)), ", "))
			}
		})
	}

	step("control traffic at rest", func(t *testing.T) {
		const window = 15 * time.Second
		before, err := c.linkBytes(ctx, namespaces, s.Brokers)
		require.NoError(t, err)
		time.Sleep(window)
		after, err := c.linkBytes(ctx, namespaces, s.Brokers)
		require.NoError(t, err)
		var remote, local []float64
		for k, v := range after {
			rate := (v - before[k]) / window.Seconds()
			if siteOf(k.from) == siteOf(k.to) {
				local = append(local, rate)
			} else {
				remote = append(remote, rate)
			}
		}
		require.NotEmpty(t, remote)
		ic := &res.IdleControl
		ic.RemoteMean, ic.RemoteMax, ic.LocalMean, ic.Seconds = mean(remote), slices.Max(remote), mean(local), window.Seconds()
		t.Logf("at rest, a link direction between sites carried %.0f B/s (mean of %d, max %.0f), within a site %.0f B/s", ic.RemoteMean, len(remote), ic.RemoteMax, ic.LocalMean)
	})

	var clientFiles clientTLSFiles
	nodePorts := make([]int, s.Sites)
	if !step("client outside the cluster", func(t *testing.T) {
		var err error
		clientFiles, err = c.writeClientTLS(ctx, namespaces[0], dir)
		require.NoError(t, err)
		var brokers []string
		for i, ns := range namespaces {
			nodePorts[i], err = c.nodePort(ctx, ns, release)
			require.NoError(t, err)
			brokers = append(brokers, fmt.Sprintf("%s:%d", nodeIP, nodePorts[i]))
		}
		// What docs/kubernetes.md shows: drip sub at one site's client
		// Service, with the next site's as its failover, and drip pub at
		// another's, with the first site's client certificate.
		token := randomSuffix()
		subArgs := append([]string{"sub", "--broker", brokers[last] + "," + brokers[0], "--count", "1"}, clientFiles.args()...)
		subArgs = append(subArgs, fmt.Sprintf(`token = %q`, token))
		subOut, subDone := runCLIAsync(ctx, subArgs...)
		pubArgs := append([]string{"pub", "--broker", brokers[0], "--attr", "token=" + strconv.Quote(token), "--count", "0", "--rate", "5"}, clientFiles.args()...)
		pubCtx, stopPub := context.WithCancel(ctx)
		_, pubDone := runCLIAsync(pubCtx, pubArgs...)
		var subErr error
		select {
		case subErr = <-subDone:
		case <-time.After(60 * time.Second):
			subErr = fmt.Errorf("no delivery within 60s")
		}
		stopPub()
		<-pubDone
		require.NoError(t, subErr, "drip %s", strings.Join(subArgs, " "))
		t.Logf("drip %s\n%s", strings.Join(subArgs, " "), subOut.String())
		assert.Contains(t, subOut.String(), token, "the subscriber outside the cluster received the message published outside it")

		// And exactly once, between every pair of sites.
		out, err := c.selftestFromHost(ctx, brokers, clientFiles)
		t.Logf("drip selftest from the host:\n%s", out)
		require.NoError(t, err)
	}) {
		return
	}

	siteBrokers := func(sites ...int) []string {
		var out []string
		for _, i := range sites {
			for br := range s.Brokers {
				out = append(out, brokerAddr(namespaces[i], br))
			}
		}
		return out
	}
	runBench := func(ctx context.Context, name string, bs benchSpec, brokers []string) (*bench.Report, error) {
		job := benchJob(name, c.image, c.pullPolicy, benchArgs(bs, brokers), bs.timeout())
		log, ok, err := c.runJob(ctx, namespaces[0], job, bs.timeout()+time.Minute)
		if err != nil {
			return nil, err
		}
		rep, err := parseReport(log)
		if err != nil {
			return nil, fmt.Errorf("%w; the end of the log:\n%s", err, tail(log, 2000))
		}
		if !ok && rep.Error == "" {
			rep.Error = "the job failed: " + tail(log, 500)
		}
		return rep, nil
	}

	if !step("bench across sites", func(t *testing.T) {
		rep, err := runBench(ctx, "sites", b, siteBrokers(allSites(s.Sites)...))
		require.NoError(t, err)
		res.Bench = rep
		t.Logf("bench across %d sites: %s", s.Sites, summary(rep))
		for _, p := range checkExact(rep) {
			t.Errorf("bench across sites: %s", p)
		}
		for i, ns := range namespaces {
			topo, err := c.topology(ctx, ns)
			require.NoError(t, err)
			for br := range s.Brokers {
				mm, err := c.scrape(ctx, ns, brokerName(br), metricsPort)
				require.NoError(t, err)
				var neighbours []string
				for _, n := range topo.Neighbors(siteBrokerName(i, br)) {
					neighbours = append(neighbours, n.Broker.Name)
				}
				t.Logf("%s: %s", siteBrokerName(i, br), linkLine(mm))
				for _, p := range checkLinks(mm, neighbours) {
					t.Errorf("%s: %s", siteBrokerName(i, br), p)
				}
			}
		}
	}) {
		return
	}

	if !step("a site deleted and reinstalled under load", func(t *testing.T) {
		survivors := allSites(last)
		sb := b
		sb.Duration = s.Survive
		job := benchJob("survivors", c.image, c.pullPolicy, benchArgs(sb, siteBrokers(survivors...)), sb.timeout())
		_, err := c.client.BatchV1().Jobs(namespaces[0]).Create(ctx, job, metav1.CreateOptions{})
		require.NoError(t, err)
		started, err := c.jobPodRunning(ctx, namespaces[0], job, 2*time.Minute)
		require.NoError(t, err)
		sending := started.Add(sb.Warmup + 5*time.Second)
		pods := map[string]map[types.UID]int32{}
		for _, i := range survivors {
			pods[namespaces[i]], err = c.podRestarts(ctx, namespaces[i])
			require.NoError(t, err)
		}
		time.Sleep(time.Until(sending))

		gone := time.Now()
		_, err = c.helm(ctx, "uninstall", release, "--namespace", namespaces[last], "--timeout", "2m")
		require.NoError(t, err)
		t.Logf("uninstalled site %s while the other sites' bench sends", siteNames[last])
		routers := len(survivors) * s.Brokers
		for _, i := range survivors {
			require.NoError(t, c.waitRoutersKnown(ctx, namespaces[i], s.Brokers, routers, 2*time.Minute), "the other sites route around %s", siteNames[last])
		}
		res.RoutedAroundS = time.Since(gone).Seconds()
		t.Logf("%.1fs after the uninstall every broker of the other sites knew only their %d routers", res.RoutedAroundS, routers)
		require.NoError(t, c.waitPodsGone(ctx, namespaces[last], 2*time.Minute))
		t.Logf("%.1fs after the uninstall site %s's brokers had drained and were gone", time.Since(gone).Seconds(), siteNames[last])
		// Counted: each link to the deleted site is down at its other end.
		for _, i := range survivors {
			for br := range s.Brokers {
				mm, err := c.scrape(ctx, namespaces[i], brokerName(br), metricsPort)
				require.NoError(t, err)
				up := mm.byLabel("drip_link_up", "peer")
				for peer, v := range up {
					if siteOf(peer) == siteNames[last] {
						assert.Zero(t, v, "%s counts its link to %s down", siteBrokerName(i, br), peer)
						t.Logf("%s: link to %s down, adjacencies lost %v", siteBrokerName(i, br), peer, value(mm, "drip_linkstate_events_total", map[string]string{"event": "adjacency_down"}))
					}
				}
			}
		}
		time.Sleep(5 * time.Second) // the others on their own for a while

		back := time.Now()
		require.NoError(t, install(ctx, last))
		require.NoError(t, c.waitBrokersReady(ctx, namespaces[last], s.Brokers, 3*time.Minute))
		for _, ns := range namespaces {
			require.NoError(t, c.waitRoutersKnown(ctx, ns, s.Brokers, s.routers(), 2*time.Minute), "%s sees %s rejoin", ns, siteNames[last])
		}
		res.RejoinS = time.Since(back).Seconds()
		for br := range s.Brokers {
			mm, err := c.scrape(ctx, namespaces[last], brokerName(br), metricsPort)
			require.NoError(t, err)
			for _, name := range []string{"drip_link_sent_bytes_total", "drip_link_received_bytes_total"} {
				for peer, v := range mm.byLabel(name, "peer") {
					if siteOf(peer) != siteNames[last] {
						res.RejoinBytes += v
					}
				}
			}
		}
		t.Logf("site %s reinstalled: every broker knew all %d routers %.1fs later; its links to the other sites carried %s both ways until then",
			siteNames[last], s.routers(), res.RejoinS, bytesString(res.RejoinBytes))
		if end := sending.Add(sb.Duration); time.Now().After(end) {
			t.Errorf("the site rejoined %v after the bench stopped sending: raise -site-loss-duration", time.Since(end).Round(time.Second))
		}

		log, ok, err := c.waitJob(ctx, namespaces[0], job, sb.timeout()+time.Minute)
		require.NoError(t, err)
		rep, err := parseReport(log)
		require.NoError(t, err, "bench log:\n%s", tail(log, 4000))
		res.Survivors = rep
		t.Logf("bench among %d sites while %s went and came back: %s; gaps %d, failovers %d", len(survivors), siteNames[last], summary(rep), rep.Totals.Gaps, rep.Totals.Failovers)
		for _, p := range checkExact(rep) {
			t.Errorf("the other sites' bench: %s", p)
		}
		if !ok {
			t.Errorf("the other sites' bench job failed; the end of its log:\n%s", tail(log, 2000))
		}
		for ns, before := range pods {
			after, err := c.podRestarts(ctx, ns)
			require.NoError(t, err)
			assert.Equal(t, before, after, "%s's brokers were neither replaced nor restarted", ns)
		}
	}) {
		return
	}

	step("rejoined", func(t *testing.T) {
		topo, err := c.topology(ctx, namespaces[last])
		require.NoError(t, err)
		for br := range s.Brokers {
			mm, err := c.scrape(ctx, namespaces[last], brokerName(br), metricsPort)
			require.NoError(t, err)
			for _, n := range topo.Neighbors(siteBrokerName(last, br)) {
				assert.Equal(t, 1.0, value(mm, "drip_link_up", map[string]string{"peer": n.Broker.Name}), "%s's link to %s", siteBrokerName(last, br), n.Broker.Name)
			}
		}
		var brokers []string
		for i := range s.Sites {
			brokers = append(brokers, fmt.Sprintf("%s:%d", nodeIP, nodePorts[i]))
		}
		// The reinstalled site's client Service has a new node port.
		np, err := c.nodePort(ctx, namespaces[last], release)
		require.NoError(t, err)
		brokers[last] = fmt.Sprintf("%s:%d", nodeIP, np)
		out, err := c.selftestFromHost(ctx, brokers, clientFiles)
		t.Logf("drip selftest from the host:\n%s", out)
		require.NoError(t, err)

		// Upgrading a site with the values it has restarts nothing: its
		// certificates are kept, so its pod template does not change.
		pods := map[string]map[types.UID]int32{}
		for _, ns := range namespaces {
			pods[ns], err = c.podRestarts(ctx, ns)
			require.NoError(t, err)
		}
		sts, err := c.client.AppsV1().StatefulSets(namespaces[0]).Get(ctx, release, metav1.GetOptions{})
		require.NoError(t, err)
		_, err = c.helm(ctx, "upgrade", release, chart, "--namespace", namespaces[0], "--values", valuesFiles[0], "--timeout", "2m")
		require.NoError(t, err)
		after, err := c.client.AppsV1().StatefulSets(namespaces[0]).Get(ctx, release, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, sts.Generation, after.Generation, "the upgrade left %s's StatefulSet as it was", siteNames[0])
		for _, ns := range namespaces {
			after, err := c.podRestarts(ctx, ns)
			require.NoError(t, err)
			assert.Equal(t, pods[ns], after, "helm upgrade of %s without changes restarted no broker in %s", siteNames[0], ns)
		}
	})
}

// allSites is 0..n-1.
func allSites(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// siteOf is the site in a broker's name, <site>/<pod>.
func siteOf(broker string) string {
	site, _, _ := strings.Cut(broker, "/")
	return site
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// value is a sample's value, 0 when it is missing.
func value(m metrics, name string, labels map[string]string) float64 {
	v, _ := m.value(name, labels)
	return v
}

// checkExact lists what makes a bench run inexact or incomplete: anything
// undelivered, delivered twice or not matching, dropped for a slow
// subscriber, a gap, or a client cut off.
func checkExact(r *bench.Report) []string {
	t := r.Totals
	problems := checkReport(r, 1)
	if r.Error != "" {
		problems = append(problems, "the bench stopped early: "+r.Error)
	}
	if t.Lost > 0 {
		problems = append(problems, fmt.Sprintf("%d deliveries dropped by brokers (slow subscribers)", t.Lost))
	}
	if t.Gaps > 0 {
		problems = append(problems, fmt.Sprintf("%d subscriptions had a gap (longest %.0f ms)", t.Gaps, t.MaxGapMs))
	}
	if t.InFlightLost > 0 || t.PublishersCut > 0 {
		problems = append(problems, fmt.Sprintf("%d messages in flight to a failed broker, %d publishers cut", t.InFlightLost, t.PublishersCut))
	}
	return problems
}

// linkKey is one direction of a link.
type linkKey struct{ from, to string }

// linkBytes is what every broker of the sites has sent on each of its links.
func (c *cluster) linkBytes(ctx context.Context, namespaces []string, brokers int) (map[linkKey]float64, error) {
	out := map[linkKey]float64{}
	for i, ns := range namespaces {
		for br := range brokers {
			mm, err := c.scrape(ctx, ns, brokerName(br), metricsPort)
			if err != nil {
				return nil, err
			}
			for peer, v := range mm.byLabel("drip_link_sent_bytes_total", "peer") {
				out[linkKey{siteBrokerName(i, br), peer}] = v
			}
		}
	}
	return out, nil
}

// nodeIP is the first node's internal address, where node ports answer.
func (c *cluster) nodeIP(ctx context.Context) (string, error) {
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				return a.Address, nil
			}
		}
	}
	return "", fmt.Errorf("no node has an InternalIP address")
}

// nodePort is the node port of a Service's first port.
func (c *cluster) nodePort(ctx context.Context, ns, name string) (int, error) {
	svc, err := c.client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	if len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 {
		return 0, fmt.Errorf("service %s/%s has no node port", ns, name)
	}
	return int(svc.Spec.Ports[0].NodePort), nil
}

// podRestarts is every broker pod of ns by UID, with its containers'
// restarts: a pod replaced has a new UID.
func (c *cluster) podRestarts(ctx context.Context, ns string) (map[types.UID]int32, error) {
	pods, err := c.brokerPods(ctx, ns)
	if err != nil {
		return nil, err
	}
	out := map[types.UID]int32{}
	for _, p := range pods {
		var n int32
		for _, cs := range p.Status.ContainerStatuses {
			n += cs.RestartCount
		}
		out[p.UID] = n
	}
	return out, nil
}

// waitPodsGone waits until ns has no broker pod.
func (c *cluster) waitPodsGone(ctx context.Context, ns string, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := c.brokerPods(ctx, ns)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return len(pods) == 0, err
	})
}

// clientTLSFiles are a site's client certificate and the CA that verifies
// brokers, as files on this machine.
type clientTLSFiles struct{ ca, cert, key string }

func (f clientTLSFiles) args() []string {
	return []string{"--tls-ca", f.ca, "--tls-cert", f.cert, "--tls-key", f.key}
}

// writeClientTLS writes the files of the chart's client Secret in ns to
// dir, as docs/kubernetes.md tells a client outside the cluster to.
func (c *cluster) writeClientTLS(ctx context.Context, ns, dir string) (clientTLSFiles, error) {
	sec, err := c.client.CoreV1().Secrets(ns).Get(ctx, clientTLSSecret, metav1.GetOptions{})
	if err != nil {
		return clientTLSFiles{}, err
	}
	f := clientTLSFiles{ca: filepath.Join(dir, "ca.crt"), cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key")}
	for key, path := range map[string]string{"ca.crt": f.ca, "tls.crt": f.cert, "tls.key": f.key} {
		if len(sec.Data[key]) == 0 {
			return f, fmt.Errorf("secret %s/%s has no %s", ns, clientTLSSecret, key)
		}
		if err := os.WriteFile(path, sec.Data[key], 0o600); err != nil {
			return f, err
		}
	}
	return f, nil
}

// selftestFromHost runs drip selftest on this machine against brokers (the
// sites' client Services from outside the cluster): it subscribes at each,
// publishes at each and requires every message at every subscriber once.
func (c *cluster) selftestFromHost(ctx context.Context, brokers []string, files clientTLSFiles) (string, error) {
	args := []string{"selftest", "--messages", "10", "--timeout", "60s"}
	for _, b := range brokers {
		args = append(args, "--broker", b)
	}
	out, done := runCLIAsync(ctx, append(args, files.args()...)...)
	err := <-done
	return out.String(), err
}

// runCLIAsync runs a drip command in this process, as bin/drip would on
// this machine; its output is complete once done has delivered.
func runCLIAsync(ctx context.Context, args ...string) (*syncBuffer, <-chan error) {
	out := &syncBuffer{}
	done := make(chan error, 1)
	root := cli.NewRoot()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(out)
	go func() { done <- root.ExecuteContext(ctx) }()
	return out, done
}

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testCA is a CA the test makes for the mesh, as an operator would with
// openssl or cert-manager.
type testCA struct{ certPEM, keyPEM []byte }

func newCA(t *testing.T, cn string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return testCA{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	}
}

// secret is the CA as the kubernetes.io/tls Secret tls.meshCA reads.
func (ca testCA) secret(name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "drip-e2e"}},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": ca.certPEM, "tls.key": ca.keyPEM},
	}
}

// TestRemotePeers: the sites form a ring whose links both ends list, each
// at the other's external address, for any number of sites and brokers.
func TestRemotePeers(t *testing.T) {
	for _, s := range []multiSiteSpec{{Sites: 2, Brokers: 1}, {Sites: 2, Brokers: 2}, {Sites: 3, Brokers: 2}, {Sites: 5, Brokers: 3}} {
		t.Run(fmt.Sprintf("%dx%d", s.Sites, s.Brokers), func(t *testing.T) {
			links := map[string]int{} // "a|b" → how many sites list it
			for i := range s.Sites {
				for _, p := range s.remotePeers(i) {
					id := p["id"].(int)
					j, br := id/siteRouterIDs, id%siteRouterIDs
					require.NotEqual(t, i, j, "site %d's remote peer %d is its own", i, id)
					assert.Equal(t, peerAddress(j, br), p["address"])
					for _, from := range p["brokers"].([]int) {
						a, b := siteBrokerName(i, from), siteBrokerName(j, br)
						links[strings.Join(slices.Sorted(slices.Values([]string{a, b})), "|")]++
					}
				}
			}
			want := s.Sites
			if s.Sites == 2 {
				want = 2
				if s.Brokers == 1 {
					want = 1
				}
			}
			assert.Len(t, links, want)
			for k, n := range links {
				assert.Equal(t, 2, n, "%s is listed by both its sites", k)
			}
		})
	}
}

// TestSiteValuesRenderWithTheChart renders every site's values with the
// chart. helm template cannot read the mesh CA's Secret, so the
// certificates come from cert-manager here; what the suite relies on is
// checked: the brokers' names and router IDs, the other sites' brokers at
// their external addresses only, the peer Services at those addresses.
func TestSiteValuesRenderWithTheChart(t *testing.T) {
	helm, err := findHelm()
	if err != nil {
		t.Skipf("renders with the helm binary, which make tools installs (CI runs it first): %v", err)
	}
	root, err := repoRoot()
	require.NoError(t, err)
	chart := filepath.Join(root, "deploy", "helm", "drip")
	s, m := defaultMultiSite(), defaultMesh()
	for i := range s.Sites {
		t.Run(siteNames[i], func(t *testing.T) {
			values, err := valuesYAML(siteValues(s, m, i, "e2e-x", imageRef{"example.com/drip", "e2e"}, corev1.PullNever, "192.0.2.2"))
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "values.yaml")
			require.NoError(t, os.WriteFile(path, values, 0o600))
			out, err := run(t.Context(), "", helm, "template", release, chart, "--namespace", "e2e-"+siteNames[i], "--values", path,
				"--set", "tls.meshCA.secretName=", "--set", "tls.meshCA.clientSecretName=",
				"--set", "tls.meshCA.issuerRef.name=x", "--set", "tls.meshCA.clientIssuerRef.name=y", "--api-versions", "cert-manager.io/v1")
			require.NoError(t, err)
			topo, peers := renderedSite(t, out)
			require.Len(t, topo.Brokers, s.Brokers+len(s.remotePeers(i)))
			for br := range s.Brokers {
				b := topo.Brokers[br]
				assert.Equal(t, siteBrokerName(i, br), b.Name)
				assert.Equal(t, uint32(i*siteRouterIDs+br), *b.ID)
				assert.True(t, strings.HasPrefix(b.Client, brokerName(br)+"."+headless+".e2e-"+siteNames[i]+".svc"), "brokerAddr reaches %s", b.Name)
				assert.Equal(t, peerAddress(i, br), peers[brokerName(br)+"-peer"], "the peer Service of %s", b.Name)
			}
			for _, b := range topo.Brokers[s.Brokers:] {
				j := int(*b.ID) / siteRouterIDs
				assert.Equal(t, siteBrokerName(j, int(*b.ID)%siteRouterIDs), b.Name, "the name its own site gives it")
				assert.Equal(t, peerAddress(j, int(*b.ID)%siteRouterIDs), b.Peer)
			}
			for _, l := range topo.Links {
				if siteOf(l.A) != siteOf(l.B) {
					assert.Equal(t, topology.Rate(1e6), l.Bandwidth, "netem shapes the links between sites")
					assert.Equal(t, uint32(10), l.Weight)
				} else {
					assert.Zero(t, l.Bandwidth, "and not those within a site")
				}
			}
		})
	}
}

// renderedSite is the topology and the peer Services' addresses (by
// Service name) of a rendered site.
func renderedSite(t *testing.T, manifests []byte) (*topology.Topology, map[string]string) {
	t.Helper()
	var topo *topology.Topology
	peers := map[string]string{}
	for _, doc := range strings.Split(string(manifests), "\n---") {
		var o struct {
			Kind     string
			Metadata struct {
				Name        string
				Annotations map[string]string
			}
			Data map[string]string
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &o))
		switch {
		case o.Kind == "ConfigMap" && o.Metadata.Name == topologyCM:
			var err error
			topo, err = topology.Parse([]byte(o.Data["topology.yaml"]))
			require.NoError(t, err)
		case o.Kind == "Service" && strings.HasSuffix(o.Metadata.Name, "-peer"):
			peers[o.Metadata.Name] = o.Metadata.Annotations["drip.dev/peer-address"]
		}
	}
	require.NotNil(t, topo)
	return topo, peers
}
