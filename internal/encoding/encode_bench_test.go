package encoding

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dripmesh/drip/internal/workload"
	"github.com/stretchr/testify/require"
)

func BenchmarkEncodeMessage(b *testing.B) {
	for _, p := range benchParams {
		b.Run(fmt.Sprintf("M=%d/K=%d", p.M, p.K), func(b *testing.B) {
			g, err := workload.New(workload.Default())
			require.NoError(b, err)
			msgs := g.Messages(256)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p.EncodeMessage(msgs[i%len(msgs)])
				i++
			}
		})
	}
}

func BenchmarkEncodeFilter(b *testing.B) {
	p := DefaultParamsV1()
	g, err := workload.New(workload.Default())
	require.NoError(b, err)
	fs := g.Predicate()
	b.ReportAllocs()
	i := 0
	var dst []Bloom
	for b.Loop() {
		dst = p.AppendFilter(dst[:0], fs[i%len(fs)])
		i++
	}
}

// BenchmarkSubsetOf tests 4096 sparse filters against one message Bloom
// of DefaultParams' density; ns/op is per test.
func BenchmarkSubsetOf(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	filters := make([]Bloom, 4096)
	for i := range filters {
		filters[i] = randomBloom(r, 512, 6)
	}
	m := randomBloom(r, 512, 120)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for _, f := range filters {
			if f.SubsetOf(m) {
				n++
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(filters)), "ns/test")
}

// BenchmarkAdvertise reduces a broker's filters: the paper's 10 clients ×
// 20 filters, and 500 clients (10k filters) for scale.
func BenchmarkAdvertise(b *testing.B) {
	for _, w := range benchWorkloads {
		for _, clients := range []int{10, 500} {
			b.Run(fmt.Sprintf("%s/filters=%d", w.name, clients*20), func(b *testing.B) {
				mesh := newPaperMesh(b, w.cfg, 1, clients, 0)
				filters := mesh.filters(DefaultParams(), 0)
				b.ReportAllocs()
				for b.Loop() {
					Advertise(filters)
				}
			})
		}
	}
}

// BenchmarkSnapshot is the cost of rebuilding the index.
func BenchmarkSnapshot(b *testing.B) {
	for _, w := range benchWorkloads {
		for _, routers := range []int{100, 1000} {
			b.Run(fmt.Sprintf("%s/routers=%d", w.name, routers), func(b *testing.B) {
				p := DefaultParams()
				mesh := newPaperMesh(b, w.cfg, routers, 5, 0)
				tab := NewTable(p)
				for r := range routers {
					tab.Set(uint32(r), mesh.filters(p, r))
				}
				b.ReportAllocs()
				for b.Loop() {
					tab.Snapshot()
				}
			})
		}
	}
}

// BenchmarkWireForm encodes and decodes one Bloom of DefaultParams, as a
// broker does for every filter of an advertisement.
func BenchmarkWireForm(b *testing.B) {
	p := DefaultParams()
	bloom := randomBloom(rand.New(rand.NewPCG(2, 2)), p.M, 30)
	buf := make([]byte, 0, p.Bytes())
	b.ReportAllocs()
	for b.Loop() {
		buf = bloom.AppendBinary(buf[:0], p)
		if _, err := BloomFromBytes(buf, p); err != nil {
			b.Fatal(err)
		}
	}
}
