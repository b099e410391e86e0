package experiment

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// TestbedCost is what one run cost the machine, split between the testbed
// and the system measured: the runner process (the clients, the oracle
// that matches every message against every predicate, the per-second
// counts and the link sampler), the lab's link emulator (LabReport), and
// the rest of the machine, which on an otherwise idle machine is the
// system's brokers. Shares are of one core (2 = both cores
// of a 2-core machine) over the whole run: connecting, settling, sending
// and draining.
type TestbedCost struct {
	Seconds float64 `json:"wall_s"`
	CPUs    int     `json:"cpus"`
	// RunnerCPU is this process's user and system time, and RunnerShare
	// that over the wall time.
	RunnerCPU   float64 `json:"runner_cpu_s"`
	RunnerShare float64 `json:"runner_cpu_share"`
	// MachineShare is the whole machine's busy time (/proc/stat: all but
	// idle and iowait) over the wall time.
	MachineShare float64 `json:"machine_cpu_share"`
	// SystemShare is MachineShare less the runner's and the lab daemon's
	// shares: the brokers', and anything else the machine ran.
	SystemShare float64 `json:"system_cpu_share"`
	// BrokerCPU is the CPU time of the system's processes (brokers that
	// run as child processes: drip --lab, ActiveMQ, NATS), over their
	// whole life from start to stop, BrokerWall that life and BrokerShare
	// the one over the other; zero for brokers inside this process.
	BrokerCPU   float64 `json:"brokers_cpu_s,omitempty"`
	BrokerWall  float64 `json:"brokers_wall_s,omitempty"`
	BrokerShare float64 `json:"brokers_cpu_share,omitempty"`
	// Sending is the machine's and the runner's share from the start of
	// sending to the end of the drain, the part of the run the plots show
	// (connecting and settling cost less), when it was reached.
	Sending *CPUSplit `json:"sending,omitempty"`
}

// CPUSplit is the machine's, the runner's and the rest's share of one
// core over an interval.
type CPUSplit struct {
	Seconds      float64 `json:"wall_s"`
	RunnerShare  float64 `json:"runner_cpu_share"`
	MachineShare float64 `json:"machine_cpu_share"`
}

// cpuSample is a reading of the clocks a TestbedCost is computed from.
type cpuSample struct {
	wall   time.Time
	self   time.Duration // this process's user + system time
	busy   uint64        // machine busy jiffies, all CPUs
	total  uint64        // machine jiffies, all CPUs
	hasSys bool          // busy and total were read
}

// sampleCPU reads the clocks; a machine without /proc/stat yields only the
// process's own time.
func sampleCPU() cpuSample {
	s := cpuSample{wall: time.Now()}
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		if busy, total, err := parseProcStat(b); err == nil {
			s.busy, s.total, s.hasSys = busy, total, true
		}
	}
	return s
}

// parseProcStat returns the busy and total jiffies of the aggregate "cpu"
// line of /proc/stat. Busy is everything but idle and iowait; guest time
// is already counted in user and nice, so it is left out of the total.
func parseProcStat(b []byte) (busy, total uint64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 5 {
			return 0, 0, fmt.Errorf("/proc/stat: cpu line has %d fields, want at least 4 counters", len(f)-1)
		}
		for i, s := range f[1:min(len(f), 9)] { // user nice system idle iowait irq softirq steal
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("/proc/stat: cpu counter %d: %w", i+1, err)
			}
			total += v
			if i != 3 && i != 4 {
				busy += v
			}
		}
		return busy, total, nil
	}
	return 0, 0, fmt.Errorf("/proc/stat: no aggregate cpu line")
}

// split is the CPU use between two samples, on a machine of cpus cores.
func split(a, b cpuSample, cpus int) CPUSplit {
	wall := b.wall.Sub(a.wall).Seconds()
	s := CPUSplit{Seconds: wall}
	if wall <= 0 {
		return s
	}
	s.RunnerShare = (b.self - a.self).Seconds() / wall
	if a.hasSys && b.hasSys && b.total > a.total {
		s.MachineShare = float64(cpus) * float64(b.busy-a.busy) / float64(b.total-a.total)
	}
	return s
}

// costMeter measures a TestbedCost from start to stop, and the sending
// seconds in between when told where they begin.
type costMeter struct {
	start, sendStart cpuSample
	sending          bool
}

func startCost() *costMeter { return &costMeter{start: sampleCPU()} }

func (m *costMeter) sendStarted() { m.sendStart, m.sending = sampleCPU(), true }

// stop ends the measurement; lab, when the run was in a lab, gives the
// emulator's share to subtract.
func (m *costMeter) stop(lab *LabReport) *TestbedCost {
	end := sampleCPU()
	cpus := runtime.NumCPU()
	all := split(m.start, end, cpus)
	c := &TestbedCost{Seconds: all.Seconds, CPUs: cpus, RunnerCPU: (end.self - m.start.self).Seconds(),
		RunnerShare: all.RunnerShare, MachineShare: all.MachineShare}
	c.SystemShare = c.MachineShare - c.RunnerShare
	if lab != nil {
		c.SystemShare -= lab.DaemonCPUShare
	}
	c.SystemShare = max(c.SystemShare, 0)
	if m.sending {
		s := split(m.sendStart, end, cpus)
		c.Sending = &s
	}
	return c
}

// childCPU is the CPU time of this process's children that have exited
// and been waited for.
func childCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_CHILDREN, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// brokerMeter measures the CPU of the processes a system starts: the
// children's CPU time that accrues between its start and its stop, which
// waits for them.
type brokerMeter struct {
	wall time.Time
	cpu  time.Duration
}

func startBrokers() brokerMeter { return brokerMeter{wall: time.Now(), cpu: childCPU()} }

// stop records the system's processes' CPU in c.
func (m brokerMeter) stop(c *TestbedCost) {
	if c == nil {
		return
	}
	cpu, wall := (childCPU() - m.cpu).Seconds(), time.Since(m.wall).Seconds()
	if cpu <= 0 || wall <= 0 {
		return
	}
	c.BrokerCPU, c.BrokerWall, c.BrokerShare = cpu, wall, cpu/wall
}
