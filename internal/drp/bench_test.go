package drp_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bits-and-blooms/bitset"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/drp"
)

// benchNet is a 1000-router random network of average degree ≈ 4, the
// scale docs/design.md §2 sizes the matcher for.
func benchNet(b *testing.B) *fakeNet {
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 1000
	net := newFakeNet(randomGraph(rng, n, n, false))
	net.tree(0) // routing is precomputed by link state, not per message
	return net
}

// benchDest draws k destinations, the same for every run of a benchmark.
func benchDest(n, k int, exclude uint32) *bitset.BitSet {
	rng := rand.New(rand.NewPCG(uint64(k), 11))
	d := bitset.New(uint(n))
	for _, id := range rng.Perm(n) {
		if d.Count() == uint(k) {
			break
		}
		if uint32(id) != exclude {
			d.Set(uint(id))
		}
	}
	return d
}

var sink drp.Decision

// Carzaniga09 §2.2: the per-message cost of partitioning at the ingress.
func BenchmarkIngress(b *testing.B) {
	net := benchNet(b)
	for _, k := range []int{5, 50, 500} {
		b.Run(fmt.Sprintf("D=%d", k), func(b *testing.B) {
			f, err := drp.NewForwarder(drp.Config{BroadcastFraction: 0, HopLimit: 64})
			require.NoError(b, err)
			dest := benchDest(1000, k, 0)
			r := net.at(0)
			b.ReportAllocs()
			for b.Loop() {
				sink = f.Ingress(r, dest)
			}
		})
	}
}

// Carzaniga09 §2.2: the per-bundle cost at a transit router.
func BenchmarkTransit(b *testing.B) {
	net := benchNet(b)
	from := uint32(net.g.adj[0][0].to)
	for _, k := range []int{5, 50, 500} {
		b.Run(fmt.Sprintf("D=%d", k), func(b *testing.B) {
			f, err := drp.NewForwarder(drp.Config{BroadcastFraction: 0, HopLimit: 64})
			require.NoError(b, err)
			bundle := drp.Bundle{Source: from, Dest: benchDest(1000, k, from).Set(0), HopsLeft: 64}
			r := net.at(0)
			b.ReportAllocs()
			for b.Loop() {
				sink = f.Transit(r, from, bundle)
			}
		})
	}
}

// Carzaniga09 §2.3: above the threshold (500 of 999 > 0.5) the ingress
// broadcasts and a transit router only copies the set to its children.
func BenchmarkBroadcast(b *testing.B) {
	net := benchNet(b)
	f, err := drp.NewForwarder(drp.DefaultConfig())
	require.NoError(b, err)
	dest := benchDest(1000, 500, 0)
	b.Run("ingress/D=500", func(b *testing.B) {
		r := net.at(0)
		require.True(b, f.Ingress(r, dest).Forwards[0].Bundle.Broadcast)
		b.ReportAllocs()
		for b.Loop() {
			sink = f.Ingress(r, dest)
		}
	})
	b.Run("transit/D=500", func(b *testing.B) {
		// Router 0 as an inner node of another source's tree.
		var source uint32
		for s := range uint32(1000) {
			if len(net.at(0).TreeChildren(s)) > 1 {
				source = s
				break
			}
		}
		bundle := drp.Bundle{Source: source, Dest: dest, HopsLeft: 64, Broadcast: true}
		r := net.at(0)
		b.ReportAllocs()
		for b.Loop() {
			sink = f.Transit(r, 1, bundle)
		}
	})
}
