package encoding

import (
	"fmt"
	"testing"

	"github.com/bits-and-blooms/bitset"
	"github.com/dripmesh/drip/internal/workload"
)

// paperSnapshot builds a PREDICATES table of routers × filtersPerRouter
// paper-workload filters (5 predicates of 20 filters per router).
func paperSnapshot(b testing.TB, cfg workload.Config, p Params, routers, filtersPerRouter int) (*Snapshot, []Bloom) {
	clients := filtersPerRouter / cfg.FiltersPerPredicate
	mesh := newPaperMesh(b, cfg, routers, clients, 1000)
	t := NewTable(p)
	for r := range routers {
		t.Set(uint32(r), mesh.filters(p, r))
	}
	msgs := make([]Bloom, len(mesh.messages))
	for i, m := range mesh.messages {
		msgs[i] = p.EncodeMessage(m)
	}
	return t.Snapshot(), msgs
}

var benchWorkloads = []struct {
	name string
	cfg  workload.Config
}{{"default", workload.Default()}, {"single", workload.SingleConstraint()}, {"ranges", workload.Ranges()}}

func BenchmarkMatch(b *testing.B) {
	for _, w := range benchWorkloads {
		for _, routers := range []int{100, 1000} {
			for _, p := range benchParams {
				s, msgs := paperSnapshot(b, w.cfg, p, routers, 100)
				for _, impl := range []struct {
					name  string
					match func(Bloom, *bitset.BitSet)
				}{{"indexed", s.Match}, {"linear", s.MatchLinear}} {
					name := fmt.Sprintf("%s/routers=%d/%s/%s", w.name, routers, benchName(p), impl.name)
					b.Run(name, func(b *testing.B) {
						dst := bitset.New(uint(s.MaxID()) + 1)
						b.ReportAllocs()
						i := 0
						for b.Loop() {
							dst.ClearAll()
							impl.match(msgs[i%len(msgs)], dst)
							i++
						}
					})
				}
			}
		}
	}
}
