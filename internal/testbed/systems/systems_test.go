package systems

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/topology"
	"github.com/dripmesh/drip/internal/workload"
)

// line returns a topology of n sites s0–s1–…, the links in order.
func line(n int) *topology.Topology {
	t := &topology.Topology{Mesh: "test"}
	for i := range n {
		id := uint32(i)
		t.Brokers = append(t.Brokers, topology.Broker{Name: "s" + string(rune('0'+i)), ID: &id})
		if i > 0 {
			t.Links = append(t.Links, topology.Link{A: t.Brokers[i-1].Name, B: t.Brokers[i].Name, Weight: 1})
		}
	}
	return t
}

// square is the 4-site square with one diagonal of Carzaniga09 §5.2.1.
func square() *topology.Topology {
	t := line(4)
	t.Links = append(t.Links, topology.Link{A: "s3", B: "s0", Weight: 1}, topology.Link{A: "s0", B: "s2", Weight: 1})
	return t
}

// requireSystem skips the test when the system cannot run here, unless CI
// is set: CI installs every system, so a missing one there is a failure.
func requireSystem(t *testing.T, s System) {
	t.Helper()
	if err := s.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is not installed: %v", s.Name(), err)
		}
		t.Skipf("%s not installed: %v", s.Name(), err)
	}
}

func startSystem(t *testing.T, s System, topo *topology.Topology) Deployment {
	t.Helper()
	requireSystem(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := s.Start(ctx, Spec{Topology: topo, Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, d.Close()) })
	return d
}

// runExact drives a short bench run through d and checks that every
// expected delivery arrived exactly once and nothing else did. The Default
// workload over 12 names exercises every operator the generator makes
// (=, <, > on ints; =, prefix, suffix, contains on strings) in filters of
// up to five constraints.
func runExact(t *testing.T, d Deployment, sites []string) *bench.Report {
	t.Helper()
	w := workload.Default()
	w.Names, w.FiltersPerPredicate = 12, 4
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Config{
		Brokers: sites, Workload: w, WorkloadName: "default/12",
		Subscribers: max(12, 3*len(sites)), Publishers: len(sites), Mode: bench.Poisson, Rate: 100,
		Duration: 2 * time.Second, Drain: 10 * time.Second, Settle: 300 * time.Millisecond,
		Connect: d.Connect, Ready: d.Ready,
	})
	require.NoError(t, err)
	assert.Positive(t, rep.Totals.Ideal, "%+v", rep.Totals)
	assert.Zero(t, rep.Totals.FalsePositives, "false positives")
	assert.Zero(t, rep.Totals.Duplicates, "duplicates")
	assert.Zero(t, rep.Totals.Undelivered, "undelivered")
	assert.Equal(t, rep.Totals.Sent, rep.Totals.Accepted)
	return rep
}

// linkTraffic checks that the counters saw the traffic of a run cross the
// first link of a line in both directions' sum.
func linkTraffic(t *testing.T, d Deployment) map[Direction]uint64 {
	t.Helper()
	require.NotNil(t, d.Links())
	got, err := d.Links().LinkBytes(context.Background())
	require.NoError(t, err)
	assert.Positive(t, got[Direction{"s0", "s1"}]+got[Direction{"s1", "s0"}], "bytes over s0–s1: %v", got)
	for dir := range got {
		assert.True(t, (dir.From == "s0" && dir.To == "s1") || (dir.From == "s1" && dir.To == "s0") ||
			(dir.From == "s1" && dir.To == "s2") || (dir.From == "s2" && dir.To == "s1"), "only topology links: %v", dir)
	}
	return got
}

func TestDrip(t *testing.T) {
	t.Parallel()
	d := startSystem(t, NewDrip(DripOptions{}), line(3))
	runExact(t, d, []string{"s0", "s1", "s2"})
	linkTraffic(t, d)
	info := d.Info()
	assert.Equal(t, "drip", info.System)
	assert.Contains(t, info.Version, "drip")
	assert.Contains(t, info.Files["drip-topology.yaml"], "s2")
}

func TestNATS(t *testing.T) {
	t.Parallel()
	d := startSystem(t, NewNATS(NATSOptions{}), line(3))
	runExact(t, d, []string{"s0", "s1", "s2"})
	got := linkTraffic(t, d)
	// The s0–s2 route crosses both links: its bytes count on each.
	assert.Positive(t, got[Direction{"s1", "s2"}]+got[Direction{"s2", "s1"}])
	info := d.Info()
	assert.Contains(t, info.Version, "2.")
	checkServers(t, d, []string{"s0", "s1", "s2"}, true)
	conf := info.Files["nats-s0.conf"]
	assert.Contains(t, conf, "routes: [")
	assert.Equal(t, 2, strings.Count(conf, "nats-route://"), "a full mesh: s0 routes to both others")
}

