package churn

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/bench"
)

// observed builds what a run of scenario s would have seen: the fault 10 s
// into sending, the restart s.Down later, every broker agreeing again at
// the given delays, and a bench report with one gap and one failover.
func observed(t *testing.T, s Scenario, partsAgree, reconverged time.Duration) observation {
	t.Helper()
	p, err := NewPlan(1)
	require.NoError(t, err)
	victim := s.victim(p)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := observation{
		plan: p, scenario: s, addrNames: map[string]string{"127.0.0.1:1": "b0", "127.0.0.1:2": "b1"},
		processesStarted: t0.Add(-5 * time.Second), converged: t0.Add(-4 * time.Second),
		sendStart: t0, fault: t0.Add(10 * time.Second), exit: t0.Add(10*time.Second + 20*time.Millisecond),
		start: t0.Add(10*time.Second + s.Down),
	}
	// Rounds every 100 ms: all agree but between the fault and
	// partsAgree, when the survivors still count the victim, and between
	// the restart and reconverged, when it is still down.
	all, parts := p.Graph.Components(), p.Graph.Components(victim)
	for at := t0; at.Before(t0.Add(40 * time.Second)); at = at.Add(100 * time.Millisecond) {
		r := Round{At: at, Brokers: make([]Sample, Brokers)}
		groups := all
		switch {
		case !at.Before(o.fault) && at.Before(o.fault.Add(partsAgree)):
			groups = nil // digests differ: nobody agrees
		case !at.Before(o.fault) && at.Before(o.start.Add(reconverged)):
			groups = parts
		}
		for gi, g := range groups {
			for _, v := range g {
				r.Brokers[v] = Sample{Up: true, Routers: float64(len(g)), Digest: float64(gi + 1)}
			}
		}
		if groups == nil {
			for v := range r.Brokers {
				r.Brokers[v] = Sample{Up: v != victim, Routers: Brokers, Digest: float64(v)}
			}
		}
		o.rounds = append(o.rounds, r)
	}
	o.report = &bench.Report{
		Series: []bench.Second{{T: 9, Undelivered: 0}, {T: 10, Undelivered: 7}, {T: 11}},
		Totals: bench.Totals{Sent: 100, Ideal: 500, Delivered: 493, Undelivered: 7, Gaps: 1, MaxGapMs: 40, Failovers: 1, InFlightLost: 2},
		GapEvents: []bench.GapEvent{
			{StartS: 10.01, EndS: 10.05, From: Name(victim), To: "b0"},
		},
		FailoverEvents: []bench.FailoverEvent{{AtS: 10.2, From: "127.0.0.1:2", To: "127.0.0.1:1", InFlight: 2}},
	}
	o.counters = map[string]float64{`drip_duplicates_suppressed_total{verdict="duplicate"}`: 3}
	return o
}

func check(t *testing.T, r *Result, name string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, r.Checks)
	return Check{}
}

func TestAssemble(t *testing.T) {
	s := Scenarios()[0] // kill, restart after 10 s
	o := observed(t, s, 600*time.Millisecond, 300*time.Millisecond)
	r := assemble(o)
	assert.True(t, r.OK(), "%+v", r.Checks)
	assert.Equal(t, "SIGKILL", r.Scenario.Signal)
	assert.Equal(t, Name(o.plan.NonCut), r.Scenario.Victim)
	assert.InDelta(t, 1.0, r.Times.StartupConvergedS, 1e-9)
	require.NotNil(t, r.Times.FaultS)
	assert.InDelta(t, 10.0, *r.Times.FaultS, 1e-9)
	assert.InDelta(t, 20.0, *r.Times.RestartS, 1e-9)
	require.NotNil(t, r.Times.PartsAgreeAfterFaultS)
	assert.InDelta(t, 0.6, *r.Times.PartsAgreeAfterFaultS, 1e-9, "the first round at or after the fault plus 600 ms")
	require.NotNil(t, r.Times.ReconvergedAfterRestartS)
	assert.InDelta(t, 0.3, *r.Times.ReconvergedAfterRestartS, 1e-9)
	assert.Equal(t, []SecondCount{{T: 10, N: 7}}, r.UndeliveredBySecond)
	assert.Equal(t, uint64(7), r.UndeliveredBeforeRestart, "lost to the fault")
	assert.Zero(t, r.UndeliveredFromRestart)
	assert.True(t, check(t, r, "rejoin lost nothing").OK)
	require.Len(t, r.Gaps.Events, 1)
	g := r.Gaps.Events[0]
	assert.Equal(t, GapTiming{From: Name(o.plan.NonCut), To: "b0", StartAfterFaultS: 0.01, EndAfterFaultS: 0.05, EndAfterRestartS: -9.95, DurationMs: 40, Back: true}, g)
	require.Len(t, r.Failovers.Events, 1)
	assert.Equal(t, FailoverTiming{From: "b1", To: "b0", AfterFaultS: 0.2, InFlight: 2}, r.Failovers.Events[0], "addresses named")
	assert.Len(t, r.Mesh.Parts, 1, "the mesh stays connected without a non-cut vertex")
	sum := Summarize(r)
	assert.Equal(t, 3.0, sum.BrokerSuppressed)
	assert.True(t, sum.OK)

	// Written and read back.
	path := filepath.Join(t.TempDir(), "kill.json")
	require.NoError(t, r.WriteJSON(path))
	back, err := ReadResult(path)
	require.NoError(t, err)
	assert.Equal(t, r.Times, back.Times)
	assert.Equal(t, r.Gaps, back.Gaps)
}

