package netem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"go.uber.org/zap/zaptest"

	"github.com/dripmesh/drip/internal/topology"
)

// inNetns runs fn on a thread switched into ns. The goroutine ends with
// the thread still locked, so the runtime discards the thread instead of
// returning it, in the foreign namespace, to the pool. Sockets fn opens
// stay in ns and can be used from any goroutine.
func inNetns(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// newNetns creates an anonymous network namespace, gone when the test
// closes its handle: nothing named that parallel runs could collide on,
// nothing under /run left behind by a crash.
func newNetns(t *testing.T) netns.NsHandle {
	t.Helper()
	type result struct {
		ns  netns.NsHandle
		err error
	}
	rc := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread ends in the new namespace
		ns, err := netns.New()
		rc <- result{ns, err}
	}()
	r := <-rc
	require.NoError(t, r.err, "create network namespace")
	t.Cleanup(func() { _ = r.ns.Close() })
	return r.ns
}

// vethLab is two namespaces joined by a veth pair drip0 (in a) – drip1 (in
// b), with two /30 subnets on it: 10.213.1.0/30 is shaped, 10.213.2.0/30
// is the unshaped comparison.
type vethLab struct {
	a, b   netns.NsHandle
	ha, hb *netlink.Handle
}

func newVethLab(t *testing.T) *vethLab {
	t.Helper()
	l := &vethLab{a: newNetns(t), b: newNetns(t)}
	var err error
	l.ha, err = netlink.NewHandleAt(l.a)
	require.NoError(t, err)
	t.Cleanup(l.ha.Close)
	l.hb, err = netlink.NewHandleAt(l.b)
	require.NoError(t, err)
	t.Cleanup(l.hb.Close)

	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "drip0"}, PeerName: "drip1", PeerNamespace: netlink.NsFd(l.b)}
	require.NoError(t, l.ha.LinkAdd(veth), "create veth pair")
	for _, side := range []struct {
		h     *netlink.Handle
		dev   string
		addrs []string
	}{
		{l.ha, "drip0", []string{"10.213.1.1/30", "10.213.2.1/30"}},
		{l.hb, "drip1", []string{"10.213.1.2/30", "10.213.2.2/30"}},
	} {
		link, err := side.h.LinkByName(side.dev)
		require.NoError(t, err)
		for _, a := range side.addrs {
			addr, err := netlink.ParseAddr(a)
			require.NoError(t, err)
			require.NoError(t, side.h.AddrAdd(link, addr))
		}
		require.NoError(t, side.h.LinkSetUp(link))
	}
	return l
}

// throughput sends as fast as TCP allows from namespace a to dst:port in
// namespace b for d and returns the bytes per second the receiver got,
// counted from its first byte.
func (l *vethLab) throughput(t *testing.T, dst string, d time.Duration) float64 {
	t.Helper()
	var lis net.Listener
	require.NoError(t, inNetns(l.b, func() (err error) {
		lis, err = net.Listen("tcp", net.JoinHostPort(dst, "0"))
		return err
	}))
	defer lis.Close()

	type result struct {
		bytes   int64
		elapsed time.Duration
		err     error
	}
	got := make(chan result, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		buf := make([]byte, 256<<10)
		if _, err := io.ReadAtLeast(c, buf, 1); err != nil {
			got <- result{err: err}
			return
		}
		start := time.Now()
		_ = c.SetReadDeadline(start.Add(d))
		total := int64(0)
		for {
			n, err := c.Read(buf)
			total += int64(n)
			if err != nil {
				break
			}
		}
		got <- result{bytes: total, elapsed: time.Since(start)}
	}()

	var conn net.Conn
	require.NoError(t, inNetns(l.a, func() (err error) {
		conn, err = net.DialTimeout("tcp", lis.Addr().String(), 5*time.Second)
		return err
	}))
	defer conn.Close()
	_ = conn.SetWriteDeadline(time.Now().Add(d + 2*time.Second))
	chunk := make([]byte, 64<<10)
	go func() {
		for {
			if _, err := conn.Write(chunk); err != nil {
				return
			}
		}
	}()
	r := <-got
	require.NoError(t, r.err)
	return float64(r.bytes) / r.elapsed.Seconds()
}

