package dashboards_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/broker"
)

// provoked are the counters the live traffic drives up, with how: a panel
// reading one must show a positive value, or it hides the event. The
// first six are the losses and errors the dashboards exist to show.
var provoked = map[string]string{
	"drip_subscriber_dropped_total":         "b2 gets deliveries larger than its subscriber queue's byte budget",
	"drip_false_positives_total":            `b1's predicate k contains "abc" encodes to the bytes and pairs it implies, which every message's k = "xabybcz" has without containing "abc" (docs/design.md §2)`,
	"drip_link_dropped_bundles_total":       "b0's link queue holds one bundle and b0 publishes in bursts",
	"drip_route_dropped_destinations_total": "b0's hop limit is 1, so bundles for b2 die at b1 (hop_limit)",
	"drip_link_handshake_failures_total":    "a broker of another mesh keeps dialling b0 (mesh)",
	"drip_unmatched_messages_total":         "b1 publishes messages without the attribute n",
	"drip_published_messages_total":         "every broker publishes",
	"drip_delivered_messages_total":         "the subscribers at b0 and b2 match every message with n",
	"drip_link_sent_bytes_total":            "bundles cross both links both ways",
	"drip_link_received_bytes_total":        "bundles cross both links both ways",
	"drip_link_sent_bundles_total":          "bundles cross both links both ways",
	"drip_link_received_bundles_total":      "bundles cross both links both ways",
	"drip_link_sent_control_total":          "hellos go out on every link",
	"drip_match_duration_seconds_bucket":    "every published message is matched",
	"drip_destinations_per_message_bucket":  "published messages are routed to remote brokers",
	"drip_destinations_per_message_sum":     "published messages are routed to remote brokers",
	"drip_destinations_per_message_count":   "published messages are routed to remote brokers",
}

// knownGaps are panel queries that return nothing against a live mesh for
// a reason outside the dashboards, keyed as checkLive names them. A gap
// that starts returning data fails the test, so that its entry goes.
var knownGaps = map[string]string{}

// TestDashboardsShowALiveMesh runs three brokers in a line, b0 — b1 — b2
// (liveNames),
// drives traffic that provokes every kind of loss the dashboards show,
// has a real Prometheus scrape them every second, and evaluates every
// dashboard query through Prometheus's HTTP API: each must return data
// (knownGaps aside), with its legend's labels, and positive values where
// it reads a provoked counter.
func TestDashboardsShowALiveMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: runs a mesh and Prometheus for about 15 s")
	}
	bin := prometheusBinary(t)
	ds := loadDashboards(t)

	m := startLiveMesh(t)
	prom := startPrometheus(t, bin, m.metricsAddrs())
	prom.waitTargetsUp(t, len(m.servers))
	m.subscribe(t)
	m.waitConverged(t)
	m.traffic(t)

	var failures []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		failures = failures[:0]
		for _, d := range ds {
			failures = append(failures, checkLive(t, prom, d, m)...)
		}
		if len(failures) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	require.Empty(t, failures, "dashboard queries against the live mesh:\n%s", strings.Join(failures, "\n"))
	n := 0
	for _, d := range ds {
		qs, _ := d.queries()
		n += len(qs)
	}
	t.Logf("%d queries of %d dashboards answered by Prometheus; known gaps: %d", n, len(ds), len(knownGaps))
}

func prometheusBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err == nil {
		return bin
	}
	if os.Getenv("CI") == "" {
		t.Skip("skipping: no prometheus binary (/usr/bin/prometheus: apt-get install prometheus); CI fails instead")
	}
	t.Fatalf("CI needs a prometheus binary (Debian package prometheus): %v", err)
	return ""
}

