package experiment

import (
	"fmt"
	"strconv"
	"time"

	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/sim"
	"github.com/dripmesh/drip/internal/topology"
	"github.com/dripmesh/drip/internal/workload"
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

// ScaleParams is one point of the study's parameter space, at the paper's
// scale.
type ScaleParams struct {
	ClientsPerBroker int
	Filters          int // per client
	// Constraints is the most a filter has: each filter draws 1 to
	// Constraints uniformly, so that the sweep raises the average number
	// of constraints, as the paper words it, and lowers the replication
	// factor to about 1/Constraints of the base's instead of emptying it
	// (a filter of two or more constraints over the 200 names seldom
	// matches: a fixed count of 2 left 0.06 subscribers per message).
	Constraints int
	Bandwidth   topology.Rate // every link
}

// scaleBase is the study's starting point: "420 clients, with an average
// of 10 clients per broker" with the 20 one-constraint filters of §5.2.1
// over 1 MB/s links.
var scaleBase = ScaleParams{ClientsPerBroker: 10, Filters: 20, Constraints: 1, Bandwidth: linkBandwidth}

// scaleSites is the paper's network size (Carzaniga09 §5.2.2: 42 brokers).
const scaleSites = 42

// Sweep is one panel of Fig. 7: the base with one parameter varied. Its
// scenarios are in Values' order, the base among them.
type Sweep struct {
	Name      string // the group's name: scale-clients, …
	Parameter string // the varied parameter, for plot legends
	Unit      string
	Values    []float64
	Scenarios []string
}

// Label is the legend of the sweep's i-th line.
func (s Sweep) Label(i int) string {
	return strconv.FormatFloat(s.Values[i], 'f', -1, 64) + " " + s.Unit
}

// scaleSweep describes a sweep: how a value changes the base.
type scaleSweep struct {
	name, parameter, unit string
	values                []float64
	apply                 func(*ScaleParams, float64)
}

// scaleSweeps are the four dimensions of Carzaniga09 §5.2.2. The paper
// names the dimensions and two end points (50 clients per broker, links of
// 100 kB/s), not the other values; these bracket the base.
var scaleSweeps = []scaleSweep{
	{"scale-clients", "clients per broker", "clients/broker", []float64{10, 20, 50},
		func(p *ScaleParams, v float64) { p.ClientsPerBroker = int(v) }},
	{"scale-filters", "filters per client", "filters/client", []float64{10, 20, 40},
		func(p *ScaleParams, v float64) { p.Filters = int(v) }},
	// Values are the mean constraints per filter, 1 to p.Constraints
	// drawn uniformly (Carzaniga09: "the (average) number of constraints
	// per filter, thereby lowering the replication factor").
	{"scale-constraints", "constraints per filter (mean)", "constraints/filter", []float64{1, 1.5, 2},
		func(p *ScaleParams, v float64) { p.Constraints = int(2*v) - 1 }},
	{"scale-links", "link capacity", "kB/s", []float64{1000, 500, 250, 100},
		func(p *ScaleParams, v float64) { p.Bandwidth = topology.Rate(v * 1000) }},
}

// scaleName names the scenario of p: the base is scale-base, the others
// are named after the one parameter they change (ScaleSweeps varies one
// at a time).
func scaleName(p ScaleParams) string {
	switch {
	case p == scaleBase:
		return "scale-base"
	case p.ClientsPerBroker != scaleBase.ClientsPerBroker:
		return "scale-clients-" + strconv.Itoa(p.ClientsPerBroker)
	case p.Filters != scaleBase.Filters:
		return "scale-filters-" + strconv.Itoa(p.Filters)
	case p.Constraints != scaleBase.Constraints:
		return "scale-constraints-" + strconv.Itoa(p.Constraints)
	default:
		return "scale-links-" + strconv.Itoa(int(p.Bandwidth/1000))
	}
}

// Scale rates. Fig. 7's x axis is the total input rate, and every line of
// a panel should share it: the per-client ramp (1 → 100 msg/s in Figs.
// 4–5) is divided by the clients-per-broker factor, so that 420 or 2100
// clients publish 420 → 42,000 msg/s between them at the paper's scale
// and an added client adds subscribers, not load.
const (
	scaleRateStart = 1
	scaleRateEnd   = 100
)

// scaleScenario is the scenario of p.
func scaleScenario(p ScaleParams) Scenario {
	w := workload.SingleConstraint()
	w.FiltersPerPredicate, w.MinConstraints, w.MaxConstraints = p.Filters, 1, p.Constraints
	clients := p.ClientsPerBroker * scaleSites
	perClient := float64(scaleBase.ClientsPerBroker) / float64(p.ClientsPerBroker)
	return Scenario{
		Name: scaleName(p),
		Description: fmt.Sprintf("Carzaniga09 §5.2.2 / Fig. 7: 42 brokers (BRITE-like, diameter 11), %d clients (%d per broker) "+
			"with %d filters of %s each, %.0f kB/s links, ramp from %g to %g msg/s in total",
			clients, p.ClientsPerBroker, p.Filters, constraintsPhrase(p.Constraints), float64(p.Bandwidth)/1000,
			scaleRateStart*perClient*float64(clients), scaleRateEnd*perClient*float64(clients)),
		Topology: ScaleTopology(p.Bandwidth),
		WorkloadName: fmt.Sprintf("single (workload.SingleConstraint), %d filters of %s",
			p.Filters, constraintsPhrase(p.Constraints)),
		Workload: w,
		Clients:  clients,
		Mode:     bench.Ramp, RateStart: scaleRateStart * perClient, RateEnd: scaleRateEnd * perClient,
		Duration: 60 * time.Second, Warmup: 2 * time.Second, Drain: 20 * time.Second,
	}
}

// constraintsPhrase says how many constraints a filter of a scale scenario
// has: one, or 1 to most drawn uniformly.
func constraintsPhrase(most int) string {
	if most == 1 {
		return "1 constraint"
	}
	return fmt.Sprintf("1–%d constraints (mean %g)", most, float64(1+most)/2)
}

// ScaleSweeps returns the four sweeps of Fig. 7 and the scenarios they
// name, each once (the base belongs to every sweep).
func ScaleSweeps() ([]Sweep, []Scenario) {
	var sweeps []Sweep
	var scenarios []Scenario
	seen := map[string]bool{}
	for _, sw := range scaleSweeps {
		s := Sweep{Name: sw.name, Parameter: sw.parameter, Unit: sw.unit, Values: sw.values}
		for _, v := range sw.values {
			p := scaleBase
			sw.apply(&p, v)
			sc := scaleScenario(p)
			s.Scenarios = append(s.Scenarios, sc.Name)
			if !seen[sc.Name] {
				seen[sc.Name] = true
				scenarios = append(scenarios, sc)
			}
		}
		sweeps = append(sweeps, s)
	}
	return sweeps, scenarios
}

// SweepOf returns the sweep named name, if it is one.
func SweepOf(name string) (Sweep, bool) {
	sweeps, _ := ScaleSweeps()
	for _, s := range sweeps {
		if s.Name == name {
			return s, true
		}
	}
	return Sweep{}, false
}
