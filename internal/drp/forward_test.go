package drp_test

import (
	"math"
	"testing"

	"github.com/bits-and-blooms/bitset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/drp"
)

// treeNet is the fixture of the table tests, a tree so every path is unique:
//
//	0 ─ 1 ─ 3
//	│   │
//	2   4 ─ 5
//	│
//	6           7 (isolated, unreachable)
func treeNet() *fakeNet {
	g := newGraph(8).link(0, 1, 1).link(1, 3, 1).link(1, 4, 1).link(4, 5, 1).link(0, 2, 1).link(2, 6, 1)
	return newFakeNet(g)
}

// want is a decision in comparable form: next hop → destinations.
type want struct {
	deliver   bool
	forwards  map[uint32][]uint
	broadcast bool
	hopsLeft  uint8
	source    uint32
	noRoute   int
	hopLimit  int
	bounced   []uint
}

func check(t *testing.T, w want, d drp.Decision) {
	t.Helper()
	assert.Equal(t, w.deliver, d.Deliver, "Deliver")
	got := map[uint32][]uint{}
	for _, fw := range d.Forwards {
		_, dup := got[fw.Next]
		require.False(t, dup, "two bundles to next hop %d", fw.Next)
		got[fw.Next] = members(fw.Bundle.Dest)
		assert.Equal(t, w.broadcast, fw.Bundle.Broadcast, "Broadcast to %d", fw.Next)
		assert.Equal(t, w.hopsLeft, fw.Bundle.HopsLeft, "HopsLeft to %d", fw.Next)
		assert.Equal(t, w.source, fw.Bundle.Source, "Source to %d", fw.Next)
	}
	if w.forwards == nil {
		w.forwards = map[uint32][]uint{}
	}
	assert.Equal(t, w.forwards, got, "forwards")
	assert.Equal(t, w.noRoute, d.Dropped[drp.DropNoRoute], "dropped no_route")
	assert.Len(t, d.Unrouted, w.noRoute, "Unrouted names each no_route drop")
	for _, id := range d.Unrouted {
		for next, dest := range got {
			assert.NotContains(t, dest, uint(id), "unrouted %d is also forwarded to %d", id, next)
		}
	}
	assert.Equal(t, w.hopLimit, d.Dropped[drp.DropHopLimit], "dropped hop_limit")
	if w.bounced == nil {
		assert.Nil(t, d.Bounced, "Bounced")
	} else {
		require.NotNil(t, d.Bounced, "Bounced")
		assert.Equal(t, w.bounced, members(d.Bounced), "Bounced")
		for next, dest := range got {
			for _, id := range w.bounced {
				assert.NotContains(t, dest, id, "bounced %d is also forwarded to %d", id, next)
			}
		}
	}
}