// checkLive evaluates one dashboard's queries with every variable at All
// and reports what is wrong with each answer.
func checkLive(t *testing.T, prom *promServer, d dashboard, m *liveMesh) []string {
	t.Helper()
	var failures []string
	fail := func(q query, format string, args ...any) {
		failures = append(failures, fmt.Sprintf("%s: %s: %s", d.file, q.where, fmt.Sprintf(format, args...)))
	}
	qs, problems := d.queries()
	require.Empty(t, problems)
	for _, q := range qs {
		text, err := expand(q.expr, d.values(false))
		require.NoError(t, err)
		if !q.panel {
			values, err := prom.labelValues(text, q.label)
			switch {
			case err != nil:
				fail(q, "%v", err)
			case q.label == "instance" && !slices.Equal(values, m.metricsAddrs()):
				fail(q, "instances %v, want the brokers' %v", values, m.metricsAddrs())
			case q.label == "peer" && !slices.Equal(values, liveNames):
				fail(q, "peers %v, want %v", values, liveNames)
			}
			continue
		}
		samples, err := prom.query(text)
		if err != nil {
			fail(q, "%v\n\t%s", err, text)
			continue
		}
		if gap, ok := knownGaps[d.file+": "+q.where]; ok {
			if len(samples) > 0 {
				fail(q, "returns data now: remove it from knownGaps (%s)", gap)
			}
			continue
		}
		if len(samples) == 0 {
			fail(q, "no data\n\t%s", text)
			continue
		}
		for _, l := range legendLabels(q.legend) {
			for _, s := range samples {
				if _, ok := s.metric[l]; !ok {
					fail(q, "legend %q uses {{%s}}, absent from series %v", q.legend, l, s.metric)
					break
				}
			}
		}
		if why := readsProvoked(text); why != "" && !slices.ContainsFunc(samples, func(s sample) bool { return s.value > 0 }) {
			fail(q, "all series are 0 or NaN, yet %s\n\t%s = %v", why, text, samples)
		}
	}
	return failures
}

// readsProvoked says why the expression must be positive, if it reads a
// counter the traffic drives up.
func readsProvoked(text string) string {
	expr, err := promql.ParseExpr(text)
	if err != nil {
		return ""
	}
	var why []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if r := provoked[vs.Name]; r != "" {
				why = append(why, r)
			}
		}
		return nil
	})
	return strings.Join(why, "; ")
}

// liveNames name the live mesh's brokers as the chart names those of a
// mesh across clusters, <site>/<pod>: b0 and b1 at one site, b2 at
// another, so that the panels of links between sites have data too.
var liveNames = []string{"eu/b0", "eu/b1", "us/b2"}

// liveMesh is three brokers in a line, each serving /metrics on loopback.
type liveMesh struct {
	servers []*broker.Server
	clients []*client.Client
	ctx     context.Context // cancelled when the test ends
}

func liveConfig(id int) broker.Config {
	name := fmt.Sprintf("b%d", id) // the rogue broker of another mesh, which traffic renames
	if id < len(liveNames) {
		name = liveNames[id]
	}
	cfg := broker.DefaultConfig(uint32(id), name)
	cfg.Mesh = "dashboards"
	cfg.TickInterval = 10 * time.Millisecond
	cfg.PredicateRebuildInterval = 10 * time.Millisecond
	cfg.LinkState.HelloInterval = 50 * time.Millisecond
	cfg.LinkState.DeadInterval = 400 * time.Millisecond
	cfg.DialBackoffMin = 20 * time.Millisecond
	cfg.DialBackoffMax = 200 * time.Millisecond
	cfg.DrainTimeout = time.Second
	return cfg
}

// serve runs a broker until the test ends.
func serve(t *testing.T, cfg broker.Config, metrics bool) *broker.Server {
	t.Helper()
	sc := broker.ServerConfig{ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", StopTimeout: time.Second}
	if metrics {
		sc.MetricsAddr = "127.0.0.1:0"
	}
	srv, err := broker.NewServer(cfg, sc)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Errorf("broker %s did not stop", cfg.Name)
		}
	})
	return srv
}

func startLiveMesh(t *testing.T) *liveMesh {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	m := &liveMesh{servers: make([]*broker.Server, 3), clients: make([]*client.Client, 3), ctx: ctx}
	// The lower ID dials, so each broker starts after the one it dials.
	for id := 2; id >= 0; id-- {
		cfg := liveConfig(id)
		if id < 2 {
			cfg.Peers = []broker.Peer{{ID: uint32(id + 1), Addr: m.servers[id+1].PeerAddr(), Weight: 1}}
		}
		switch id {
		case 0:
			cfg.LinkQueueBytes = 1   // one bundle at a time: a burst overflows it
			cfg.SlowLinks.Behind = 0 // and publishers may not wait for room
			cfg.DRP.HopLimit = 1     // bundles reach b1 and no further
		case 2:
			cfg.SubscriberQueueBytes = 4096 // smaller than one large delivery
		}
		m.servers[id] = serve(t, cfg, true)
	}
	for id, srv := range m.servers {
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		cl, err := client.Dial(dctx, srv.ClientAddr(), client.WithName(fmt.Sprintf("dashboards-%d", id)))
		dcancel()
		require.NoError(t, err)
		t.Cleanup(func() { _ = cl.Close() })
		m.clients[id] = cl
	}
	return m
}

