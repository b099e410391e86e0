package churn

import (
	"fmt"
	"strings"
	"syscall"
	"time"
)

// Role is which broker of a Plan a scenario's fault hits.
type Role string

// The victims: a broker that is no cut vertex (the mesh stays connected
// without it) and a cut vertex (it partitions).
const (
	NonCutVertex Role = "non-cut-vertex"
	CutVertex    Role = "cut-vertex"
)

// Scenario is one fault: a signal to one broker's process at a fixed time
// after sending starts, and the same broker started again Down after the
// signal (or when it has exited, if later), on the same addresses.
type Scenario struct {
	Name        string
	Description string
	Victim      Role
	Signal      syscall.Signal
	Down        time.Duration
}

// Scenarios are the three faults of the measurement, in the order "all"
// runs them.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "kill", Description: "kill -9 of a broker that is no cut vertex, restart 10 s later", Victim: NonCutVertex, Signal: syscall.SIGKILL, Down: 10 * time.Second},
		{Name: "term", Description: "SIGTERM (graceful drain) of the same broker, restart 5 s later", Victim: NonCutVertex, Signal: syscall.SIGTERM, Down: 5 * time.Second},
		{Name: "kill-cut", Description: "kill -9 of a cut vertex (the mesh partitions), restart 10 s later", Victim: CutVertex, Signal: syscall.SIGKILL, Down: 10 * time.Second},
	}
}

// Names lists the scenario names and "all".
func Names() []string {
	var out []string
	for _, s := range Scenarios() {
		out = append(out, s.Name)
	}
	return append(out, "all")
}

// Lookup returns the scenario of that name, or all three for "all".
func Lookup(name string) ([]Scenario, error) {
	if name == "all" {
		return Scenarios(), nil
	}
	for _, s := range Scenarios() {
		if s.Name == name {
			return []Scenario{s}, nil
		}
	}
	return nil, fmt.Errorf("unknown scenario %q: want one of %s", name, strings.Join(Names(), ", "))
}

// victim is the broker of p the scenario hits.
func (s Scenario) victim(p Plan) int {
	if s.Victim == CutVertex {
		return p.Cut
	}
	return p.NonCut
}

// signalName is how a report names the signal.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	default:
		return sig.String()
	}
}
