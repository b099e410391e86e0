package encoding

import (
	"testing"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/workload"
	"github.com/stretchr/testify/require"
)

// paperMesh is the workload of Carzaniga09 §5.1.4 spread over brokers: clients
// are assigned round-robin (the seed's uniform distribution of clients over
// the network), each with one predicate of FiltersPerPredicate filters.
type paperMesh struct {
	cfg      workload.Config
	brokers  [][]content.Predicate // brokers[b] = predicates of b's clients
	messages []content.Message
}

func newPaperMesh(t testing.TB, cfg workload.Config, brokers, clientsPerBroker, messages int) paperMesh {
	t.Helper()
	g, err := workload.New(cfg)
	require.NoError(t, err)
	mesh := paperMesh{cfg: cfg, brokers: make([][]content.Predicate, brokers)}
	for c, p := range g.Predicates(brokers * clientsPerBroker) {
		mesh.brokers[c%brokers] = append(mesh.brokers[c%brokers], p)
	}
	mesh.messages = g.Messages(messages)
	return mesh
}

// filters returns broker b's filters encoded with p, in client order.
func (mesh paperMesh) filters(p Params, b int) []Bloom {
	var out []Bloom
	for _, pred := range mesh.brokers[b] {
		out = append(out, p.EncodePredicate(pred)...)
	}
	return out
}

// exact reports whether some client of broker b matches m.
func (mesh paperMesh) exact(b int, m content.Message) bool {
	for _, p := range mesh.brokers[b] {
		if p.Matches(m) {
			return true
		}
	}
	return false
}