func TestIngress(t *testing.T) {
	const hops = 8
	net := treeNet()
	// Known at 0 is 7 (0–6), so with fraction 0.5 the threshold is 3
	// destinations: broadcast from the 4th on (Carzaniga09 §2.3).
	tests := []struct {
		name     string
		fraction float64
		dest     *bitset.BitSet
		want     want
	}{
		// Carzaniga09 §2.2: one bundle per next hop, D partitioned by it.
		{"partition by next hop", 0.5, set(3, 4, 6),
			want{forwards: map[uint32][]uint{1: {3, 4}, 2: {6}}}},
		{"single destination", 0.5, set(5),
			want{forwards: map[uint32][]uint{1: {5}}}},
		// Carzaniga09 §2.2: local delivery at the ingress is separate.
		{"self in D is neither delivered nor forwarded", 0.5, set(0, 3),
			want{forwards: map[uint32][]uint{1: {3}}}},
		{"only self", 0.5, set(0), want{}},
		{"empty D", 0.5, set(), want{}},
		{"nil D", 0.5, nil, want{}},
		{"unreachable destination dropped", 0.5, set(3, 7),
			want{forwards: map[uint32][]uint{1: {3}}, noRoute: 1}},
		{"unknown router ID dropped", 0.5, set(3, 200),
			want{forwards: map[uint32][]uint{1: {3}}, noRoute: 1}},
		{"all unreachable", 0.5, set(7), want{noRoute: 1}},
		// Carzaniga09 §2.3: the threshold is strict and counts only reachable
		// routers other than self.
		{"at threshold partitions", 0.5, set(3, 4, 5),
			want{forwards: map[uint32][]uint{1: {3, 4, 5}}}},
		{"self and unreachable do not count", 0.5, set(0, 3, 4, 5, 7),
			want{forwards: map[uint32][]uint{1: {3, 4, 5}}, noRoute: 1}},
		{"above threshold broadcasts", 0.5, set(2, 3, 4, 5),
			want{forwards: map[uint32][]uint{1: {2, 3, 4, 5}, 2: {2, 3, 4, 5}}, broadcast: true}},
		{"broadcast drops self and unreachable", 0.5, set(0, 2, 3, 4, 5, 7),
			want{forwards: map[uint32][]uint{1: {2, 3, 4, 5}, 2: {2, 3, 4, 5}}, broadcast: true, noRoute: 1}},
		{"fraction 0 never broadcasts", 0, set(1, 2, 3, 4, 5, 6),
			want{forwards: map[uint32][]uint{1: {1, 3, 4, 5}, 2: {2, 6}}}},
		{"fraction 1 never broadcasts", 1, set(1, 2, 3, 4, 5, 6),
			want{forwards: map[uint32][]uint{1: {1, 3, 4, 5}, 2: {2, 6}}}},
		{"small fraction broadcasts one destination", 0.01, set(6),
			want{forwards: map[uint32][]uint{1: {6}, 2: {6}}, broadcast: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := drp.NewForwarder(drp.Config{BroadcastFraction: tt.fraction, HopLimit: hops})
			require.NoError(t, err)
			tt.want.hopsLeft = hops
			check(t, tt.want, f.Ingress(net.at(0), tt.dest))
		})
	}
}

func TestTransit(t *testing.T) {
	net := treeNet()
	b := func(source uint32, hops uint8, broadcast bool, ids ...uint) drp.Bundle {
		return drp.Bundle{Source: source, Dest: set(ids...), HopsLeft: hops, Broadcast: broadcast}
	}
	tests := []struct {
		name     string
		at, from int
		in       drp.Bundle
		want     want
	}{
		// Carzaniga09 §2.2: deliver iff self ∈ D, remove self, repartition.
		{"deliver and repartition", 1, 0, b(0, 8, false, 1, 3, 4, 5),
			want{deliver: true, forwards: map[uint32][]uint{3: {3}, 4: {4, 5}}, hopsLeft: 7}},
		{"pass through", 1, 0, b(0, 8, false, 3),
			want{forwards: map[uint32][]uint{3: {3}}, hopsLeft: 7}},
		{"final destination", 3, 1, b(0, 8, false, 3), want{deliver: true}},
		{"source is preserved", 4, 1, b(6, 8, false, 5),
			want{forwards: map[uint32][]uint{5: {5}}, hopsLeft: 7, source: 6}},
		{"empty D", 1, 0, b(0, 8, false), want{}},
		{"nil D", 1, 0, drp.Bundle{HopsLeft: 8}, want{}},
		{"unreachable dropped", 1, 0, b(0, 8, false, 3, 7),
			want{forwards: map[uint32][]uint{3: {3}}, hopsLeft: 7, noRoute: 1}},
		// Tables that agree never send a bundle back; these disagree (4
		// sent 1 a bundle for 2, which 1 reaches through 0, and for 0).
		{"a destination routed back to the sender is bounced, not sent", 1, 0, b(4, 8, false, 2, 3, 6),
			want{forwards: map[uint32][]uint{3: {3}}, hopsLeft: 7, source: 4, bounced: []uint{2, 6}}},
		{"only bounced destinations: nothing is sent", 1, 0, b(4, 8, false, 1, 0),
			want{deliver: true, bounced: []uint{0}}},
		{"the hop limit drops before anything bounces", 1, 0, b(4, 1, false, 0, 3),
			want{hopLimit: 2}},
		// Hop limit: a bundle received with HopsLeft h may be forwarded
		// only with h−1 ≥ 1.
		{"two hops left forwards with one", 1, 0, b(0, 2, false, 1, 3),
			want{deliver: true, forwards: map[uint32][]uint{3: {3}}, hopsLeft: 1}},
		{"last hop delivers, drops the rest", 1, 0, b(0, 1, false, 1, 3, 4, 5),
			want{deliver: true, hopLimit: 3}},
		{"last hop with nothing left drops nothing", 1, 0, b(0, 1, false, 1), want{deliver: true}},
		{"zero hops left is treated as exhausted", 1, 0, b(0, 0, false, 1, 3),
			want{deliver: true, hopLimit: 1}},
		{"hop limit before routing: unreachable counted as hop limit", 1, 0, b(0, 1, false, 7),
			want{hopLimit: 1}},
		// Carzaniga09 §2.3: a broadcast follows the source's tree, whole D.
		{"broadcast to children in the source's tree", 1, 0, b(0, 8, true, 1, 2, 3, 5),
			want{deliver: true, forwards: map[uint32][]uint{3: {2, 3, 5}, 4: {2, 3, 5}}, broadcast: true, hopsLeft: 7}},
		{"broadcast children depend on the source", 1, 4, b(5, 8, true, 2, 6),
			want{forwards: map[uint32][]uint{0: {2, 6}, 3: {2, 6}}, broadcast: true, hopsLeft: 7, source: 5}},
		{"broadcast leaf delivers only", 3, 1, b(0, 8, true, 3, 5), want{deliver: true}},
		{"broadcast with only self left stops", 1, 0, b(0, 8, true, 1), want{deliver: true}},
		{"broadcast never goes back to the sender", 1, 3, b(0, 8, true, 2, 5),
			want{forwards: map[uint32][]uint{4: {2, 5}}, broadcast: true, hopsLeft: 7}},
		{"broadcast hop limit counts all it carried", 1, 0, b(0, 1, true, 1, 3, 5),
			want{deliver: true, hopLimit: 2}},
		{"broadcast hop limit with only the sender as child drops nothing", 4, 5, b(0, 1, true, 3, 4), want{deliver: true}},
		{"broadcast hop limit at a leaf drops nothing", 3, 1, b(0, 1, true, 3, 5), want{deliver: true}},
		{"broadcast from an unknown source stops", 1, 0, b(7, 8, true, 3), want{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := drp.NewForwarder(drp.DefaultConfig())
			require.NoError(t, err)
			if tt.want.source == 0 {
				tt.want.source = tt.in.Source
			}
			check(t, tt.want, f.Transit(net.at(tt.at), uint32(tt.from), tt.in))
		})
	}
}