func TestActiveMQ(t *testing.T) {
	t.Parallel()
	d := startSystem(t, NewActiveMQ(ActiveMQOptions{}), line(2))
	runExact(t, d, []string{"s0", "s1"})
	got := linkTraffic(t, d)
	assert.Positive(t, got[Direction{"s0", "s1"}])
	assert.Positive(t, got[Direction{"s1", "s0"}])
	info := d.Info()
	assert.Contains(t, info.Version, "ActiveMQ 5.")
	assert.Equal(t, "true", info.Config["conduitSubscriptions"])
	assert.Equal(t, 1, strings.Count(info.Files["activemq.xml"], "<networkConnector "), "s0 creates the one duplex bridge")
	checkServers(t, d, []string{"s0", "s1"}, true)
}

// The selector translation, run by ActiveMQ itself, against
// content.Predicate.Matches: every operator, escapes in LIKE patterns and
// quotes in literals, floats, booleans, exists and missing attributes. The
// subscriber is on the other broker, so the selectors also cross the
// network bridge.
func TestActiveMQSelectorsAgainstOracle(t *testing.T) {
	t.Parallel()
	d := startSystem(t, NewActiveMQ(ActiveMQOptions{}), line(2))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	preds := []string{
		`s = "it's"`, `s != "x"`, `s prefix "50%"`, `s suffix "_b"`, `s contains "a\\b"`, `s contains "'"`,
		`n = 17`, `n != 17`, `n < 2.5`, `n <= 2`, `n > -1`, `n >= 17.0`, `f = 2.5`, `f < 0`,
		`b = true`, `b != true`, `x exists`, `n exists && s = "x"`, `s = "x" || n = 17 && f > 1`,
	}
	msgs := []map[string]content.Value{
		{"s": content.String("it's"), "n": content.Int(17), "f": content.Float(2.5), "b": content.Bool(true)},
		{"s": content.String("50%_b"), "n": content.Int(2), "f": content.Float(-0.5)},
		{"s": content.String("5000_b"), "n": content.Int(-3), "x": content.String("")},
		{"s": content.String(`a\b`), "b": content.Bool(false)},
		{"s": content.String("x"), "n": content.Int(17), "f": content.Float(1.5)},
		{"n": content.Int(0)},
		{},
	}
	sub, err := d.Connect(ctx, "s1")
	require.NoError(t, err)
	defer sub.Close()
	subs := make([]bench.Subscriber, len(preds))
	for i, p := range preds {
		subs[i], err = sub.Subscribe(ctx, content.MustParse(p))
		require.NoError(t, err, p)
	}
	require.NoError(t, d.Ready(ctx))
	pubEnd, err := d.Connect(ctx, "s0")
	require.NoError(t, err)
	defer pubEnd.Close()
	pub, err := pubEnd.NewPublisher(ctx)
	require.NoError(t, err)
	for i, m := range msgs {
		require.NoError(t, pub.Publish(content.MessageFrom(m), []byte{byte(i)}))
	}
	_, err = pub.Close()
	require.NoError(t, err)
	// Read every subscriber at once: what it must get, then half a second
	// more for anything it must not.
	got := make([][]byte, len(preds))
	var wg sync.WaitGroup
	for i, p := range preds {
		want := 0
		for _, m := range msgs {
			if content.MustParse(p).Matches(content.MessageFrom(m)) {
				want++
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				wait := 20 * time.Second
				if k >= want {
					wait = 500 * time.Millisecond
				}
				c, cancel := context.WithTimeout(ctx, wait)
				b, err := subs[i].Next(c)
				cancel()
				if err != nil {
					return
				}
				got[i] = append(got[i], b...)
			}
		}()
	}
	wg.Wait()
	for i, p := range preds {
		pred := content.MustParse(p)
		var want []byte
		for k, m := range msgs {
			if pred.Matches(content.MessageFrom(m)) {
				want = append(want, byte(k))
			}
		}
		assert.Equal(t, want, got[i], "%s", p)
	}
}

func TestDiameterAndPaths(t *testing.T) {
	assert.Equal(t, 0, Diameter(line(1)))
	assert.Equal(t, 3, Diameter(line(4)))
	assert.Equal(t, 2, Diameter(square()))
	disconnected := line(3)
	disconnected.Links = disconnected.Links[:1]
	assert.Equal(t, -1, Diameter(disconnected))
	assert.Equal(t, []string{"s0", "s1", "s2", "s3"}, shortestPath(line(4), "s0", "s3"))
	assert.Equal(t, []string{"s1", "s0", "s3"}, shortestPath(square(), "s1", "s3"), "ties go to the lower router ID")
	assert.Equal(t, []string{"s2"}, shortestPath(square(), "s2", "s2"))
	assert.Nil(t, shortestPath(disconnected, "s0", "s2"))
}

