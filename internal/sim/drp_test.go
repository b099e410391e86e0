package sim_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/bits-and-blooms/bitset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/sim"
	"github.com/dripmesh/drip/internal/workload"
)

// This file checks B-DRP forwarding (package drp) over the UNICAST tables
// that package linkstate actually computes, with destination sets matched
// against the PREDICATES tables it actually floods.

// params is the encoding the routers advertise with.
var params = linkstate.DefaultConfig(0, "r0").Encoding

// meshWithPredicates converges a network on topo in which every router
// advertises the encoded predicate of a random workload predicate.
func meshWithPredicates(t *testing.T, topo sim.Topology, seed uint64) (*sim.Network, *workload.Generator) {
	t.Helper()
	nw, err := sim.New(topo, sim.Options{Seed: seed})
	require.NoError(t, err)
	cfg := workload.Default()
	cfg.Seed = int64(seed)
	// Sparser than the densest model, so that D is a proper subset.
	cfg.Names = 20
	cfg.FiltersPerPredicate = 5
	gen, err := workload.New(cfg)
	require.NoError(t, err)
	for _, id := range nw.Routers() {
		require.NoError(t, nw.SetPredicate(id, encoding.Advertise(params.EncodePredicate(gen.Predicate()))))
	}
	_, err = nw.RunUntilConverged(10 * time.Minute)
	require.NoError(t, err)
	require.Empty(t, nw.Errors())
	return nw, gen
}

// destinations is D for message m published at src (Carzaniga09 §2.2): the
// routers whose encoded predicate in src's PREDICATES table m matches. It
// also checks that table against what every router advertised.
func destinations(t *testing.T, nw *sim.Network, src uint32, m content.Message) *bitset.BitSet {
	t.Helper()
	table := encoding.NewTable(params)
	for id, filters := range nw.PredicateTable(src) {
		table.Set(id, filters)
	}
	table.Set(src, nw.Advertised(src))
	bm := params.EncodeMessage(m)
	dest := bitset.New(0)
	table.Snapshot().Match(bm, dest)

	want := bitset.New(0)
	for _, id := range nw.Routers() {
		if slices.ContainsFunc(nw.Advertised(id), func(b encoding.Bloom) bool { return b.SubsetOf(bm) }) {
			want.Set(uint(id))
		}
	}
	require.Equal(t, want.AppendTo(nil), dest.AppendTo(nil), "D at router %d: advertisements vs its PREDICATES table", src)
	return dest
}

// flow is what one message did in the mesh.
type flow struct {
	delivered map[uint32]int
	received  map[uint32]int
	links     map[[2]uint32]int
	dropped   [drp.NumDropReasons]int
	// lost counts destinations in bundles sent over a link that no longer
	// works: the broker's link drops them, not DRP.
	lost    int
	bundles int
	loops   int // bundles that reached a router their lineage had visited
}

type hop struct {
	at, from uint32
	b        drp.Bundle
	path     []uint32
}

// forward publishes a message with destination set dest at src and forwards
// it hop by hop, each router deciding with the table it holds now.
func forward(t *testing.T, nw *sim.Network, f *drp.Forwarder, src uint32, dest *bitset.BitSet) flow {
	t.Helper()
	fl := flow{delivered: map[uint32]int{}, received: map[uint32]int{}, links: map[[2]uint32]int{}}
	var queue []hop
	emit := func(from uint32, path []uint32, d drp.Decision) {
		for i, n := range d.Dropped {
			fl.dropped[i] += n
		}
		for _, fw := range d.Forwards {
			fl.bundles++
			fl.links[[2]uint32{from, fw.Next}]++
			if !nw.Working(from, fw.Next) {
				fl.lost += int(fw.Bundle.Dest.Count())
				continue
			}
			queue = append(queue, hop{at: fw.Next, from: from, b: fw.Bundle, path: path})
		}
	}
	emit(src, []uint32{src}, f.Ingress(nw.Routes(src), dest))
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		fl.received[h.at]++
		if slices.Contains(h.path, h.at) {
			fl.loops++
		}
		d := f.Transit(nw.Routes(h.at), h.from, h.b)
		if d.Deliver {
			fl.delivered[h.at]++
		}
		path := append(slices.Clip(h.path), h.at)
		emit(h.at, path, d)
		if d.Bounced != nil {
			// These routers do not hold what their routes send back
			// (brokers do, docs/design.md §10): it goes back at once.
			emit(h.at, path, f.Transit(nw.Routes(h.at), h.at, drp.Bundle{Source: h.b.Source, Dest: d.Bounced, HopsLeft: h.b.HopsLeft}))
		}
	}
	return fl
}

// routeLinks returns the links of the hop-by-hop route from src to dst
// through every router's own table.
func routeLinks(t *testing.T, nw *sim.Network, src, dst uint32) [][2]uint32 {
	var out [][2]uint32
	for at := src; at != dst; {
		next, ok := nw.Routes(at).NextHop(dst)
		require.True(t, ok, "router %d has no route to %d", at, dst)
		out = append(out, [2]uint32{at, next})
		require.LessOrEqual(t, len(out), len(nw.Routers()), "route %d→%d loops", src, dst)
		at = next
	}
	return out
}