// Router IDs are bit positions; sets span several words at realistic sizes.
func TestMultiWordIDs(t *testing.T) {
	net := newFakeNet(newGraph(200).link(0, 70, 1).link(70, 140, 1).link(0, 190, 1))
	f, err := drp.NewForwarder(drp.Config{HopLimit: 4})
	require.NoError(t, err)

	d := f.Ingress(net.at(0), set(0, 140, 190, 199))
	check(t, want{forwards: map[uint32][]uint{70: {140}, 190: {190}}, hopsLeft: 4, noRoute: 1}, d)

	// An oversized, sparse incoming set is read correctly.
	in := bitset.New(10_000).Set(140).Set(70)
	d = f.Transit(net.at(70), 0, drp.Bundle{Dest: in, HopsLeft: 4})
	check(t, want{deliver: true, forwards: map[uint32][]uint{140: {140}}, hopsLeft: 3}, d)
}

// A decision of one bundle, the commonest, is one allocation while its
// destinations fit in four words, and the usual three beyond; either way
// the bundle owns its set.
func TestOneNextHopIsOneAllocation(t *testing.T) {
	net := newFakeNet(newGraph(400).link(0, 1, 1).link(1, 255, 1).link(1, 300, 1))
	f, err := drp.NewForwarder(drp.Config{HopLimit: 4})
	require.NoError(t, err)
	for _, tc := range []struct {
		dest   []uint
		allocs float64
	}{{[]uint{1, 255}, 1}, {[]uint{255}, 1}, {[]uint{1, 300}, 3}} {
		in, r := set(tc.dest...), net.at(0)
		d := f.Ingress(r, in)
		check(t, want{forwards: map[uint32][]uint{1: tc.dest}, hopsLeft: 4}, d)
		assert.Equal(t, tc.allocs, testing.AllocsPerRun(20, func() { f.Ingress(r, in) }), "to %v", tc.dest)
		in.ClearAll()
		other := f.Ingress(r, set(1))
		other.Forwards[0].Bundle.Dest.Set(2)
		check(t, want{forwards: map[uint32][]uint{1: tc.dest}, hopsLeft: 4}, d)
	}
}

