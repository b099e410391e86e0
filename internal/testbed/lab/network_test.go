package lab

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/topology"
)

// line3 is the root tests' lab: b0–b1–b2 with 20 ms and 1 MB/s per link.
func line3(t testing.TB, loss float64) *topology.Topology {
	t.Helper()
	tp, err := Generate(GenOptions{Shape: ShapeLine, N: 3, Bandwidth: 1e6, Delay: 20 * ms, Loss: topology.Probability(loss)})
	require.NoError(t, err)
	return tp
}

func newLine3(t testing.TB) *Network[int] {
	t.Helper()
	n, err := NewNetwork[int](line3(t, 0), NetworkOptions{Seed: 1})
	require.NoError(t, err)
	return n
}

func payloads(ds []Delivery[int]) []int {
	out := []int{}
	for _, d := range ds {
		out = append(out, d.Payload)
	}
	return out
}

// A packet crosses each link of its path in turn: serialisation plus delay
// per hop (Carzaniga09 §5.1.2: brokers in separate sites joined by shaped links).
func TestNetworkMultiHop(t *testing.T) {
	n := newLine3(t)
	require.Equal(t, DropNone, n.Send(0, 0, 2, 1000, 1))
	require.Equal(t, DropNone, n.Send(0, 0, 2, 1000, 2))
	at, ok := n.NextEvent()
	require.True(t, ok)
	assert.Equal(t, 21*ms, at, "first hop: 1 ms serialisation + 20 ms")
	assert.Empty(t, n.Advance(42*ms-1))
	assert.Equal(t, []int{1}, payloads(n.Advance(42*ms)), "two hops of 21 ms")
	assert.Equal(t, []int{2}, payloads(n.Advance(43*ms)), "pipelined one serialisation behind")
	_, ok = n.NextEvent()
	assert.False(t, ok)
	assert.Zero(t, n.InFlight())

	st := n.Stats(time.Second)
	require.Len(t, st, 4)
	assert.Equal(t, "b0", st[0].From)
	assert.Equal(t, "b1", st[0].To)
	assert.Equal(t, uint64(2000), st[0].Bytes)
	assert.Equal(t, uint64(2000), st[2].Bytes, "b1→b2 carried them too")
	assert.Zero(t, st[1].Bytes, "nothing went back")
}

// Cross traffic entering at b1 queues behind b0's packets on b1→b2 in the
// order the packets reach b1.
func TestNetworkCrossTraffic(t *testing.T) {
	n := newLine3(t)
	n.Send(0, 0, 2, 1000, 1)     // reaches b1 at 21 ms
	n.Send(21*ms, 1, 2, 1000, 2) // enters b1→b2 at 21 ms, after packet 1
	n.Send(21*ms, 1, 2, 1000, 3)
	got := map[int]time.Duration{}
	for now := time.Duration(0); now <= 100*ms; now += 100 * time.Microsecond {
		for _, d := range n.Advance(now) {
			got[d.Payload] = now
		}
	}
	assert.Equal(t, map[int]time.Duration{1: 42 * ms, 2: 43 * ms, 3: 44 * ms}, got)
}

func TestNetworkCutHealSet(t *testing.T) {
	n := newLine3(t)
	n.Send(0, 0, 2, 1000, 1)
	require.NoError(t, n.Cut(0, "b2", "b1"))
	assert.Equal(t, DropCut, n.Send(ms, 1, 2, 100, 2), "new packets stop at the cut")
	assert.Empty(t, n.Advance(time.Second), "the packet on its way dies at the cut")
	st := n.Stats(time.Second)
	assert.Equal(t, uint64(2), st[2].Cut, "b1→b2 counts both")
	assert.False(t, st[2].Up)
	assert.False(t, st[3].Up, "both directions are cut")

	require.NoError(t, n.Heal("b1", "b2"))
	delay := 5 * ms
	bw := 0.0
	require.NoError(t, n.Set(time.Second, "b1", "b2", Change{Delay: &delay, Bandwidth: &bw}))
	n.Send(time.Second, 0, 2, 1000, 3)
	assert.Equal(t, []int{3}, payloads(n.Advance(time.Second+26*ms)), "21 ms, then 5 ms at unlimited rate")
	st = n.Stats(2 * time.Second)
	assert.Equal(t, 5*ms, st[3].Params.Delay)
	assert.Equal(t, 20*ms, st[0].Params.Delay, "other links keep theirs")
	assert.Equal(t, minQueueBytes, st[2].Params.QueueBytes)

	loss := 2.0
	assert.ErrorContains(t, n.Set(time.Second, "b0", "b1", Change{Loss: &loss}), "not in [0, 1]")
	assert.ErrorContains(t, n.Set(time.Second, "b0", "b2", Change{}), "no link between b0 and b2")
	assert.ErrorContains(t, n.Cut(time.Second, "b0", "bx"), `no site "bx"`)
	assert.ErrorContains(t, n.Heal("bx", "b0"), `no site "bx"`)
}

func TestNetworkLocalAndUnreachable(t *testing.T) {
	tp := line3(t, 0)
	tp.Brokers = append(tp.Brokers, topology.Broker{Name: "island"})
	n, err := NewNetwork[int](tp, NetworkOptions{})
	require.NoError(t, err)
	assert.Equal(t, DropNone, n.Send(0, 1, 1, 10, 7))
	assert.Equal(t, []Delivery[int]{{Dst: 1, Payload: 7}}, n.Advance(0), "a site reaches itself at once")
	assert.Equal(t, DropNoRoute, n.Send(0, 0, 3, 10, 8))
	assert.Equal(t, []uint64{1, 0, 0, 0}, n.NoRoute())
	assert.Nil(t, n.Path(0, 3))
	assert.Equal(t, []string{"b0", "b1", "b2", "island"}, n.Sites())
}

// Losses compound over hops: at 5% per link, a two-hop path delivers
// about 0.95² of the packets, and the same seed loses the same ones.
func TestNetworkLossDeterministic(t *testing.T) {
	run := func() (int, []LinkStats) {
		n, err := NewNetwork[int](line3(t, 0.05), NetworkOptions{Seed: 42})
		require.NoError(t, err)
		got := 0
		for i := range 20_000 {
			now := time.Duration(i) * 2 * ms
			n.Send(now, 0, 2, 100, i)
			got += len(n.Advance(now))
		}
		got += len(n.Advance(time.Hour))
		return got, n.Stats(time.Hour)
	}
	got, st := run()
	assert.InDelta(t, 0.95*0.95, float64(got)/20_000, 0.01)
	assert.Equal(t, uint64(got), st[2].Packets, "b1→b2 accepted exactly what arrived")
	again, st2 := run()
	assert.Equal(t, got, again)
	assert.Equal(t, st, st2)
}

func TestNetworkInvalid(t *testing.T) {
	tp := line3(t, 0)
	tp.Links[0].Delay = -1
	_, err := NewNetwork[int](tp, NetworkOptions{})
	assert.ErrorContains(t, err, "link 0 (b0–b1): delay -1ns is negative")

	neg := -1.0
	for _, c := range []Change{{Bandwidth: &neg}, {Loss: &neg}, {Delay: new(time.Duration(-1))}, {Jitter: new(time.Duration(-1))}} {
		assert.Error(t, c.Validate())
	}
}