func without(dest *bitset.BitSet, id uint32) map[uint32]int {
	out := map[uint32]int{}
	for _, d := range dest.AppendTo(nil) {
		if uint32(d) != id {
			out[uint32(d)] = 1
		}
	}
	return out
}

type meshCase struct {
	name string
	topo sim.Topology
	seed uint64
}

func meshCases() []meshCase {
	var cs []meshCase
	for i, n := range []int{10, 37, 80, 200} {
		seed := uint64(100 + i)
		topo := sim.RandomConnected(n, 3.5, seed)
		cs = append(cs,
			meshCase{fmt.Sprintf("n%d_unit", n), topo, seed},
			// Few distinct weights: equal-cost paths everywhere.
			meshCase{fmt.Sprintf("n%d_weights1-3", n), topo.RandomWeights(3, seed), seed})
	}
	return cs
}

// Carzaniga09 §2.2–2.3 over linkstate tables, converged and reconverging.
func TestDRPOverLinkState(t *testing.T) {
	partition, err := drp.NewForwarder(drp.Config{BroadcastFraction: 0, HopLimit: drp.DefaultConfig().HopLimit})
	require.NoError(t, err)
	broadcast, err := drp.NewForwarder(drp.Config{BroadcastFraction: 1e-9, HopLimit: drp.DefaultConfig().HopLimit})
	require.NoError(t, err)
	const staleLimit = 24
	stale, err := drp.NewForwarder(drp.Config{HopLimit: staleLimit})
	require.NoError(t, err)
	var steps, loops, hopDrops, messages, partitioned int
	for _, c := range meshCases() {
		t.Run(c.name, func(t *testing.T) {
			nw, gen := meshWithPredicates(t, c.topo, c.seed)
			ids := nw.Routers()

			// Carzaniga09 §2.2: DRP delivers to exactly the routers whose
			// advertised predicate the message matches, each once, over
			// the union of the routes to them, with no link carrying the
			// message twice (linkstate makes shortest paths unique, so
			// those routes form a tree).
			t.Run("partition", func(t *testing.T) {
				rng := rand.New(rand.NewPCG(c.seed, 1))
				for range 15 {
					src := ids[rng.IntN(len(ids))]
					dest := destinations(t, nw, src, gen.Message())
					fl := forward(t, nw, partition, src, dest)

					want := without(dest, src)
					messages++
					if len(want) >= 2 {
						partitioned++
					}
					assert.Equal(t, want, fl.delivered, "deliveries from %d", src)
					union := map[[2]uint32]int{}
					for d := range want {
						for _, l := range routeLinks(t, nw, src, d) {
							union[l] = 1
						}
					}
					assert.Equal(t, union, fl.links, "links from %d, with bundle counts", src)
					assert.Zero(t, fl.loops)
					assert.Equal(t, [drp.NumDropReasons]int{}, fl.dropped)
					for r, n := range fl.received {
						assert.Equal(t, 1, n, "router %d received a message from %d %d times", r, src, n)
					}
				}
			})

			// Carzaniga09 §2.3: a broadcast follows the source's shortest-path
			// tree, which every router's TreeChildren describes alike, and
			// only the destinations deliver. Each router strips itself from
			// the set and stops when it is empty, so a router receives the
			// message, once, exactly when some destination is off the tree
			// path from the source to its parent.
			t.Run("broadcast", func(t *testing.T) {
				rng := rand.New(rand.NewPCG(c.seed, 2))
				for range 5 {
					src := ids[rng.IntN(len(ids))]
					dest := destinations(t, nw, src, gen.Message())
					fl := forward(t, nw, broadcast, src, dest)
					assert.Equal(t, without(dest, src), fl.delivered)

					parent := map[uint32]uint32{}
					for _, p := range ids {
						for _, child := range nw.Routes(p).TreeChildren(src) {
							_, dup := parent[child]
							require.False(t, dup, "router %d has two parents in %d's tree", child, src)
							parent[child] = p
						}
					}
					require.Len(t, parent, len(ids)-1, "%d's tree spans the mesh", src)
					receivers, tree := map[uint32]int{}, map[[2]uint32]int{}
					for v, p := range parent {
						left := dest.Clone().Clear(uint(src))
						for a, ok := p, true; ok; a, ok = parent[a] {
							left.Clear(uint(a))
						}
						if left.Any() {
							receivers[v] = 1
							tree[[2]uint32{p, v}] = 1
						}
					}
					assert.Equal(t, receivers, fl.received, "routers reached, each once")
					assert.Equal(t, tree, fl.links, "links used")
					assert.Equal(t, [drp.NumDropReasons]int{}, fl.dropped)
				}
			})

			// Carzaniga09 §2.2 during reconvergence: a link on the routes of
			// the messages in flight is cut, and the messages are forwarded
			// again at every step of the reconvergence, each router with
			// the table it holds at that moment. Whatever mix of stale and
			// fresh tables they meet, every destination is accounted for
			// and nothing circulates forever. This cuts the mesh, so it
			// runs last.
			t.Run("reconvergence", func(t *testing.T) {
				rng := rand.New(rand.NewPCG(c.seed, 3))

				type message struct {
					src  uint32
					dest *bitset.BitSet
				}
				var msgs []message
				used := map[[2]uint32]bool{}
				for range 10 {
					src := ids[rng.IntN(len(ids))]
					dest := destinations(t, nw, src, gen.Message())
					msgs = append(msgs, message{src, dest})
					for d := range without(dest, src) {
						for _, l := range routeLinks(t, nw, src, d) {
							used[l] = true
						}
					}
				}
				if len(used) == 0 {
					t.Skip("no message leaves its ingress")
				}
				links := make([][2]uint32, 0, len(used))
				for l := range used {
					links = append(links, l)
				}
				slices.SortFunc(links, func(a, b [2]uint32) int {
					if a[0] != b[0] {
						return int(a[0]) - int(b[0])
					}
					return int(a[1]) - int(b[1])
				})
				cut := links[rng.IntN(len(links))]
				nw.Cut(cut[0], cut[1])

				for !nw.Converged() {
					for _, m := range msgs {
						fl := forward(t, nw, stale, m.src, m.dest)
						accountFor(t, fl, m.dest, m.src, staleLimit)
						loops += fl.loops
						hopDrops += fl.dropped[drp.DropHopLimit]
					}
					steps++
					nw.RunFor(sim.DefaultDelay / 2)
					require.Less(t, nw.Now(), 10*time.Minute, "no reconvergence")
				}
				// Converged again: everything reachable is delivered.
				for _, m := range msgs {
					fl := forward(t, nw, stale, m.src, m.dest)
					accountFor(t, fl, m.dest, m.src, staleLimit)
					assert.Zero(t, fl.loops)
					assert.Zero(t, fl.dropped[drp.DropHopLimit])
					assert.Zero(t, fl.lost)
				}
			})
		})
	}
	t.Logf("%d forwarding rounds during reconvergence: %d looping bundles, %d destinations dropped by the hop limit",
		steps, loops, hopDrops)
	assert.Positive(t, steps, "no message met a stale table")
	// Partitioning needs destination sets to partition (the smallest
	// meshes mostly get one destination or none).
	assert.Greater(t, 4*partitioned, messages, "%d of %d messages had two destinations", partitioned, messages)
}

