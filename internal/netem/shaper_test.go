package netem

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dripmesh/drip/internal/topology"
)

// fakeDNS answers from a map; a missing name is an error.
type fakeDNS struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	lookups int
}

func (d *fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lookups++
	a, ok := d.answers[host]
	if !ok {
		return nil, errors.New("no such host " + host)
	}
	return a, nil
}

func (d *fakeDNS) set(host string, a []netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.answers[host] = a
}

type shaperRig struct {
	tc   *Fake
	dns  *fakeDNS
	reg  *prometheus.Registry
	logs *observer.ObservedLogs
	sh   *Shaper
	topo *topology.Topology
	err  error // returned by Load
}

func newRig(t *testing.T, tc *Fake, strict bool) *shaperRig {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	r := &shaperRig{
		tc:   tc,
		dns:  &fakeDNS{answers: map[string][]netip.Addr{"a.mesh": addrs("10.0.0.1"), "b.mesh": addrs("10.0.0.2")}},
		reg:  prometheus.NewRegistry(),
		logs: logs,
		topo: mustTopo(t, square),
	}
	sh, err := NewShaper(Config{
		Load:     func() (*topology.Topology, error) { return r.topo, r.err },
		Self:     "a",
		TC:       tc,
		Resolver: r.dns,
		Strict:   strict,
		Log:      zap.New(core),
		Metrics:  NewMetrics(r.reg),
	})
	require.NoError(t, err)
	r.sh = sh
	return r
}

