package experiment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dripmesh/drip/internal/testbed/lab"
	"github.com/dripmesh/drip/internal/testbed/systems"
	"github.com/dripmesh/drip/internal/topology"
)

// LabConfig runs the systems in an emulated wide-area network
// (internal/testbed/lab) instead of on loopback: each scenario gets a lab of its
// topology, every site a network namespace, every link the scenario's
// bandwidth (scaled) and the delay below, and the lab's own per-link byte
// counters measure utilisation for every system alike.
type LabConfig struct {
	// Name of the lab (default "experiment"); a lab of that name that runs
	// already is an error, one left by a crash is removed.
	Name string
	// Delay is every link's one-way delay.
	Delay time.Duration
	// BandwidthScale multiplies the scenario's link bandwidth (the seed's
	// 1 MB/s); 0 means the rate scale, so that load and capacity shrink
	// together and the busiest link saturates at the same point of the
	// ramp as at the paper's rates.
	BandwidthScale float64
	// QueueTime sizes the link queues (default lab.DefaultQueueTime).
	QueueTime time.Duration
	// Seed drives the links' loss and jitter.
	Seed uint64
	// Executable, Args and Env start the lab daemon (lab.UpOptions); by
	// default this executable's `lab daemon`. Tests point them at the test
	// binary.
	Executable string
	Args       []string
	Env        []string
}

// LabReport is what the emulator saw during one system's run: the cost of
// the emulation itself, so a reader can tell whether the lab, not the
// system, was the bottleneck.
type LabReport struct {
	Name string `json:"name"`
	// DaemonCPU is the CPU time the lab daemon used during the run, and
	// DaemonCPUShare that time over the run's wall time (1 = a full core).
	DaemonCPU      float64 `json:"daemon_cpu_s"`
	DaemonCPUShare float64 `json:"daemon_cpu_share"`
	// Packets crossed links (one count per link crossed), and the drops
	// by reason: queue overflow (the link was saturated) and random loss.
	Packets      uint64 `json:"link_packets"`
	DroppedQueue uint64 `json:"dropped_queue"`
	DroppedLoss  uint64 `json:"dropped_loss"`
}

// labTopology is t with every link's bandwidth scaled and its delay set.
func labTopology(t *topology.Topology, bandwidthScale float64, delay time.Duration) *topology.Topology {
	c := *t
	c.Links = append([]topology.Link(nil), t.Links...)
	for i := range c.Links {
		c.Links[i].Bandwidth = topology.Rate(float64(c.Links[i].Bandwidth) * bandwidthScale)
		c.Links[i].Delay = topology.Duration(delay)
	}
	return &c
}

// upLab starts the lab for cfg.Scenario (whose topology already carries
// the lab's links) and returns it placed as cfg needs it.
func upLab(ctx context.Context, cfg Config) (*lab.Lab, error) {
	lc := cfg.Lab
	name := lc.Name
	if name == "" {
		name = "experiment"
	}
	l, err := lab.Up(ctx, lab.UpOptions{
		Name: name, Topology: cfg.Scenario.Topology, Seed: lc.Seed, QueueTime: lc.QueueTime,
		Executable: lc.Executable, Args: lc.Args, Env: lc.Env,
	})
	if err != nil {
		return nil, fmt.Errorf("experiment: lab for %s: %w", cfg.Scenario.Name, err)
	}
	return l, nil
}

func labPlacementName(l *lab.Lab, t *topology.Topology, delay time.Duration) string {
	bw := 0.0
	if len(t.Links) > 0 {
		bw = float64(t.Links[0].Bandwidth)
	}
	return fmt.Sprintf("lab %s: %d site(s) in network namespaces, links %.0f B/s with %v one-way delay (userspace emulator over TUN)",
		l.Name(), len(t.Brokers), bw, delay)
}

// LabPlacement runs a site's processes and connections in its namespace
// (systems.Placement over a lab).
type LabPlacement struct{ *lab.Lab }

// Host implements systems.Placement; an unknown site has no address, and
// listening or dialling there then fails with the lab's error.
func (p LabPlacement) Host(site string) string {
	s, err := p.Site(site)
	if err != nil {
		return ""
	}
	return s.Addr.String()
}

// labLinks reads the bytes each emulated link direction serialised: what
// the wire carried, headers and acknowledgements included, whichever
// system ran.
type labLinks struct{ l *lab.Lab }

func (c labLinks) LinkBytes(ctx context.Context) (map[systems.Direction]uint64, error) {
	st, err := c.l.Status(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[systems.Direction]uint64, len(st.Links))
	for _, ls := range st.Links {
		out[systems.Direction{From: ls.From, To: ls.To}] = ls.Sent
	}
	return out, nil
}

// labMeter measures a LabReport between start and stop, from the lab's
// status: its counters and the daemon's own CPU time and clock.
type labMeter struct {
	l      *lab.Lab
	before *lab.Status // nil when the lab could not be read at the start
}

func startLabMeter(ctx context.Context, l *lab.Lab) *labMeter {
	st, _ := l.Status(ctx)
	return &labMeter{l: l, before: st}
}

func (m *labMeter) stop(ctx context.Context) (*LabReport, error) {
	if m.before == nil {
		return nil, errors.New("lab daemon not measured")
	}
	st, err := m.l.Status(ctx)
	if err != nil {
		return nil, err
	}
	before, after := sumLinks(m.before), sumLinks(st)
	cpu, wall := st.CPU-m.before.CPU, st.Uptime-m.before.Uptime
	r := &LabReport{
		Name:         m.l.Name(),
		DaemonCPU:    cpu.Seconds(),
		Packets:      after.Packets - before.Packets,
		DroppedQueue: after.Queue - before.Queue,
		DroppedLoss:  after.Loss - before.Loss,
	}
	if wall > 0 {
		r.DaemonCPUShare = cpu.Seconds() / wall.Seconds()
	}
	return r, nil
}

func sumLinks(st *lab.Status) lab.LinkCounters {
	var c lab.LinkCounters
	for _, ls := range st.Links {
		c.Packets += ls.Packets
		c.Queue += ls.Queue
		c.Loss += ls.Loss
	}
	return c
}
