package experiment

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dripmesh/drip/internal/lab"
	"github.com/dripmesh/drip/internal/systems"
	"github.com/dripmesh/drip/internal/topology"
)

// LabConfig runs the systems in an emulated wide-area network
// (internal/lab) instead of on loopback: each scenario gets a lab of its
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

// labPlacement runs a site's processes and connections in its namespace.
type labPlacement struct{ *lab.Lab }

// Host implements systems.Placement; an unknown site has no address, and
// listening or dialling there then fails with the lab's error.
func (p labPlacement) Host(site string) string {
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

// labMeter measures a LabReport between start and stop.
type labMeter struct {
	l       *lab.Lab
	t0      time.Time
	cpu0    time.Duration
	before  lab.LinkCounters
	pid     int
	started bool
}

func startLabMeter(ctx context.Context, l *lab.Lab) *labMeter {
	m := &labMeter{l: l, t0: time.Now()}
	st, err := l.Status(ctx)
	if err != nil {
		return m
	}
	m.pid, m.before = st.PID, sumLinks(st)
	m.cpu0, err = processCPU(m.pid)
	m.started = err == nil
	return m
}

func (m *labMeter) stop(ctx context.Context) (*LabReport, error) {
	if !m.started {
		return nil, errors.New("lab daemon not measured")
	}
	st, err := m.l.Status(ctx)
	if err != nil {
		return nil, err
	}
	cpu, err := processCPU(m.pid)
	if err != nil {
		return nil, err
	}
	after := sumLinks(st)
	wall := time.Since(m.t0)
	return &LabReport{
		Name:           m.l.Name(),
		DaemonCPU:      (cpu - m.cpu0).Seconds(),
		DaemonCPUShare: (cpu - m.cpu0).Seconds() / wall.Seconds(),
		Packets:        after.Packets - m.before.Packets,
		DroppedQueue:   after.Queue - m.before.Queue,
		DroppedLoss:    after.Loss - m.before.Loss,
	}, nil
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

// processCPU is the user plus system CPU time of process pid, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is parenthesised and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so fields 14 and 15 are f[11] and f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields, want at least 15", pid, len(f)+2)
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
