package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

// benchParams are SFF's Bloom parameters (docs/design.md §2): 256-bit filters.
var benchParams = encoding.Params{M: 256, K: 10}

func benchConfig(wan bool) func(id uint32) linkstate.Config {
	return func(id uint32) linkstate.Config {
		c := linkstate.DefaultConfig(id, fmt.Sprintf("r%d", id))
		if wan {
			c = linkstate.DefaultWANConfig(id, fmt.Sprintf("r%d", id))
		}
		c.Encoding = benchParams
		return c
	}
}

// paperMesh is the 42-router BRITE-like mesh with 100 filters of M=256
// bits advertised by every router, not yet run.
func paperMesh(b *testing.B, wan bool) *Network {
	nw, err := New(PaperTopology(1), Options{Seed: 1, Config: benchConfig(wan)})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for _, id := range nw.Routers() {
		if err := nw.SetPredicate(id, randomFilters(rng, 100, benchParams.M)); err != nil {
			b.Fatal(err)
		}
	}
	return nw
}

// BenchmarkConvergeBRITE42 measures a cold start of the 42-router mesh:
// virtual time and tick rounds until converged, and the control bytes it
// took (predicates of 100 × 256-bit filters included).
func BenchmarkConvergeBRITE42(b *testing.B) {
	for _, wan := range []bool{false, true} {
		name := "lan"
		if wan {
			name = "wan"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var virtual time.Duration
			var ticks, bytes, msgs int64
			for b.Loop() {
				nw := paperMesh(b, wan)
				d, err := nw.RunUntilConverged(time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				virtual, ticks = d, nw.Ticks()
				s := nw.TotalStats()
				bytes, msgs = s.Bytes, s.Messages
			}
			b.ReportMetric(float64(virtual.Milliseconds()), "virtual-ms")
			b.ReportMetric(float64(ticks), "ticks")
			b.ReportMetric(float64(bytes)/1e3, "control-kB")
			b.ReportMetric(float64(msgs), "control-msgs")
		})
	}
}

// BenchmarkSteadyStateControlTraffic measures the control bytes per link
// direction per second once converged, over three refresh intervals:
// hellos, plus each router re-flooding its LSA and 100-filter predicate
// every RefreshInterval. The goal is ≤ 1% of a 1 MBps link (10 kB/s).
func BenchmarkSteadyStateControlTraffic(b *testing.B) {
	for _, wan := range []bool{false, true} {
		name := "lan"
		if wan {
			name = "wan"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var maxRate, meanRate, helloRate float64
			for b.Loop() {
				nw := paperMesh(b, wan)
				if _, err := nw.RunUntilConverged(time.Minute); err != nil {
					b.Fatal(err)
				}
				nw.ResetStats()
				window := 3 * nw.Node(0).Config().RefreshInterval
				nw.RunFor(window)
				all := nw.AllStats()
				maxRate, meanRate, helloRate = 0, 0, 0
				for _, s := range all {
					r := float64(s.Bytes) / window.Seconds()
					maxRate = max(maxRate, r)
					meanRate += r / float64(len(all))
					helloRate += float64(s.ByKind[KindHello].Bytes) / window.Seconds() / float64(len(all))
				}
			}
			b.ReportMetric(maxRate, "max-B/s/link")
			b.ReportMetric(meanRate, "mean-B/s/link")
			b.ReportMetric(helloRate, "hello-B/s/link")
		})
	}
}

// BenchmarkSimulatedSecond is the cost of simulating one second of the
// converged 42-router mesh, so test budgets can be planned.
func BenchmarkSimulatedSecond(b *testing.B) {
	nw := paperMesh(b, false)
	if _, err := nw.RunUntilConverged(time.Minute); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		nw.RunFor(time.Second)
	}
}

// BenchmarkReconverge measures the virtual time from a failure in the
// converged 42-router mesh until it has converged again: a cut link (the
// stream closes at both ends), a crashed router, and a router cut off
// silently (only DeadInterval can tell).
func BenchmarkReconverge(b *testing.B) {
	topo := PaperTopology(1)
	hub := topo.Links[0] // the first link the generator made, near the core
	for _, tc := range []struct {
		name string
		fail func(nw *Network)
	}{
		{"cut", func(nw *Network) { nw.Cut(hub.A, hub.B) }},
		{"kill", func(nw *Network) { nw.Kill(hub.B) }},
		{"silent", func(nw *Network) { nw.Partition([]uint32{hub.B}) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var virtual time.Duration
			var bytes int64
			for b.Loop() {
				nw := paperMesh(b, false)
				if _, err := nw.RunUntilConverged(time.Minute); err != nil {
					b.Fatal(err)
				}
				nw.RunFor(1500 * time.Millisecond) // away from hello boundaries
				nw.ResetStats()
				tc.fail(nw)
				d, err := nw.RunUntilConverged(time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				virtual, bytes = d, nw.TotalStats().Bytes
			}
			b.ReportMetric(float64(virtual.Milliseconds()), "virtual-ms")
			b.ReportMetric(float64(bytes)/1e3, "control-kB")
		})
	}
}
