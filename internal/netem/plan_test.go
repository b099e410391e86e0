package netem

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/topology"
)

func mustTopo(t testing.TB, yaml string) *topology.Topology {
	t.Helper()
	tp, err := topology.Parse([]byte(yaml))
	require.NoError(t, err)
	return tp
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// A square a–b–c–d with a diagonal, as in Carzaniga09 §5's 4-broker network,
// with WAN properties on a's links.
const square = `
brokers:
  - {name: a, id: 0, peer: a.mesh:7100}
  - {name: b, id: 1, peer: b.mesh:7100}
  - {name: c, id: 2, peer: "[fd00::c]:7100"}
  - {name: d, id: 3, peer: 10.0.0.4:7100}
links:
  - {a: a, b: b, bandwidth: 2MBps, delay: 20ms, jitter: 1ms, loss: 0.5%}
  - {a: c, b: a, loss: 1%}
  - {a: a, b: d}
  - {a: b, b: c}
  - {a: c, b: d, bandwidth: 1MBps}
`

func TestNewPlan(t *testing.T) {
	root := Qdisc{Handle: RootHandle, Parent: HandleRoot, Kind: KindHTB, Default: DefaultMinor}
	def := Class{Handle: DefaultClass, Parent: RootHandle, Rate: UnshapedRate, Ceil: UnshapedRate}
	classB := Class{Handle: MakeHandle(0xd1, 0x1001), Parent: RootHandle, Rate: 2e6, Ceil: 2e6}
	classC := Class{Handle: MakeHandle(0xd1, 0x1002), Parent: RootHandle, Rate: UnshapedRate, Ceil: UnshapedRate}
	classD := Class{Handle: MakeHandle(0xd1, 0x1003), Parent: RootHandle, Rate: UnshapedRate, Ceil: UnshapedRate}
	imB := Impairment{Delay: 20 * time.Millisecond, Jitter: time.Millisecond, Loss: 0.005}
	// 2 MB/s × 21 ms held, doubled, in 1500-byte packets, is below the
	// kernel's default of 1000.
	netemB := Qdisc{Handle: MakeHandle(0x1001, 0), Parent: classB.Handle, Kind: KindNetem, Limit: 1000, Netem: imB}
	// An unshaped link is assumed to run at UnshapedRate: 12.5 GB/s × 0 s.
	netemC := Qdisc{Handle: MakeHandle(0x1002, 0), Parent: classC.Handle, Kind: KindNetem, Limit: 1000, Netem: Impairment{Loss: 0.01}}
	fifoB := Qdisc{Handle: MakeHandle(0x1001, 0), Parent: classB.Handle, Kind: KindBFIFO, Limit: 200_000} // 100 ms at 2 MB/s
	fifoC := Qdisc{Handle: MakeHandle(0x1002, 0), Parent: classC.Handle, Kind: KindBFIFO, Limit: fifoMaxBytes}
	fifoD := Qdisc{Handle: MakeHandle(0x1003, 0), Parent: classD.Handle, Kind: KindBFIFO, Limit: fifoMaxBytes}
	filter := func(prio uint16, dst string, class Class) Filter {
		return Filter{Parent: RootHandle, Priority: prio, Dst: netip.MustParsePrefix(dst), Class: class.Handle}
	}
	resolved := map[string][]netip.Addr{
		"b": addrs("fd00::b", "10.0.0.2", "::ffff:10.0.0.2", "10.0.0.2"), // mapped and repeated: one filter
		"c": addrs("fd00::c"),
		"d": addrs("10.0.0.4"),
	}

	tests := []struct {
		name    string
		in      Input
		want    State
		missing map[string][]Feature
		warn    string
	}{
		{
			name: "netem",
			in:   Input{Topology: mustTopo(t, square), Self: "a", Addrs: resolved},
			want: State{
				Qdiscs:  []Qdisc{root, netemB, netemC, fifoD},
				Classes: []Class{classB, classC, classD, def},
				Filters: []Filter{filter(1, "10.0.0.2/32", classB), filter(1, "10.0.0.4/32", classD), filter(2, "fd00::b/128", classB), filter(2, "fd00::c/128", classC)},
			},
		},
		{
			name: "no netem: rate only, impairments reported",
			in:   Input{Topology: mustTopo(t, square), Self: "a", Addrs: resolved, NoNetem: true},
			want: State{
				Qdiscs:  []Qdisc{root, fifoB, fifoC, fifoD},
				Classes: []Class{classB, classC, classD, def},
				Filters: []Filter{filter(1, "10.0.0.2/32", classB), filter(1, "10.0.0.4/32", classD), filter(2, "fd00::b/128", classB), filter(2, "fd00::c/128", classC)},
			},
			missing: map[string][]Feature{"b": {FeatureDelay, FeatureJitter, FeatureLoss}, "c": {FeatureLoss}},
		},
		{
			name: "unresolved neighbour keeps its class",
			in:   Input{Topology: mustTopo(t, square), Self: "a", Addrs: map[string][]netip.Addr{"d": addrs("10.0.0.4")}, NoNetem: true},
			want: State{
				Qdiscs:  []Qdisc{root, fifoB, fifoC, fifoD},
				Classes: []Class{classB, classC, classD, def},
				Filters: []Filter{filter(1, "10.0.0.4/32", classD)},
			},
			missing: map[string][]Feature{"b": {FeatureDelay, FeatureJitter, FeatureLoss}, "c": {FeatureLoss}},
		},
		{
			name: "shared address goes to the lower router ID",
			in:   Input{Topology: mustTopo(t, square), Self: "a", NoNetem: true, Addrs: map[string][]netip.Addr{"b": addrs("10.0.0.9"), "d": addrs("10.0.0.9")}},
			want: State{
				Qdiscs:  []Qdisc{root, fifoB, fifoC, fifoD},
				Classes: []Class{classB, classC, classD, def},
				Filters: []Filter{filter(1, "10.0.0.9/32", classB)},
			},
			missing: map[string][]Feature{"b": {FeatureDelay, FeatureJitter, FeatureLoss}, "c": {FeatureLoss}},
			warn:    `neighbours "b" and "d" both resolve to 10.0.0.9`,
		},
		{
			name: "no neighbours: nothing to install",
			in:   Input{Topology: mustTopo(t, "brokers: [{name: a}, {name: b}]"), Self: "a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPlan(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, p.State)
			for _, pp := range p.Peers {
				assert.Equal(t, tt.missing[pp.Name], pp.Missing, pp.Name)
				assert.Equal(t, PeerClass(pp.ID), pp.Class)
			}
			if tt.warn == "" {
				assert.Empty(t, p.Warnings)
			} else {
				require.Len(t, p.Warnings, 1)
				assert.Contains(t, p.Warnings[0], tt.warn)
			}
		})
	}
}

func TestNewPlanPeers(t *testing.T) {
	p, err := NewPlan(Input{Topology: mustTopo(t, square), Self: "c", Addrs: map[string][]netip.Addr{"a": addrs("10.0.0.1")}})
	require.NoError(t, err)
	require.Len(t, p.Peers, 3)
	assert.Equal(t, []string{"a", "b", "d"}, []string{p.Peers[0].Name, p.Peers[1].Name, p.Peers[2].Name}, "router ID order")
	assert.Equal(t, Impairment{Loss: 0.01}, p.Peers[0].Impairment, "links are undirected: c–a is a–c")
	assert.Equal(t, uint64(0), p.Peers[1].Rate, "no bandwidth: unshaped")
	assert.Equal(t, uint64(1e6), p.Peers[2].Rate)
	assert.Equal(t, addrs("10.0.0.1"), p.Peers[0].Addrs)
}

func TestNewPlanErrors(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{"no topology", Input{Self: "a"}, "no topology"},
		{"unknown self", Input{Topology: mustTopo(t, square), Self: "x"}, `no broker named "x"`},
		{"router ID too large", Input{Topology: mustTopo(t, "brokers: [{name: a}, {name: b, id: 28672}]\nlinks: [{a: a, b: b}]"), Self: "a"}, `"b" has router ID 28672`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPlan(tt.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err := NewPlan(Input{Topology: mustTopo(t, "brokers: [{name: a}, {name: b, id: 28671}]\nlinks: [{a: a, b: b}]"), Self: "a"})
	require.NoError(t, err, "MaxRouterID itself fits")
	assert.Equal(t, uint16(0x7fff), Major(PeerLeaf(MaxRouterID)), "below the kernel's automatic handles")
}

func TestQueueLimits(t *testing.T) {
	tests := []struct {
		name  string
		rate  uint64
		im    Impairment
		fifo  uint32
		netem uint32
	}{
		{"slow link: floor", 10e3, Impairment{Delay: 50 * time.Millisecond}, fifoMinBytes, netemMinPackets},
		{"1 MB/s: 100 ms of traffic", 1e6, Impairment{Delay: 100 * time.Millisecond}, 100_000, netemMinPackets},
		// 125 MB/s × 250 ms = 31.25 MB held, doubled: 41667 packets.
		{"fast long link", 125e6, Impairment{Delay: 200 * time.Millisecond, Jitter: 50 * time.Millisecond}, fifoMaxBytes, 41667},
		{"unshaped: ceilings", UnshapedRate, Impairment{Delay: time.Second}, fifoMaxBytes, netemMaxPackets},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.fifo, fifoLimit(tt.rate))
			assert.Equal(t, tt.netem, netemLimit(tt.rate, tt.im))
		})
	}
	assert.Equal(t, uint64(1), bytesPerSecond(0.3), "a positive bandwidth never means unshaped")
	assert.Equal(t, uint64(0), bytesPerSecond(0))
}