// TestKernelShaping programs a real device in a private namespace and
// measures the result: Carzaniga09 §5.1 puts brokers on links of limited
// bandwidth, and this is the check that a link shaped to 2 MB/s carries
// 2 MB/s while other destinations are not held back.
func TestKernelShaping(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces and program qdiscs")
	}
	const rate = 2e6
	l := newVethLab(t)
	topo := mustTopo(t, `
brokers:
  - {name: a, id: 0, peer: 10.213.1.1:7100}
  - {name: b, id: 1, peer: 10.213.1.2:7100}
  - {name: c, id: 2, peer: 10.213.2.2:7100}
links:
  - {a: a, b: b, bandwidth: 2MBps, delay: 5ms}
  - {a: a, b: c}
`)
	tc, err := OpenNetlinkAt(l.a, "drip0")
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = Remove(tc) // also when an assertion failed part-way
		tc.Close()
	})
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	sh, err := NewShaper(Config{
		Load: func() (*topology.Topology, error) { return topo, nil },
		Self: "a", TC: tc, Log: zaptest.NewLogger(t), Metrics: m,
	})
	require.NoError(t, err)
	require.NoError(t, sh.Clean())
	_, err = sh.Apply(context.Background())
	require.NoError(t, err)

	// Read back with the netlink package directly, not through Netlink.
	link, err := l.ha.LinkByName("drip0")
	require.NoError(t, err)
	qdiscs, err := l.ha.QdiscList(link)
	require.NoError(t, err)
	byHandle := map[uint32]netlink.Qdisc{}
	for _, q := range qdiscs {
		byHandle[q.Attrs().Handle] = q
	}
	root, ok := byHandle[RootHandle].(*netlink.Htb)
	require.True(t, ok, "htb root d1: in %v", qdiscs)
	assert.Equal(t, uint32(netlink.HANDLE_ROOT), root.Parent)
	assert.Equal(t, uint32(DefaultMinor), root.Defcls)

	classes, err := l.ha.ClassList(link, RootHandle)
	require.NoError(t, err)
	rates := map[uint32]uint64{}
	for _, c := range classes {
		if htb, ok := c.(*netlink.HtbClass); ok {
			rates[htb.Handle] = htb.Rate
		}
	}
	assert.Equal(t, map[uint32]uint64{PeerClass(1): rate, PeerClass(2): UnshapedRate, DefaultClass: UnshapedRate}, rates)

	filters, err := l.ha.FilterList(link, RootHandle)
	require.NoError(t, err)
	flows := map[uint32]uint32{} // destination → class
	for _, f := range filters {
		if u, ok := f.(*netlink.U32); ok && u.Sel != nil && len(u.Sel.Keys) == 1 {
			assert.Equal(t, int32(16), u.Sel.Keys[0].Off, "IPv4 destination")
			flows[u.Sel.Keys[0].Val] = u.ClassId
		}
	}
	assert.Equal(t, map[uint32]uint32{0x0ad50102: PeerClass(1), 0x0ad50202: PeerClass(2)}, flows)

	if testutil.ToFloat64(m.unsupported.WithLabelValues("delay")) == 1 {
		t.Log("kernel without sch_netem: rate shaping only, delay reported unsupported")
		assert.Equal(t, "bfifo", byHandle[PeerLeaf(1)].Type())
		assert.Zero(t, testutil.ToFloat64(m.unsupported.WithLabelValues("loss")), "no link asks for loss")
	} else {
		netem, ok := byHandle[PeerLeaf(1)].(*netlink.Netem)
		require.True(t, ok, "netem leaf 1001: in %v", qdiscs)
		assert.InDelta(t, 5000, float64(netem.Latency)/netlink.TickInUsec(), 1, "5 ms in µs")
	}

	// The real kernel reads back as planned: a second pass changes nothing.
	before := testutil.ToFloat64(m.changes)
	_, err = sh.Apply(context.Background())
	require.NoError(t, err)
	assert.Equal(t, before, testutil.ToFloat64(m.changes), "idempotent on a real device")

	shaped := l.throughput(t, "10.213.1.2", 3*time.Second)
	unshaped := l.throughput(t, "10.213.2.2", time.Second)
	t.Logf("shaped to 2 MB/s: %.0f B/s (ratio %.3f); unshaped peer: %.0f B/s (%.0f×)", shaped, shaped/rate, unshaped, unshaped/rate)
	assert.InDelta(t, 1, shaped/rate, 0.2, "measured/configured rate")
	assert.Greater(t, unshaped, 10*rate, "the unshaped destination is much faster")

	// b moves to a new address: one filter swapped on the real device.
	topo.Brokers[1].Peer = "10.213.3.2:7100"
	_, err = sh.Apply(context.Background())
	require.NoError(t, err)
	assert.Equal(t, before+2, testutil.ToFloat64(m.changes), "delete + add of b's filter")
	got, err := tc.Filters()
	require.NoError(t, err)
	var dsts []string
	for _, f := range got {
		dsts = append(dsts, fmt.Sprintf("%s→%s", f.Dst, HandleString(f.Class)))
	}
	assert.ElementsMatch(t, []string{"10.213.2.2/32→d1:1002", "10.213.3.2/32→d1:1001"}, dsts)

	require.NoError(t, sh.Clean())
	qdiscs, err = l.ha.QdiscList(link)
	require.NoError(t, err)
	for _, q := range qdiscs {
		h := q.Attrs().Handle
		assert.False(t, Major(h) == RootMajor || isOwnLeaf(h), "drip's qdisc %s left after cleanup", HandleString(h))
	}
	require.Len(t, qdiscs, 1, "only the kernel's default root remains: %v", qdiscs)
	assert.Zero(t, qdiscs[0].Attrs().Handle)
}