func TestAssembleFailedChecks(t *testing.T) {
	s := Scenarios()[0]
	o := observed(t, s, 600*time.Millisecond, 300*time.Millisecond)
	o.report.Totals.Duplicates = 1
	// A subscriber whose gap lasted past its broker's restart plus 2 s,
	// and one that came back to it in time.
	o.report.GapEvents = append(o.report.GapEvents,
		bench.GapEvent{StartS: 10.01, EndS: 22.5, From: Name(o.plan.NonCut), To: "b3"},
		bench.GapEvent{StartS: 10.01, EndS: 21.5, From: Name(o.plan.NonCut), To: Name(o.plan.NonCut)})
	o.report.Totals.Gaps = 3
	r := assemble(o)
	assert.False(t, r.OK())
	assert.False(t, check(t, r, "no duplicate reached the bench").OK)
	back := check(t, r, "subscribers back")
	assert.False(t, back.OK)
	assert.Contains(t, back.Detail, "→b3")
	assert.NotContains(t, back.Detail, "→"+Name(o.plan.NonCut)+" ", "back at the restarted broker within 2 s")
	assert.Equal(t, []string{"no duplicate reached the bench", "subscribers back"}, Summarize(r).Failed)

	// A mesh that never agrees again.
	o = observed(t, s, 600*time.Millisecond, time.Hour)
	r = assemble(o)
	assert.Nil(t, r.Times.ReconvergedAfterRestartS)
	assert.False(t, check(t, r, "mesh reconverged after the restart").OK)
}

func TestAssembleGracefulStop(t *testing.T) {
	term := Scenarios()[1]
	require.Equal(t, syscall.SIGTERM, term.Signal)
	o := observed(t, term, 600*time.Millisecond, 300*time.Millisecond)
	r := assemble(o)
	c := check(t, r, "graceful departure lost nothing")
	assert.False(t, c.OK, "7 undelivered, 2 in flight and a gap are more than a drain allows")
	assert.Equal(t, "7 undelivered among the messages sent before the restart, 2 in flight to the leaving broker, 1 gaps", c.Detail)

	o.report.Totals = bench.Totals{Sent: 100, Ideal: 500, Delivered: 500}
	o.report.GapEvents, o.report.FailoverEvents, o.report.Series = nil, nil, nil
	r = assemble(o)
	assert.True(t, check(t, r, "graceful departure lost nothing").OK)
	assert.True(t, r.OK())

	// Loss in the restart's second is the rejoin's, not the departure's.
	o.report.Series = []bench.Second{{T: 14}, {T: 15, Undelivered: 2}}
	o.report.Totals.Undelivered, o.report.Totals.Delivered = 2, 498
	o.drops = map[string]map[string]float64{Name(o.plan.NonCut) + "/2": {`drip_route_dropped_destinations_total{reason="no_route"}`: 1}}
	r = assemble(o)
	require.NotNil(t, r.Times.RestartS)
	require.InDelta(t, 15.0, *r.Times.RestartS, 1e-9)
	assert.True(t, check(t, r, "graceful departure lost nothing").OK)
	rejoin := check(t, r, "rejoin lost nothing")
	assert.False(t, rejoin.OK)
	assert.Equal(t, "2 undelivered among the messages sent from the restart's second on; the restarted "+Name(o.plan.NonCut)+" dropped 1 destinations for want of a route", rejoin.Detail)
}

func TestAssembleCutVertex(t *testing.T) {
	cut := Scenarios()[2]
	o := observed(t, cut, 600*time.Millisecond, 300*time.Millisecond)
	o.report.Series = append(o.report.Series, bench.Second{T: 20, Undelivered: 50})
	r := assemble(o)
	for _, c := range r.Checks {
		assert.NotEqual(t, "rejoin lost nothing", c.Name, "the partition lasts into the restart's second")
	}
	assert.Equal(t, uint64(50), r.UndeliveredFromRestart)
	assert.Greater(t, len(r.Mesh.Parts), 1, "the cut vertex partitions the mesh")
	require.NotNil(t, r.Times.PartsAgreeAfterFaultS, "each part agrees on its own")
	assert.InDelta(t, 0.6, *r.Times.PartsAgreeAfterFaultS, 1e-9)
}

// A run that failed before sending has no fault times and says why.
func TestAssembleFailedRun(t *testing.T) {
	p, err := NewPlan(1)
	require.NoError(t, err)
	r := assemble(observation{plan: p, scenario: Scenarios()[0], err: assert.AnError})
	assert.Equal(t, assert.AnError.Error(), r.Error)
	assert.Nil(t, r.Times.FaultS)
	assert.False(t, r.OK())
	require.Len(t, r.Checks, 1)
	assert.False(t, r.Checks[0].OK)
}