func (r *shaperRig) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	switch name {
	case "links":
		return testutil.ToFloat64(r.sh.m.links)
	case "reconciles":
		return testutil.ToFloat64(r.sh.m.reconciles)
	case "changes":
		return testutil.ToFloat64(r.sh.m.changes)
	case "errors":
		return testutil.ToFloat64(r.sh.m.errors.WithLabelValues(labels...))
	case "unsupported":
		return testutil.ToFloat64(r.sh.m.unsupported.WithLabelValues(labels...))
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestShaperApply(t *testing.T) {
	r := newRig(t, NewFake(), false)
	p, err := r.sh.Apply(context.Background())
	require.NoError(t, err)
	assert.Equal(t, p.State, r.tc.State())
	assert.Equal(t, addrs("10.0.0.2"), p.Peers[0].Addrs, "b resolved by name")
	assert.Equal(t, addrs("fd00::c"), p.Peers[1].Addrs, "c is an IP literal")
	assert.Equal(t, 1, r.dns.lookups, "only b is a name; literals are not looked up")
	assert.Equal(t, 3.0, r.metric(t, "links"))
	assert.Equal(t, 1.0, r.metric(t, "reconciles"))
	changes := r.metric(t, "changes")
	assert.Equal(t, float64(len(r.tc.TakeOps())), changes)
	assert.Equal(t, 3, r.logs.FilterMessage("shaping link").Len(), "one line per link")

	_, err = r.sh.Apply(context.Background())
	require.NoError(t, err)
	assert.Empty(t, r.tc.TakeOps(), "second pass: zero changes")
	assert.Equal(t, changes, r.metric(t, "changes"))
	assert.Equal(t, 2.0, r.metric(t, "reconciles"))
	assert.Equal(t, 3, r.logs.FilterMessage("shaping link").Len(), "nothing new to say")

	problems, err := testutil.GatherAndLint(r.reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

func TestShaperFollowsMovedPeer(t *testing.T) {
	r := newRig(t, NewFake(), false)
	_, err := r.sh.Apply(context.Background())
	require.NoError(t, err)
	r.tc.TakeOps()

	r.dns.set("b.mesh", addrs("10.0.0.22"))
	_, err = r.sh.Apply(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{
		"delete filter u32 parent d1: prio 1 dst 10.0.0.2/32 flowid d1:1001",
		"add filter u32 parent d1: prio 1 dst 10.0.0.22/32 flowid d1:1001",
	}, r.tc.TakeOps())
	assert.Equal(t, 1, r.logs.FilterMessage("neighbour moved").Len())

	// The name stops resolving (the pod is being rescheduled): the last
	// address is kept rather than unshaping the link.
	r.dns.set("b.mesh", nil)
	_, err = r.sh.Apply(context.Background())
	require.NoError(t, err)
	assert.Empty(t, r.tc.TakeOps())
	assert.Equal(t, 1.0, r.metric(t, "errors", StageResolve))
	assert.Equal(t, 1, r.logs.FilterMessage("neighbour did not resolve; keeping its last addresses").Len())
}

func TestShaperWithoutNetem(t *testing.T) {
	tc := NewFake()
	tc.NoNetem = true
	r := newRig(t, tc, false)
	p, err := r.sh.Apply(context.Background())
	require.NoError(t, err)
	assert.Equal(t, p.State, tc.State())
	for _, q := range tc.State().Qdiscs[1:] {
		assert.Equal(t, KindBFIFO, q.Kind, "rate shaping still applies, behind a bounded fifo")
	}
	assert.Equal(t, uint64(2e6), tc.State().Classes[0].Rate)

	assert.Equal(t, 1.0, r.metric(t, "unsupported", "delay"))
	assert.Equal(t, 1.0, r.metric(t, "unsupported", "jitter"))
	assert.Equal(t, 1.0, r.metric(t, "unsupported", "loss"))
	assert.Zero(t, r.metric(t, "errors", StageReconcile), "a missing netem is handled, not an error")

	warned := r.logs.FilterMessageSnippet("shaping link without netem").All()
	require.Len(t, warned, 2, "one line per impaired link (b, c); d asks for nothing")
	assert.Equal(t, "shaping link without netem: not applied: delay 20ms, jitter 1ms, loss 0.5%", warned[0].Message)
	assert.Equal(t, "b", warned[0].ContextMap()["peer"])
	assert.Equal(t, "shaping link without netem: not applied: loss 1%", warned[1].Message)
	assert.Equal(t, 1, r.logs.FilterMessageSnippet("the kernel has no netem qdisc").Len())

	// Once known, netem is not tried again.
	tc.TakeOps()
	_, err = r.sh.Apply(context.Background())
	require.NoError(t, err)
	assert.Empty(t, tc.TakeOps())

	// A topology without impairments clears the gauges.
	for i := range r.topo.Links {
		r.topo.Links[i].Delay, r.topo.Links[i].Jitter, r.topo.Links[i].Loss = 0, 0, 0
	}
	_, err = r.sh.Apply(context.Background())
	require.NoError(t, err)
	assert.Zero(t, r.metric(t, "unsupported", "delay"))
}

func TestShaperStrict(t *testing.T) {
	tc := NewFake()
	tc.NoNetem = true
	r := newRig(t, tc, true)
	_, err := r.sh.Apply(context.Background())
	require.ErrorIs(t, err, ErrNetemUnsupported)
	assert.True(t, Fatal(err))
	assert.Contains(t, err.Error(), "--strict")
}

func TestShaperKeepsLastTopology(t *testing.T) {
	r := newRig(t, NewFake(), false)
	r.err = errors.New("unreadable")
	_, err := r.sh.Apply(context.Background())
	require.Error(t, err, "no topology yet")

	r.err = nil
	_, err = r.sh.Apply(context.Background())
	require.NoError(t, err)
	r.tc.TakeOps()
	r.err = errors.New("half-written ConfigMap")
	_, err = r.sh.Apply(context.Background())
	require.NoError(t, err)
	assert.Empty(t, r.tc.TakeOps())
	assert.Equal(t, 2.0, r.metric(t, "errors", StageTopology))
}

func TestShaperRun(t *testing.T) {
	tc := NewFake()
	// A previous run's leftovers, recognised by drip's root handle.
	require.NoError(t, tc.AddQdisc(Qdisc{Handle: RootHandle, Parent: HandleRoot, Kind: KindHTB}))
	require.NoError(t, tc.AddClass(Class{Handle: PeerClass(42), Parent: RootHandle, Rate: 1, Ceil: 1}))
	tc.TakeOps()
	r := newRig(t, tc, false)

	// A cancelled context: clean, one pass, clean up.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, r.sh.Run(ctx))
	ops := tc.TakeOps()
	require.NotEmpty(t, ops)
	assert.Equal(t, "delete qdisc htb d1: parent root default 0", ops[0], "stale state removed first")
	assert.Equal(t, "add qdisc htb d1: parent root default ffff", ops[1])
	assert.Equal(t, "delete qdisc htb d1: parent root default ffff", ops[len(ops)-1], "and everything removed on exit")
	assert.True(t, tc.State().Empty())
	assert.Zero(t, r.metric(t, "links"))
	assert.Equal(t, 1.0, r.metric(t, "reconciles"))
}

func TestShaperRunFatal(t *testing.T) {
	tc := NewFake()
	require.NoError(t, tc.AddQdisc(Qdisc{Handle: MakeHandle(1, 0), Parent: HandleRoot, Kind: "tbf"}))
	r := newRig(t, tc, false)
	err := r.sh.Run(context.Background()) // returns without waiting: fatal
	require.ErrorIs(t, err, ErrForeignRoot)
	qs, _ := tc.Qdiscs()
	assert.Equal(t, "tbf", qs[0].Kind, "someone else's root survives")
}

func TestNewShaperNeedsConfig(t *testing.T) {
	_, err := NewShaper(Config{Self: "a"})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "Load, TC and Self"))
}

func TestRateString(t *testing.T) {
	for r, want := range map[uint64]string{0: "unlimited", 500: "500Bps", 250e3: "250KBps", 2e6: "2MBps", 1_500_000: "1.5MBps", UnshapedRate: "12.5GBps"} {
		assert.Equal(t, want, rateString(r))
	}
}