// accountFor checks the invariant that holds whatever the tables say
// (Carzaniga09 §2.2): partitioning keeps destination sets disjoint, so every
// destination is delivered at most once and exactly one of delivered,
// dropped (and counted) or lost on a dead link; the hop limit bounds every
// lineage, so the message cannot circulate forever.
func accountFor(t *testing.T, fl flow, dest *bitset.BitSet, src uint32, limit int) {
	t.Helper()
	want := without(dest, src)
	for r, n := range fl.delivered {
		assert.Equal(t, 1, n, "router %d delivered %d times", r, n)
		assert.Contains(t, want, r, "router %d delivered but is not a destination", r)
	}
	total := len(fl.delivered) + fl.dropped[drp.DropNoRoute] + fl.dropped[drp.DropHopLimit] + fl.lost
	assert.Equal(t, len(want), total, "delivered %d + dropped %v + lost %d", len(fl.delivered), fl.dropped, fl.lost)
	assert.LessOrEqual(t, fl.bundles, len(want)*limit, "bundles")
}

// Carzaniga09 §2.2 during reconvergence on a ring: right after 0–1 is cut,
// 0 routes to 1 the long way round through 11, while 11, not yet told,
// still routes to 1 through 0. A message from 11 to 1 ping-pongs between
// them until its hop limit, and is counted as dropped.
func TestDRPLoopDuringReconvergence(t *testing.T) {
	const limit = 16
	f, err := drp.NewForwarder(drp.Config{HopLimit: limit})
	require.NoError(t, err)
	nw, err := sim.New(sim.Ring(12), sim.Options{Seed: 1})
	require.NoError(t, err)
	_, err = nw.RunUntilConverged(time.Minute)
	require.NoError(t, err)

	dest := bitset.New(12).Set(1).Set(6)
	fl := forward(t, nw, f, 11, dest)
	require.Equal(t, map[uint32]int{1: 1, 6: 1}, fl.delivered, "converged")

	nw.Cut(0, 1)
	fl = forward(t, nw, f, 11, dest)
	accountFor(t, fl, dest, 11, limit)
	assert.Equal(t, map[uint32]int{6: 1}, fl.delivered)
	assert.Equal(t, 1, fl.dropped[drp.DropHopLimit], "the looping destination")
	assert.Positive(t, fl.loops)
	assert.Equal(t, limit, fl.links[[2]uint32{11, 0}]+fl.links[[2]uint32{0, 11}], "links crossed in the loop")

	_, err = nw.RunUntilConverged(time.Minute)
	require.NoError(t, err)
	fl = forward(t, nw, f, 11, dest)
	assert.Equal(t, map[uint32]int{1: 1, 6: 1}, fl.delivered, "reconverged")
	assert.Zero(t, fl.loops)
}