// TestKernelBFIFOLimit checks the raw-netlink path the netlink package
// lacks: a bfifo's byte limit is set, read back and changed in place.
func TestKernelBFIFOLimit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces and program qdiscs")
	}
	l := newVethLab(t)
	tc, err := OpenNetlinkAt(l.a, "drip0")
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = Remove(tc)
		tc.Close()
	})
	root := Qdisc{Handle: RootHandle, Parent: HandleRoot, Kind: KindHTB, Default: DefaultMinor}
	class := Class{Handle: PeerClass(7), Parent: RootHandle, Rate: 123456, Ceil: 234567}
	leaf := Qdisc{Handle: PeerLeaf(7), Parent: class.Handle, Kind: KindBFIFO, Limit: 77777}
	require.NoError(t, tc.AddQdisc(root))
	require.NoError(t, tc.AddClass(class))
	require.NoError(t, tc.AddQdisc(leaf))
	require.ErrorIs(t, tc.AddQdisc(leaf), os.ErrExist, "Add does not replace")

	leaf.Limit = 88888
	require.NoError(t, tc.ChangeQdisc(leaf))
	qs, err := tc.Qdiscs()
	require.NoError(t, err)
	assert.Contains(t, qs, leaf)
	assert.Contains(t, qs, root)
	cs, err := tc.Classes()
	require.NoError(t, err)
	assert.Contains(t, cs, class)

	removed, err := Remove(tc)
	require.NoError(t, err)
	assert.True(t, removed)
	qs, err = tc.Qdiscs()
	require.NoError(t, err)
	for _, q := range qs {
		assert.NotEqual(t, uint16(RootMajor), Major(q.Handle))
	}
	_, err = tc.Filters()
	assert.False(t, errors.Is(err, os.ErrNotExist), "listing filters without drip's root is not an error: %v", err)
}