// The generated ActiveMQ configuration: one duplex connector per link,
// created by the link's first site to a port dedicated to that link, and a
// networkTTL of the topology's diameter.
func TestActiveMQConfig(t *testing.T) {
	a := NewActiveMQ(ActiveMQOptions{}).(*activeMQ)
	d := &amqDeployment{sys: a, spec: Spec{Topology: square(), Dir: t.TempDir()}, place: Loopback{}, order: sites(square()), sites: map[string]*amqSite{}, ttl: 2}
	// Fill the sites as start does, without starting anything.
	for i, name := range d.order {
		d.sites[name] = &amqSite{name: name, dir: "/tmp/x/" + name, stomp: hostPort("127.0.0.1", 61000+i), in: map[string]int{}}
	}
	port := 62000
	for _, l := range d.spec.Topology.Links {
		d.sites[l.B].in[l.A] = port
		d.sites[l.A].out = append(d.sites[l.A].out, amqBridge{To: l.B, Addr: hostPort("127.0.0.1", port)})
		port++
	}
	total := 0
	for _, name := range d.order {
		conf, err := d.config(d.sites[name])
		require.NoError(t, err)
		total += strings.Count(conf, "<networkConnector ")
		assert.Contains(t, conf, `persistent="false"`)
		assert.Contains(t, conf, `brokerName="`+name+`"`)
		assert.Contains(t, conf, `stomp://127.0.0.1:`)
		if strings.Contains(conf, "<networkConnector ") {
			assert.Contains(t, conf, `networkTTL="2" conduitSubscriptions="true"`)
			assert.Contains(t, conf, `duplex="true"`)
		}
	}
	assert.Equal(t, len(d.spec.Topology.Links), total, "one bridge per link")
	s0, err := d.config(d.sites["s0"])
	require.NoError(t, err)
	assert.Contains(t, s0, `name="s0-s1" uri="static:(tcp://127.0.0.1:62000)`)
	assert.Contains(t, s0, `name="s0-s2"`)
	assert.Contains(t, s0, `<transportConnector name="from-s3" uri="tcp://127.0.0.1:62003"/>`)
	assert.Equal(t, `a&lt;b&amp;&#34;c`, xmlEscape(`a<b&"c`))
}

func TestByName(t *testing.T) {
	assert.Equal(t, []string{"drip", "drip-uncompressed", "activemq", "nats"}, Names())
	s, err := ByName("nats")
	require.NoError(t, err)
	assert.Equal(t, "nats", s.Name())
	_, err = ByName("kafka")
	assert.EqualError(t, err, `unknown system "kafka": want one of drip, drip-uncompressed, activemq, nats`)
}

// A lone broker has no routes to compute; Ready must not wait for them.
func TestDripSingleSite(t *testing.T) {
	t.Parallel()
	d := startSystem(t, NewDrip(DripOptions{}), line(1))
	runExact(t, d, []string{"s0"})
	got, err := d.Links().LinkBytes(context.Background())
	require.NoError(t, err)
	assert.Empty(t, got)
	checkServers(t, d, []string{"s0"}, false)
}

// checkServers checks that d lists one server per site, in order, each
// accepting clients at Client, running as a live process of its own when
// processes is set (else in this one, PID 0).
func checkServers(t *testing.T, d Deployment, sites []string, processes bool) {
	t.Helper()
	require.Implements(t, (*ServerLister)(nil), d)
	servers := d.(ServerLister).Servers()
	require.Len(t, servers, len(sites))
	for i, s := range servers {
		assert.Equal(t, sites[i], s.Site)
		c, err := net.DialTimeout("tcp", s.Client, 5*time.Second)
		if assert.NoError(t, err, "site %s: client address %s", s.Site, s.Client) {
			c.Close()
		}
		if !processes {
			assert.Zero(t, s.PID, "site %s runs in this process", s.Site)
			continue
		}
		assert.NotEqual(t, os.Getpid(), s.PID)
		_, err = os.Stat(fmt.Sprintf("/proc/%d/stat", s.PID))
		assert.NoError(t, err, "site %s: process %d is running", s.Site, s.PID)
	}
}

func TestDripArgsNeedProcesses(t *testing.T) {
	_, err := NewDrip(DripOptions{Args: []string{"--wan"}}).Start(context.Background(), Spec{Topology: line(1), Dir: t.TempDir()})
	assert.ErrorContains(t, err, `broker flags ["--wan"] need broker processes`)
}

func TestReadyPoll(t *testing.T) {
	for _, tt := range []struct {
		sites int
		want  time.Duration
	}{
		{1, 100 * time.Millisecond},
		{4, 100 * time.Millisecond},
		{8, 200 * time.Millisecond},
		{42, 1050 * time.Millisecond},
	} {
		assert.Equal(t, tt.want, readyPoll(100*time.Millisecond, tt.sites), "%d sites", tt.sites)
	}
}