func (m *liveMesh) metricsAddrs() []string {
	addrs := make([]string, len(m.servers))
	for i, s := range m.servers {
		addrs[i] = s.MetricsAddr()
	}
	sort.Strings(addrs)
	return addrs
}

// subscribe installs one subscription per broker, each read as fast as
// deliveries come. b1's never matches exactly, but its Bloom filter — the
// bytes and byte pairs "abc" implies — matches every message whose k is
// "xabybcz": false positives at b1.
func (m *liveMesh) subscribe(t *testing.T) {
	t.Helper()
	for id, pred := range []string{`n >= 0`, `k contains "abc"`, `n >= 0`} {
		sub, err := m.clients[id].Subscribe(m.ctx, pred)
		require.NoError(t, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				if _, err := sub.Next(m.ctx); err != nil {
					return
				}
			}
		}()
		t.Cleanup(func() { _ = sub.Close(); <-done })
	}
}

func (m *liveMesh) waitConverged(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, s := range m.servers {
			ctx, cancel := context.WithTimeout(m.ctx, time.Second)
			in, err := s.Broker().Inspect(ctx)
			cancel()
			if err != nil || len(in.Routers) != len(m.servers) {
				return false
			}
			for id := range m.servers {
				if in.Predicates[uint32(id)] == 0 {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "mesh did not converge")
}

// traffic publishes at every broker, in rounds, for long enough that
// Prometheus scrapes every counter several times while it rises, and
// until every provoked counter has risen.
func (m *liveMesh) traffic(t *testing.T) {
	t.Helper()
	// A broker of another mesh dials b0 until the traffic ends: b0 refuses
	// each handshake (reason mesh).
	rogueCfg := liveConfig(9)
	rogueCfg.Name, rogueCfg.Mesh = "rogue", "elsewhere"
	rogueCfg.Peers = []broker.Peer{{ID: 0, Addr: m.servers[0].PeerAddr()}}
	rogue, err := broker.NewServer(rogueCfg, broker.ServerConfig{ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", StopTimeout: time.Second})
	require.NoError(t, err)
	rctx, stopRogue := context.WithCancel(m.ctx)
	rogueDone := make(chan error, 1)
	go func() { rogueDone <- rogue.Serve(rctx) }()
	defer func() {
		stopRogue()
		require.NoError(t, <-rogueDone)
	}()

	msgs := func(n, payload int, attrs func(k int) client.Attrs) []client.Message {
		out := make([]client.Message, n)
		for k := range out {
			out[k] = client.Message{Attrs: attrs(k), Payload: make([]byte, payload)}
		}
		return out
	}
	withN := func(k int) client.Attrs { return client.Attrs{"n": k, "k": "xabybcz"} }
	rounds := [][]client.Message{
		msgs(100, 256, withN), // a burst: overflows b0's link queue
		append(msgs(10, 64, withN), msgs(1, 64, func(int) client.Attrs { return client.Attrs{"other": 1} })...),
		append(msgs(10, 64, withN), msgs(1, 8192, withN)...), // the large one is lost at b2
	}
	want := []struct {
		broker int
		metric string
	}{
		{2, "drip_subscriber_dropped_total"},
		{1, "drip_false_positives_total"},
		{0, "drip_link_dropped_bundles_total"},
		{1, "drip_route_dropped_destinations_total"},
		{0, "drip_link_handshake_failures_total"},
		{1, "drip_unmatched_messages_total"},
	}
	start := time.Now()
	for {
		for id, batch := range rounds {
			ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
			sum, err := m.clients[id].Publish(ctx, batch...)
			cancel()
			require.NoError(t, err)
			require.Equal(t, uint64(len(batch)), sum.Accepted)
		}
		var missing []string
		for _, w := range want {
			if counterSum(t, m.servers[w.broker].Registry(), w.metric) == 0 {
				missing = append(missing, fmt.Sprintf("%s at b%d (%s)", w.metric, w.broker, provoked[w.metric]))
			}
		}
		elapsed := time.Since(start)
		// Five seconds span five scrapes: rates need two samples of a
		// rising counter, including counters that appear with the event.
		if len(missing) == 0 && elapsed > 5*time.Second {
			return
		}
		require.Lessf(t, elapsed, 15*time.Second, "traffic did not provoke: %s", strings.Join(missing, "; "))
		time.Sleep(100 * time.Millisecond)
	}
}

func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, metric := range mf.GetMetric() {
				sum += metric.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// promServer is a Prometheus process private to one test.
type promServer struct {
	url    string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
}

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

// startPrometheus runs Prometheus scraping targets every second, with its
// storage in a temporary directory, and stops it when the test ends.
func startPrometheus(t *testing.T, bin string, targets []string) *promServer {
	t.Helper()
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: drip
    static_configs:
      - targets: [%s]
`, strings.Join(quoted, ", "))
	cfgFile := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(cfg), 0o600))

	// The free port is found by binding and releasing it, so another
	// process may take it first: then Prometheus exits and we try again.
	for attempt := 1; ; attempt++ {
		addr := freeAddr(t)
		p := &promServer{url: "http://" + addr, out: &syncBuffer{}, exited: make(chan struct{})}
		p.cmd = exec.Command(bin,
			"--config.file="+cfgFile,
			"--storage.tsdb.path="+filepath.Join(dir, fmt.Sprintf("data%d", attempt)),
			"--web.listen-address="+addr,
			"--log.level=warn",
		)
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		require.NoError(t, p.cmd.Start())
		go func() { _ = p.cmd.Wait(); close(p.exited) }()
		t.Cleanup(func() { p.stop(t) })
		if p.waitReady(15 * time.Second) {
			return p
		}
		if attempt == 3 || !strings.Contains(p.out.String(), "address already in use") {
			t.Fatalf("prometheus did not become ready on %s:\n%s", addr, p.out.String())
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func (p *promServer) waitReady(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return false
		default:
		}
		resp, err := http.Get(p.url + "/-/ready")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func (p *promServer) stop(t *testing.T) {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	if t.Failed() {
		t.Logf("prometheus output:\n%s", p.out.String())
	}
}

// waitTargetsUp waits until Prometheus has scraped every target
// successfully, so that the counters have samples from before the traffic.
func (p *promServer) waitTargetsUp(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := p.query(`sum(up{job="drip"})`)
		if err == nil && len(s) == 1 && s[0].value == float64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus did not scrape the %d brokers within 30 s: sum(up) = %v, %v", n, s, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type sample struct {
	metric map[string]string
	value  float64
}

func (p *promServer) get(path string, params url.Values, data any) error {
	resp, err := http.Get(p.url + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return fmt.Errorf("%s: undecodable answer (HTTP %d): %w", path, resp.StatusCode, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("prometheus: %s", r.Error)
	}
	return json.Unmarshal(r.Data, data)
}

// query evaluates expr now through /api/v1/query.
func (p *promServer) query(expr string) ([]sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	parse := func(v [2]any) (float64, error) {
		s, _ := v[1].(string)
		return strconv.ParseFloat(s, 64) // Prometheus writes NaN and ±Inf as text too
	}
	switch data.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &vec); err != nil {
			return nil, err
		}
		out := make([]sample, len(vec))
		for i, s := range vec {
			v, err := parse(s.Value)
			if err != nil {
				return nil, err
			}
			out[i] = sample{s.Metric, v}
		}
		return out, nil
	case "scalar":
		var s [2]any
		if err := json.Unmarshal(data.Result, &s); err != nil {
			return nil, err
		}
		v, err := parse(s)
		return []sample{{map[string]string{}, v}}, err
	}
	return nil, fmt.Errorf("result type %q, want an instant vector", data.ResultType)
}

// labelValues answers Grafana's label_values(selector, label) the way its
// Prometheus data source does: from the series matching the selector.
func (p *promServer) labelValues(selector, label string) ([]string, error) {
	var series []map[string]string
	if err := p.get("/api/v1/series", url.Values{"match[]": {selector}}, &series); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, s := range series {
		if v, ok := s[label]; ok {
			set[v] = true
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("no series of %s has label %s", selector, label)
	}
	return out, nil
}
