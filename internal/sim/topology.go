package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// DefaultDelay is the one-way delay generators give links without a
// geometry: a metro-area hop.
const DefaultDelay = time.Millisecond

// Link is an undirected link with a configured weight (its cost in
// linkstate.CostWeight mode) and a one-way delay in each direction.
type Link struct {
	A, B   uint32
	Weight uint32
	Delay  time.Duration
}

// Topology is a set of routers and the links between them.
type Topology struct {
	Routers []uint32
	Links   []Link
}

// Validate reports duplicate routers, links to unknown routers, self
// links, duplicate links and zero weights.
func (t Topology) Validate() error {
	ids := map[uint32]bool{}
	for _, id := range t.Routers {
		if ids[id] {
			return fmt.Errorf("sim: router %d listed twice", id)
		}
		ids[id] = true
	}
	seen := map[[2]uint32]bool{}
	for i, l := range t.Links {
		switch {
		case !ids[l.A] || !ids[l.B]:
			return fmt.Errorf("sim: link %d (%d–%d) names an unknown router", i, l.A, l.B)
		case l.A == l.B:
			return fmt.Errorf("sim: link %d links router %d to itself", i, l.A)
		case l.Weight == 0:
			return fmt.Errorf("sim: link %d (%d–%d) has weight 0", i, l.A, l.B)
		case l.Delay < 0:
			return fmt.Errorf("sim: link %d (%d–%d) has negative delay %v", i, l.A, l.B, l.Delay)
		case seen[[2]uint32{l.A, l.B}]:
			return fmt.Errorf("sim: link %d duplicates %d–%d", i, l.A, l.B)
		}
		seen[[2]uint32{l.A, l.B}], seen[[2]uint32{l.B, l.A}] = true, true
	}
	return nil
}