func TestPeerHost(t *testing.T) {
	for b, want := range map[topology.Broker]string{
		{Peer: "b1.drip.ns.svc:7100"}:            "b1.drip.ns.svc",
		{Peer: "[fd00::1]:7100"}:                 "fd00::1",
		{Peer: "10.0.0.1"}:                       "10.0.0.1",
		{Client: "10.0.0.2:7000"}:                "10.0.0.2",
		{Peer: "10.0.0.3:7100", Client: "x:700"}: "10.0.0.3",
		{}:                                       "",
	} {
		assert.Equal(t, want, PeerHost(b), "%+v", b)
	}
}

func TestHandles(t *testing.T) {
	assert.Equal(t, "d1:", HandleString(RootHandle))
	assert.Equal(t, "d1:ffff", HandleString(DefaultClass))
	assert.Equal(t, "d1:1005", HandleString(PeerClass(5)))
	assert.Equal(t, "1005:", HandleString(PeerLeaf(5)))
	assert.Equal(t, "root", HandleString(HandleRoot))
	assert.True(t, isOwnLeaf(PeerLeaf(0)))
	assert.True(t, isOwnLeaf(PeerLeaf(MaxRouterID)))
	assert.False(t, isOwnLeaf(MakeHandle(0x8001, 0)), "the kernel's automatic handles are not drip's")
	assert.False(t, isOwnLeaf(RootHandle))
}

func BenchmarkNewPlan(b *testing.B) {
	in := Input{Topology: star(64), Self: "hub", Addrs: map[string][]netip.Addr{}}
	for i := range 64 {
		in.Addrs[leafName(i)] = []netip.Addr{netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewPlan(in); err != nil {
			b.Fatal(err)
		}
	}
}
