package encoding

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/workload"
	"github.com/stretchr/testify/require"
)

// benchName names a sub-benchmark by its Params: "cat-v2/M=2048/K=6".
func benchName(p Params) string { return fmt.Sprintf("%s/M=%d/K=%d", p.Scheme, p.M, p.K) }

// BenchmarkEncodeMessage encodes the messages of each workload (10
// attributes; 6 strings and 4 ints on the paper's, 2 and 8 on ranges).
func BenchmarkEncodeMessage(b *testing.B) {
	for _, w := range benchWorkloads {
		for _, p := range benchParams {
			b.Run(w.name+"/"+benchName(p), func(b *testing.B) {
				g, err := workload.New(w.cfg)
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
}

// BenchmarkEncodePredicate encodes one client's predicate of 20 filters,
// as a broker does when a subscription arrives; blooms/op is how many
// Blooms it encodes to.
func BenchmarkEncodePredicate(b *testing.B) {
	for _, w := range benchWorkloads {
		for _, p := range []Params{DefaultParamsV1(), DefaultParams()} {
			b.Run(w.name+"/"+benchName(p), func(b *testing.B) {
				g, err := workload.New(w.cfg)
				require.NoError(b, err)
				preds := g.Predicates(64)
				blooms := 0
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					blooms += len(p.EncodePredicate(preds[i%len(preds)]))
					i++
				}
				b.ReportMetric(float64(blooms)/float64(b.N), "blooms/op")
			})
		}
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
		for _, p := range []Params{DefaultParamsV1(), DefaultParams()} {
			for _, clients := range []int{10, 500} {
				b.Run(fmt.Sprintf("%s/%s/filters=%d", w.name, p.Scheme, clients*20), func(b *testing.B) {
					mesh := newPaperMesh(b, w.cfg, 1, clients, 0)
					filters := mesh.filters(p, 0)
					b.ReportAllocs()
					for b.Loop() {
						Advertise(filters)
					}
				})
			}
		}
	}
}

// BenchmarkSnapshot is the cost of rebuilding the index.
func BenchmarkSnapshot(b *testing.B) {
	for _, w := range benchWorkloads {
		for _, p := range []Params{DefaultParamsV1(), DefaultParams()} {
			for _, routers := range []int{100, 1000} {
				b.Run(fmt.Sprintf("%s/%s/routers=%d", w.name, p.Scheme, routers), func(b *testing.B) {
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
}

// BenchmarkWireForm encodes and decodes the filters of an advertisement
// of 200 filters in their scheme's wire form; ns/filter is per filter.
func BenchmarkWireForm(b *testing.B) {
	for _, p := range []Params{DefaultParamsV1(), DefaultParams()} {
		for _, clients := range []int{10, 50} {
			b.Run(fmt.Sprintf("%s/clients=%d", p.Scheme, clients), func(b *testing.B) {
				mesh := newPaperMesh(b, workload.SingleConstraint(), 1, clients, 0)
				filters := mesh.filters(p, 0)
				buf := make([]byte, 0, p.FiltersSize(filters))
				b.ReportAllocs()
				for b.Loop() {
					buf = p.AppendFilters(buf[:0], filters)
					if _, err := p.ParseFilters(buf); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(filters)), "ns/filter")
			})
		}
	}
}

// BenchmarkMessageEncoder is BenchmarkEncodeMessage through a
// MessageEncoder, as a broker's publish stream encodes (cat-v2 only; cat-v1
// has no fine categories to remember). stream is the perf harness's
// messages: a fixed symbol and class, a counter.
func BenchmarkMessageEncoder(b *testing.B) {
	p := DefaultParams()
	for _, w := range benchWorkloads {
		b.Run(w.name+"/"+benchName(p), func(b *testing.B) {
			g, err := workload.New(w.cfg)
			require.NoError(b, err)
			msgs := g.Messages(256)
			e := NewMessageEncoder(p)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e.Encode(msgs[i%len(msgs)])
				i++
			}
		})
	}
	stream := func(seq int) content.Message {
		return content.MessageFrom(map[string]content.Value{
			"symbol": content.String("DRIP"), "n": content.Int(int64(seq)), "class": content.Int(0),
		})
	}
	msgs := make([]content.Message, 4096)
	for i := range msgs {
		msgs[i] = stream(1_000_000 + i)
	}
	b.Run("stream/params", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			p.EncodeMessage(msgs[i%len(msgs)])
			i++
		}
	})
	b.Run("stream/encoder", func(b *testing.B) {
		e := NewMessageEncoder(p)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			e.Encode(msgs[i%len(msgs)])
			i++
		}
	})
}
