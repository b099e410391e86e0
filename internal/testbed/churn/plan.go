package churn

import (
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"

	"github.com/dripmesh/drip/internal/sim"
	"github.com/dripmesh/drip/internal/topology"
)

// The mesh of the issue the measurement answers: 12 brokers, 18 links,
// clients on 8 brokers.
const (
	Brokers       = 12
	Links         = 18
	ClientBrokers = 8
)

// maxAttempts bounds the search for a graph with a cut vertex: with 18
// links on 12 vertices most random connected graphs have one, so a seed
// needs a few attempts at most.
const maxAttempts = 1000

// Plan is the mesh of a run and the roles its brokers play, drawn from a
// seed: the same seed gives the same plan.
type Plan struct {
	Seed  uint64
	Graph Graph
	// CutVertices are the graph's articulation points; Cut is the one
	// killed by the partition scenario (the one whose removal splits the
	// mesh most evenly) and NonCut the broker of the other scenarios (a
	// broker that is no cut vertex, of the highest degree: the one most
	// routes go through).
	CutVertices []int
	Cut, NonCut int
	// Clients are the brokers the bench's clients use, in the bench's
	// order (a client fails over to the next): both victims and six
	// others.
	Clients []int
}

// Name is broker v's name.
func Name(v int) string { return "b" + strconv.Itoa(v) }

// NewPlan draws a connected graph of Brokers vertices and Links edges
// with at least one cut vertex and one vertex that is none (random
// spanning tree plus random links, sim.RandomConnected), trying
// derived seeds in turn until one fits, and assigns the roles.
func NewPlan(seed uint64) (Plan, error) {
	for k := range uint64(maxAttempts) {
		t := sim.RandomConnected(Brokers, 2*float64(Links)/Brokers, seed*maxAttempts+k)
		g := Graph{N: Brokers}
		for _, l := range t.Links {
			g.Edges = append(g.Edges, [2]int{int(l.A), int(l.B)})
		}
		if len(g.Edges) != Links || !g.Connected() {
			continue
		}
		cuts := g.ArticulationPoints()
		if len(cuts) == 0 || len(cuts) == Brokers {
			continue
		}
		return assign(seed, g, cuts), nil
	}
	return Plan{}, fmt.Errorf("churn: no connected graph of %d brokers and %d links with a cut vertex in %d attempts from seed %d", Brokers, Links, maxAttempts, seed)
}

// assign picks the victims and the client brokers of g.
func assign(seed uint64, g Graph, cuts []int) Plan {
	p := Plan{Seed: seed, Graph: g, CutVertices: cuts, Cut: -1, NonCut: -1}
	bestSplit := -1
	for _, c := range cuts {
		// The size of the smaller side: the partition that cuts most
		// publisher–subscriber pairs apart.
		comps := g.Components(c)
		sizes := make([]int, len(comps))
		for i, cc := range comps {
			sizes[i] = len(cc)
		}
		slices.Sort(sizes)
		if split := sizes[len(sizes)-2]; split > bestSplit {
			p.Cut, bestSplit = c, split
		}
	}
	for v := range g.N {
		if slices.Contains(cuts, v) {
			continue
		}
		if p.NonCut < 0 || g.Degree(v) > g.Degree(p.NonCut) {
			p.NonCut = v
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0xc11e))
	var others []int
	for _, v := range rng.Perm(g.N) {
		if v != p.Cut && v != p.NonCut {
			others = append(others, v)
		}
	}
	p.Clients = append([]int{p.Cut, p.NonCut}, others[:ClientBrokers-2]...)
	rng.Shuffle(len(p.Clients), func(i, j int) { p.Clients[i], p.Clients[j] = p.Clients[j], p.Clients[i] })
	return p
}

// Addrs are one broker's loopback addresses.
type Addrs struct{ Client, Peer, Metrics string }

// Topology renders the plan as a drip topology file (internal/topology)
// with each broker's addresses.
func (p Plan) Topology(addrs []Addrs) (*topology.Topology, error) {
	if len(addrs) != p.Graph.N {
		return nil, fmt.Errorf("churn: %d address sets for %d brokers", len(addrs), p.Graph.N)
	}
	t := &topology.Topology{Mesh: "churn"}
	for v := range p.Graph.N {
		id := uint32(v)
		t.Brokers = append(t.Brokers, topology.Broker{Name: Name(v), ID: &id, Client: addrs[v].Client, Peer: addrs[v].Peer, Metrics: addrs[v].Metrics})
	}
	for _, e := range p.Graph.Edges {
		t.Links = append(t.Links, topology.Link{A: Name(e[0]), B: Name(e[1]), Weight: 1})
	}
	// Round-trip through the parser: what is written is what drip reads.
	b, err := t.Marshal()
	if err != nil {
		return nil, err
	}
	return topology.Parse(b)
}

// FreeAddrs finds n sets of free loopback ports. They are free when found;
// a process of another user could take one before a broker binds it, and
// the broker then fails to start with an error saying which address.
func FreeAddrs(n int) ([]Addrs, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	port := func() (string, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("churn: finding a free loopback port: %w", err)
		}
		ls = append(ls, l)
		return l.Addr().String(), nil
	}
	out := make([]Addrs, n)
	for i := range out {
		for _, a := range []*string{&out[i].Client, &out[i].Peer, &out[i].Metrics} {
			var err error
			if *a, err = port(); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