func routers(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

func plain(a, b int) Link {
	return Link{A: uint32(a), B: uint32(b), Weight: 1, Delay: DefaultDelay}
}

// Line links routers 0–1–…–(n−1).
func Line(n int) Topology {
	t := Topology{Routers: routers(n)}
	for i := 1; i < n; i++ {
		t.Links = append(t.Links, plain(i-1, i))
	}
	return t
}

// Ring is a Line closed into a cycle (n ≥ 3).
func Ring(n int) Topology {
	t := Line(n)
	if n >= 3 {
		t.Links = append(t.Links, plain(n-1, 0))
	}
	return t
}

// Grid is a w×h mesh; router y*w+x links to its right and lower neighbours.
func Grid(w, h int) Topology {
	t := Topology{Routers: routers(w * h)}
	for y := range h {
		for x := range w {
			i := y*w + x
			if x+1 < w {
				t.Links = append(t.Links, plain(i, i+1))
			}
			if y+1 < h {
				t.Links = append(t.Links, plain(i, i+w))
			}
		}
	}
	return t
}

// RandomConnected is a random connected graph of n routers with average
// degree about avgDegree (at least that of a tree): a random spanning tree
// plus uniformly random extra links.
func RandomConnected(n int, avgDegree float64, seed uint64) Topology {
	rng := rand.New(rand.NewPCG(seed, 0x70b0))
	t := Topology{Routers: routers(n)}
	have := map[[2]int]bool{}
	add := func(a, b int) bool {
		if a == b || have[[2]int{a, b}] {
			return false
		}
		have[[2]int{a, b}], have[[2]int{b, a}] = true, true
		t.Links = append(t.Links, plain(a, b))
		return true
	}
	perm := rng.Perm(n)
	for i := 1; i < n; i++ {
		add(perm[i], perm[rng.IntN(i)])
	}
	want := int(math.Round(avgDegree * float64(n) / 2))
	for tries := 0; len(t.Links) < want && tries < 100*n; tries++ {
		add(rng.IntN(n), rng.IntN(n))
	}
	return t
}

// RandomWeights returns t with every weight drawn uniformly from [1, max].
// A small max makes equal-cost paths common, which tests tie-breaking.
func (t Topology) RandomWeights(max uint32, seed uint64) Topology {
	rng := rand.New(rand.NewPCG(seed, 0x3e1))
	out := Topology{Routers: slices.Clone(t.Routers), Links: slices.Clone(t.Links)}
	for i := range out.Links {
		out.Links[i].Weight = 1 + rng.Uint32N(max)
	}
	return out
}

// BRITEOptions shape a BRITE-like topology.
type BRITEOptions struct {
	// Routers is the target size.
	Routers int
	// Extra is the probability that a new router attaches with two links
	// instead of one; it sets how far from a tree the mesh is.
	Extra float64
	// Locality is the distance scale, as a fraction of the plane's side,
	// over which attachment preference decays. Small values make routers
	// attach near where they are placed, which stretches the diameter the
	// way BRITE's geographic placement does.
	Locality float64
	// Side is the side of the square plane in kilometres; link delays are
	// distances at 5 µs/km (light in fibre) plus 0.5 ms of equipment.
	Side float64
	// Diameter, when positive, is a target hop diameter: the generator
	// draws topologies from seeds derived from its seed until one has this
	// diameter (at most 1000 draws; then the closest one).
	Diameter int
}

// DefaultBRITE is mostly a tree of local attachments with a few cross
// links (about 1.1 links per router) over a 4000 km plane, with no
// diameter target.
func DefaultBRITE(routers int) BRITEOptions {
	return BRITEOptions{Routers: routers, Extra: 0.1, Locality: 0.05, Side: 4000}
}

// PaperTopology is a stand-in for the 42-broker BRITE topology of Carzaniga09
// §5.2.2 (docs/design.md §7: diameter ≈ 11): DefaultBRITE(42) with a diameter of
// exactly 11 hops.
func PaperTopology(seed uint64) Topology {
	o := DefaultBRITE(42)
	o.Diameter = 11
	return BRITELike(o, seed)
}

// BRITELike generates a topology the way BRITE's router-level
// Barabási–Albert model with geographic placement does: routers are
// placed uniformly on a plane and join one at a time, each linking to one
// (or, with probability Extra, two) earlier routers chosen with
// probability proportional to degree × exp(−distance / Locality). Delays
// follow distance; weights are 1.
func BRITELike(o BRITEOptions, seed uint64) Topology {
	if o.Diameter <= 0 {
		return brite(o, seed)
	}
	var best Topology
	bestGap := math.MaxInt
	for i := range uint64(1000) {
		t := brite(o, seed+i*0x9e3779b97f4a7c15)
		gap := t.Diameter() - o.Diameter
		if gap < 0 {
			gap = -gap
		}
		if gap < bestGap {
			best, bestGap = t, gap
		}
		if gap == 0 {
			break
		}
	}
	return best
}

func brite(o BRITEOptions, seed uint64) Topology {
	rng := rand.New(rand.NewPCG(seed, 0xb417e))
	n := o.Routers
	t := Topology{Routers: routers(n)}
	x, y := make([]float64, n), make([]float64, n)
	for i := range n {
		x[i], y[i] = rng.Float64(), rng.Float64()
	}
	deg := make([]int, n)
	have := map[[2]int]bool{}
	weights := make([]float64, n)
	for i := 1; i < n; i++ {
		m := 1
		if i >= 2 && rng.Float64() < o.Extra {
			m = 2
		}
		for range m {
			total := 0.0
			for j := range i {
				w := 0.0
				if !have[[2]int{i, j}] {
					d := math.Hypot(x[i]-x[j], y[i]-y[j])
					w = float64(deg[j]+1) * math.Exp(-d/o.Locality)
				}
				weights[j] = w
				total += w
			}
			if total == 0 {
				break
			}
			r := rng.Float64() * total
			j := 0
			for ; j < i-1 && r >= weights[j]; j++ {
				r -= weights[j]
			}
			have[[2]int{i, j}], have[[2]int{j, i}] = true, true
			deg[i]++
			deg[j]++
			km := math.Hypot(x[i]-x[j], y[i]-y[j]) * o.Side
			delay := 500*time.Microsecond + time.Duration(km*5)*time.Microsecond
			t.Links = append(t.Links, Link{A: uint32(j), B: uint32(i), Weight: 1, Delay: delay})
		}
	}
	return t
}

// Diameter returns the largest hop count between two routers, or −1 when
// the topology is not connected.
func (t Topology) Diameter() int {
	adj := map[uint32][]uint32{}
	for _, l := range t.Links {
		adj[l.A] = append(adj[l.A], l.B)
		adj[l.B] = append(adj[l.B], l.A)
	}
	diam := 0
	for _, s := range t.Routers {
		dist := map[uint32]int{s: 0}
		queue := []uint32{s}
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for _, v := range adj[u] {
				if _, ok := dist[v]; !ok {
					dist[v] = dist[u] + 1
					diam = max(diam, dist[v])
					queue = append(queue, v)
				}
			}
		}
		if len(dist) != len(t.Routers) {
			return -1
		}
	}
	return diam
}