// A star router has more neighbours than the linear scan handles.
func TestManyNextHops(t *testing.T) {
	const n = 40
	g := newGraph(n)
	for i := 1; i < n; i++ {
		g.link(0, i, 1)
	}
	net := newFakeNet(g)
	f, err := drp.NewForwarder(drp.Config{HopLimit: 4})
	require.NoError(t, err)
	all := bitset.New(n)
	wantFw := map[uint32][]uint{}
	for i := uint(1); i < n; i++ {
		all.Set(i)
		wantFw[uint32(i)] = []uint{i}
	}
	for range 3 { // the Forwarder's scratch must reset between calls
		check(t, want{forwards: wantFw, hopsLeft: 4}, f.Ingress(net.at(0), all))
		check(t, want{forwards: map[uint32][]uint{3: {3}}, hopsLeft: 4}, f.Ingress(net.at(0), set(3)))
	}
}

// Each bundle goes to a different link and may be queued, serialized or
// modified there: it must own its set, apart from the input and from the
// other bundles.
func TestDecisionOwnsItsSets(t *testing.T) {
	net := treeNet()
	f, err := drp.NewForwarder(drp.Config{BroadcastFraction: 0.5, HopLimit: 8})
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		decide func(dest *bitset.BitSet) drp.Decision
		dest   []uint
	}{
		{"ingress partition", func(d *bitset.BitSet) drp.Decision { return f.Ingress(net.at(0), d) }, []uint{3, 6}},
		{"ingress broadcast", func(d *bitset.BitSet) drp.Decision { return f.Ingress(net.at(0), d) }, []uint{2, 3, 4, 6}},
		{"transit partition", func(d *bitset.BitSet) drp.Decision {
			return f.Transit(net.at(1), 0, drp.Bundle{Dest: d, HopsLeft: 8})
		}, []uint{3, 5}},
		{"transit broadcast", func(d *bitset.BitSet) drp.Decision {
			return f.Transit(net.at(1), 0, drp.Bundle{Dest: d, HopsLeft: 8, Broadcast: true})
		}, []uint{3, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := set(tc.dest...)
			d := tc.decide(in)
			require.Len(t, d.Forwards, 2)
			first, second := d.Forwards[0].Bundle.Dest, d.Forwards[1].Bundle.Dest
			wantFirst, wantSecond := members(first), members(second)

			in.ClearAll().Set(1).Set(2)
			assert.Equal(t, wantFirst, members(first), "input change leaked into a bundle")
			assert.Equal(t, wantSecond, members(second), "input change leaked into a bundle")

			first.Set(0).Set(63)   // within its words
			first.Set(first.Len()) // one word past them: must not reuse the next bundle's
			first.Set(1000)        // far past them
			assert.Equal(t, wantSecond, members(second), "bundles share words")
		})
	}
}

func TestDropReasonLabels(t *testing.T) {
	// Values and labels are stable: they index Dropped and name metrics.
	assert.Equal(t, drp.DropReason(0), drp.DropNoRoute)
	assert.Equal(t, drp.DropReason(1), drp.DropHopLimit)
	assert.Equal(t, 2, drp.NumDropReasons)
	assert.Equal(t, "no_route", drp.DropNoRoute.String())
	assert.Equal(t, "hop_limit", drp.DropHopLimit.String())
	assert.Equal(t, "drop_reason_7", drp.DropReason(7).String())

	d := drp.Decision{Dropped: [drp.NumDropReasons]int{2, 3}}
	assert.Equal(t, 5, d.DroppedTotal())
}

