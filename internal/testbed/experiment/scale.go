package experiment

import (
	"github.com/dripmesh/drip/internal/sim"
	"github.com/dripmesh/drip/internal/topology"
)

// The scalability study of Carzaniga09 §5.2.2 (Fig. 7): 42 brokers on a
// BRITE topology of diameter eleven, 420 clients (10 per broker) at 5%
// client replication, and four sweeps away from that base: clients per
// broker, filters per client, constraints per filter and link capacity,
// each under the Poisson ramp of Figs. 4–5.

// ScaleSeed picks the 42-site topology among sim.PaperTopology's draws;
// the committed picture and results are of this one.
const ScaleSeed = 1

// ScaleTopology is the 42-site network of the scale scenarios: a BRITE-like
// router-level graph of diameter 11 (sim.PaperTopology(ScaleSeed)) whose
// sites are s0…s41 and whose links all have bandwidth bw.
func ScaleTopology(bw topology.Rate) *topology.Topology {
	g := sim.PaperTopology(ScaleSeed)
	edges := make([][2]int, len(g.Links))
	for i, l := range g.Links {
		edges[i] = [2]int{int(l.A), int(l.B)}
	}
	t := build(len(g.Routers), edges)
	for i := range t.Links {
		t.Links[i].Bandwidth = bw
	}
	return t
}
