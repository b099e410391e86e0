package lab

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/dripmesh/drip/internal/sim"
	"github.com/dripmesh/drip/internal/topology"
)

// Ports every generated broker listens on, at its own site address.
const (
	ClientPort  = 7000
	PeerPort    = 7100
	MetricsPort = 9100
)

// Shapes Generate knows.
const (
	ShapeLine   = "line"   // n sites in a row
	ShapeSquare = "square" // 4 sites: a square plus one diagonal (Carzaniga09 §5.2.1)
	ShapeEight  = "eight"  // 8 sites, BRITE-like, diameter 3 (Carzaniga09 §5.2.1)
	ShapeBRITE  = "brite"  // n sites, BRITE-like, optional target diameter (Carzaniga09 §5.2.2: 42, diameter 11)
)

// Shapes lists the shapes in the order help text shows them.
var Shapes = []string{ShapeLine, ShapeSquare, ShapeEight, ShapeBRITE}

// GenOptions describe a topology to generate.
type GenOptions struct {
	Shape string
	// N is the number of sites for line and brite.
	N int
	// Diameter is brite's target hop diameter; 0 for none.
	Diameter int
	// Degree is brite's target average degree (2 ≈ a tree; 0 for the
	// generator's default, about 2.2).
	Degree float64
	// Seed picks the random shapes (eight, brite).
	Seed uint64
	// Link properties of every link.
	Bandwidth topology.Rate
	Delay     time.Duration
	Jitter    time.Duration
	Loss      topology.Probability
	// GeoDelay gives brite links the generator's distance-based delays
	// (0.5 ms + 5 µs/km over a 4000 km plane) instead of Delay.
	GeoDelay bool
	// Prefix numbers the sites (default DefaultPrefix).
	Prefix netip.Prefix
	// Mesh names the mesh (default "lab").
	Mesh string
}

// Generate returns a topology of the requested shape whose brokers b0, b1,
// … listen at their lab addresses (client :7000, peer :7100, metrics
// :9100). The graphs come from internal/sim's generators.
func Generate(o GenOptions) (*topology.Topology, error) {
	if !o.Prefix.IsValid() {
		o.Prefix = DefaultPrefix
	}
	if o.Mesh == "" {
		o.Mesh = "lab"
	}
	var g sim.Topology
	switch o.Shape {
	case ShapeLine:
		if o.N < 1 {
			return nil, fmt.Errorf("shape line: want at least 1 site, not %d", o.N)
		}
		g = sim.Line(o.N)
	case ShapeSquare:
		if o.N != 0 && o.N != 4 {
			return nil, fmt.Errorf("shape square has 4 sites, not %d", o.N)
		}
		g = sim.Ring(4)
		g.Links = append(g.Links, sim.Link{A: 0, B: 2, Weight: 1, Delay: sim.DefaultDelay})
	case ShapeEight:
		if o.N != 0 && o.N != 8 {
			return nil, fmt.Errorf("shape eight has 8 sites, not %d", o.N)
		}
		b := sim.DefaultBRITE(8)
		b.Diameter = 3
		g = sim.BRITELike(b, o.Seed)
	case ShapeBRITE:
		if o.N < 2 {
			return nil, fmt.Errorf("shape brite: want at least 2 sites, not %d", o.N)
		}
		b := sim.DefaultBRITE(o.N)
		b.Diameter = o.Diameter
		if o.Degree > 0 {
			// A router joins with one link, or two with probability
			// Extra, so the average degree is about 2(1+Extra).
			b.Extra = min(max(o.Degree/2-1, 0), 1)
		}
		g = sim.BRITELike(b, o.Seed)
	default:
		return nil, fmt.Errorf("unknown shape %q: want one of %v", o.Shape, Shapes)
	}
	t := &topology.Topology{Mesh: o.Mesh}
	for i, id := range g.Routers {
		a, err := PlanAddr(o.Prefix, i)
		if err != nil {
			return nil, err
		}
		t.Brokers = append(t.Brokers, topology.Broker{
			Name:    "b" + strconv.Itoa(int(id)),
			ID:      &id,
			Client:  netip.AddrPortFrom(a, ClientPort).String(),
			Peer:    netip.AddrPortFrom(a, PeerPort).String(),
			Metrics: netip.AddrPortFrom(a, MetricsPort).String(),
		})
	}
	for _, l := range g.Links {
		delay := o.Delay
		if o.GeoDelay && o.Shape == ShapeBRITE {
			delay = l.Delay
		}
		t.Links = append(t.Links, topology.Link{
			A: "b" + strconv.Itoa(int(l.A)), B: "b" + strconv.Itoa(int(l.B)), Weight: l.Weight,
			Bandwidth: o.Bandwidth, Delay: topology.Duration(delay), Jitter: topology.Duration(o.Jitter), Loss: o.Loss,
		})
	}
	// Round-trip through the parser so the result is exactly what a file
	// written from it loads as.
	text, err := t.Marshal()
	if err != nil {
		return nil, err
	}
	return topology.Parse(text)
}