func TestConfig(t *testing.T) {
	require.NoError(t, drp.DefaultConfig().Validate())
	tests := []struct {
		name string
		cfg  drp.Config
		want string // substring of the error, "" for valid
	}{
		{"default", drp.DefaultConfig(), ""},
		{"broadcast disabled", drp.Config{BroadcastFraction: 0, HopLimit: 1}, ""},
		{"fraction 1", drp.Config{BroadcastFraction: 1, HopLimit: 255}, ""},
		{"negative fraction", drp.Config{BroadcastFraction: -0.1, HopLimit: 8}, "BroadcastFraction = -0.1"},
		{"fraction above 1", drp.Config{BroadcastFraction: 1.5, HopLimit: 8}, "BroadcastFraction = 1.5"},
		{"NaN fraction", drp.Config{BroadcastFraction: math.NaN(), HopLimit: 8}, "BroadcastFraction = NaN"},
		{"zero hop limit", drp.Config{BroadcastFraction: 0.5}, "HopLimit = 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			f, nerr := drp.NewForwarder(tt.cfg)
			if tt.want == "" {
				require.NoError(t, err)
				require.NoError(t, nerr)
				assert.Equal(t, tt.cfg, f.Config())
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, nerr, tt.want)
			assert.Nil(t, f)
		})
	}
}

// walk carries one message from ingress through routers that each decide
// with their own view of the network, and returns which routers delivered
// it and how many destinations some router counted as dropped.
func walk(t *testing.T, cfg drp.Config, views []drp.Routing, ingress int, dest *bitset.BitSet) (delivered map[uint32]bool, dropped int) {
	t.Helper()
	f, err := drp.NewForwarder(cfg)
	require.NoError(t, err)
	type hop struct {
		at, from uint32
		b        drp.Bundle
	}
	delivered = map[uint32]bool{}
	count := func(d drp.Decision) {
		for _, k := range d.Dropped {
			dropped += k
		}
	}
	d := f.Ingress(views[ingress], dest)
	count(d)
	var queue []hop
	for _, fw := range d.Forwards {
		queue = append(queue, hop{fw.Next, uint32(ingress), drp.Bundle{Source: fw.Bundle.Source, Dest: fw.Bundle.Dest.Clone(), HopsLeft: fw.Bundle.HopsLeft, Broadcast: fw.Bundle.Broadcast}})
	}
	for steps := 0; len(queue) > 0 && steps < 100; steps++ { // a loop ends at the hop limit
		h := queue[0]
		queue = queue[1:]
		d := f.Transit(views[h.at], h.from, h.b)
		if d.Deliver {
			delivered[h.at] = true
		}
		count(d)
		fws := d.Forwards
		if d.Bounced != nil {
			fws = append(fws, sendBack(f, views[h.at], h.b, d.Bounced).Forwards...)
		}
		for _, fw := range fws {
			queue = append(queue, hop{fw.Next, h.at, drp.Bundle{Source: fw.Bundle.Source, Dest: fw.Bundle.Dest.Clone(), HopsLeft: fw.Bundle.HopsLeft, Broadcast: fw.Bundle.Broadcast}})
		}
	}
	return delivered, dropped
}

// TestBroadcastLosesSilentlyWhereTreesDisagree is why broadcast is off by
// default: on the square 0–1–2–3–0, router 1 (and 2) believe 3 hangs below
// 0 in 1's tree, router 0 believes it hangs below 2 — as while a link's
// new cost floods. A broadcast from 1 then reaches neither 3 nor any drop
// counter; partitioned bundles carry 3 until some router delivers it or
// counts it.
func TestBroadcastLosesSilentlyWhereTreesDisagree(t *testing.T) {
	square := func(w03, w23 float64) *fakeNet {
		return newFakeNet(newGraph(4).link(0, 1, 1).link(1, 2, 1).link(0, 3, w03).link(2, 3, w23))
	}
	old, updated := square(1, 2), square(2, 1)
	views := []drp.Routing{updated.at(0), old.at(1), old.at(2), old.at(3)}
	dest := set(0, 2, 3) // more than half of the others: the ingress broadcasts

	delivered, dropped := walk(t, drp.Config{BroadcastFraction: 0.5, HopLimit: 8}, views, 1, dest)
	assert.False(t, delivered[3], "the trees disagree on 3's parent")
	assert.Zero(t, dropped, "and nobody counts it")

	delivered, dropped = walk(t, drp.DefaultConfig(), views, 1, dest)
	assert.Equal(t, map[uint32]bool{0: true, 2: true, 3: true}, delivered, "partitioned, every destination arrives")
	assert.Zero(t, dropped)
}
