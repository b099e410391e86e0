package experiment

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/topology"
	"github.com/dripmesh/drip/internal/workload"
)

// Scenario is one experiment of Carzaniga09 §5.1.4: a network, an assignment
// of predicates to clients, a set of messages, and a sending rate. Rates
// are the paper's, per client; Config.Scale shrinks them to the machine.
type Scenario struct {
	Name        string
	Description string
	// Topology names the sites and links; links carry the bandwidth the
	// lab emulates and utilisation is computed against.
	Topology     *topology.Topology
	WorkloadName string
	Workload     workload.Config
	// Clients each install one predicate and publish (Carzaniga09 §5.2.1:
	// "each client starts publishing"); they are spread round-robin over
	// the sites.
	Clients int
	Mode    bench.Mode
	// RateStart and RateEnd are messages/s per client at the start and the
	// end of sending (equal for a constant rate).
	RateStart, RateEnd float64
	Duration           time.Duration // sending time
	Warmup             time.Duration // pause after routing has settled
	Drain              time.Duration // longest wait for deliveries after sending
}

// Group is a series of scenarios run and plotted together (Carzaniga09 Figs.
// 4–5: the same workload on 1, 2, 4 and 8 brokers).
type Group struct {
	Name        string
	Description string
	Scenarios   []string
}

// linkBandwidth is the seed's link capacity: "8 sites connected through
// 1MBps links" (Carzaniga09 §5.2.1).
const linkBandwidth = 1e6

// Scenarios returns every named scenario.
func Scenarios() []Scenario {
	single := workload.Default()
	// Carzaniga09 §5.2.1: four one-constraint subscriptions per client and "a
	// small number of attribute names so as to obtain a high replication
	// factor": every message carries all 10 names, and strings come from 5
	// terms, which makes a message reach about 27 of 50 clients as in the
	// paper (measured in TestSingleBrokerReplication).
	single.FiltersPerPredicate, single.MaxConstraints, single.Terms = 4, 1, 5
	out := []Scenario{{
		Name: "single-broker",
		Description: "Carzaniga09 §5.2.1 / Fig. 3: one broker, 50 clients with 4 one-constraint subscriptions each " +
			"(replication ≈27), ramp from 1 to 100 msg/s per client",
		Topology:     Topology(1),
		WorkloadName: "default: 4 one-constraint filters, 10 names, 5 terms",
		Workload:     single,
		Clients:      50,
		Mode:         bench.Ramp, RateStart: 1, RateEnd: 100,
		Duration: 60 * time.Second, Warmup: time.Second, Drain: 15 * time.Second,
	}}
	for _, n := range []int{1, 2, 4, 8} {
		out = append(out, Scenario{
			Name: "brokers-" + strconv.Itoa(n),
			Description: fmt.Sprintf("Carzaniga09 §5.2.1 / Figs. 4–5: %d broker(s), 80 clients with 20 one-constraint "+
				"subscriptions each (≈5%% client replication), 1 MBps links, ramp from 1 to 100 msg/s per client", n),
			Topology:     Topology(n),
			WorkloadName: "single (workload.SingleConstraint)",
			Workload:     workload.SingleConstraint(),
			Clients:      80,
			Mode:         bench.Ramp, RateStart: 1, RateEnd: 100,
			Duration: 60 * time.Second, Warmup: time.Second, Drain: 15 * time.Second,
		})
	}
	smoke := workload.SingleConstraint()
	smoke.Names = 40 // 12 clients of 20 filters: replication ≈4
	out = append(out, Scenario{
		Name:         "smoke",
		Description:  "CI smoke: 3 sites in a line, 12 clients, 3 s at a constant low rate",
		Topology:     lineTopology(3),
		WorkloadName: "single, 40 names",
		Workload:     smoke,
		Clients:      12,
		Mode:         bench.Poisson, RateStart: 20, RateEnd: 20,
		Duration: 3 * time.Second, Warmup: 200 * time.Millisecond, Drain: 10 * time.Second,
	})
	_, scale := ScaleSweeps()
	return append(out, scale...)
}

// Groups returns the named series of scenarios.
func Groups() []Group {
	out := []Group{{
		Name:        "scaling",
		Description: "Carzaniga09 Figs. 4–5: the 80-client workload on 1, 2, 4 and 8 brokers",
		Scenarios:   []string{"brokers-1", "brokers-2", "brokers-4", "brokers-8"},
	}}
	sweeps, scale := ScaleSweeps()
	all := Group{Name: "scale", Description: "Carzaniga09 §5.2.2 / Fig. 7: the four sweeps at 42 brokers"}
	for _, sc := range scale {
		all.Scenarios = append(all.Scenarios, sc.Name)
	}
	for _, sw := range sweeps {
		out = append(out, Group{Name: sw.Name, Scenarios: sw.Scenarios,
			Description: "Carzaniga09 §5.2.2 / Fig. 7: 42 brokers, varying " + sw.Parameter})
	}
	return append(out, all)
}

// Lookup resolves a scenario or group name to its scenarios.
func Lookup(name string) ([]Scenario, error) {
	all := Scenarios()
	find := func(n string) (Scenario, bool) {
		for _, s := range all {
			if s.Name == n {
				return s, true
			}
		}
		return Scenario{}, false
	}
	if s, ok := find(name); ok {
		return []Scenario{s}, nil
	}
	for _, g := range Groups() {
		if g.Name == name {
			var out []Scenario
			for _, n := range g.Scenarios {
				s, _ := find(n)
				out = append(out, s)
			}
			return out, nil
		}
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	for _, g := range Groups() {
		names = append(names, g.Name)
	}
	return nil, fmt.Errorf("unknown scenario %q: want one of %s", name, strings.Join(names, ", "))
}

// Topology returns the n-broker network of Carzaniga09 §5.2.1: one site, two
// linked, the 4-site square with one diagonal, or an 8-site graph of
// diameter 3 standing in for the paper's BRITE topology; every link 1 MBps.
func Topology(n int) *topology.Topology {
	var edges [][2]int
	switch n {
	case 1:
	case 2:
		edges = [][2]int{{0, 1}}
	case 4:
		edges = [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 0}, {0, 2}}
	case 8:
		// Degrees 2–4 as a BRITE router-level graph of this size has;
		// diameter 3 as the paper's (checked in TestTopologies).
		edges = [][2]int{{0, 1}, {0, 2}, {1, 3}, {2, 3}, {2, 4}, {3, 5}, {4, 6}, {5, 7}, {6, 7}, {1, 5}, {4, 5}}
	default:
		panic(fmt.Sprintf("experiment: no %d-broker topology", n))
	}
	return build(n, edges)
}

func lineTopology(n int) *topology.Topology {
	var edges [][2]int
	for i := 1; i < n; i++ {
		edges = append(edges, [2]int{i - 1, i})
	}
	return build(n, edges)
}

func build(n int, edges [][2]int) *topology.Topology {
	t := &topology.Topology{Mesh: "experiment"}
	for i := range n {
		id := uint32(i)
		t.Brokers = append(t.Brokers, topology.Broker{Name: "s" + strconv.Itoa(i), ID: &id})
	}
	for _, e := range edges {
		t.Links = append(t.Links, topology.Link{A: t.Brokers[e[0]].Name, B: t.Brokers[e[1]].Name, Weight: 1, Bandwidth: linkBandwidth})
	}
	return t
}
