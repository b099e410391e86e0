package linkstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/encoding"
)

func advertised(rd Ready, peer uint32) (uint32, bool) {
	lsas := only[*LSA](to(rd, peer))
	if len(lsas) == 0 {
		return 0, false
	}
	for _, l := range lsas[len(lsas)-1].Links {
		if l.Neighbor == peer {
			return l.Cost, true
		}
	}
	return 0, false
}

func TestPeriodicCostCheck(t *testing.T) {
	// Kim10 §2.1, §3: the proactive best path compares paths only once per
	// period. With CostInterval a measured cost that moves past the
	// threshold waits for the next check, and is advertised there.
	a := newNode(t, 1, rttMode, func(c *Config) { c.CostInterval = 10 * time.Second })
	require.NoError(t, a.LinkUp(2, 7, 0))
	a.Tick(0)
	drain(a)
	rd := sample(t, a, 2, 100*ms, 20*ms)
	cost, ok := advertised(rd, 2)
	require.True(t, ok, "the first sample replaces the LinkUp weight at once")
	assert.Equal(t, uint32(20000), cost)

	var changedAt time.Duration
	for now := 200 * ms; now < 30*time.Second && changedAt == 0; now += 100 * ms {
		rd := sample(t, a, 2, now, 200*ms)
		if _, ok := advertised(rd, 2); ok {
			t.Fatalf("cost advertised at a sample (%v), not at the periodic check", now)
		}
		a.Tick(now)
		if c, ok := advertised(drain(a), 2); ok {
			changedAt = now
			assert.Greater(t, c, uint32(150000), "the check advertises the smoothed RTT")
		}
	}
	require.NotZero(t, changedAt)
	assert.LessOrEqual(t, changedAt, 10*time.Second+100*ms, "one period at most")
}

func TestBudgetViolationAdvertisesAtOnce(t *testing.T) {
	// Kim10 §2.2: when a link breaks the budget of the flows using it, the
	// router reroutes at once: the sample is advertised without waiting for
	// the threshold's EWMA or the period.
	a := newNode(t, 1, rttMode, func(c *Config) { c.CostInterval = time.Hour })
	require.NoError(t, a.LinkUp(2, 7, 0))
	a.Tick(0)
	for i := range 5 {
		sample(t, a, 2, time.Duration(i+1)*100*ms, 24*ms)
	}
	// Flows through the link may take 40 ms one way.
	a.SetDelayBudget(2, 40*ms)
	rd := sample(t, a, 2, time.Second, 60*ms) // 30 ms one way: within
	_, ok := advertised(rd, 2)
	assert.False(t, ok)
	assert.Empty(t, events(rd, EventBudgetViolation))

	rd = sample(t, a, 2, 1100*ms, 200*ms) // 100 ms one way: broken
	cost, ok := advertised(rd, 2)
	require.True(t, ok, "advertised at the violating sample")
	assert.Equal(t, uint32(200000), cost, "the sample, not the EWMA (which is still at 56 ms)")
	v := events(rd, EventBudgetViolation)
	require.Len(t, v, 1)
	assert.Equal(t, Event{Type: EventBudgetViolation, Peer: 2, OldCost: 24000, Cost: 200000, RTT: 200 * ms, Budget: 40 * ms}, v[0])
	got, _ := rtt(a, 2)
	assert.Equal(t, 200*ms, got, "the EWMA restarts at the new level")

	// The advertisement already shows the violation: later slow samples
	// do not advertise again.
	for i := range 5 {
		rd = sample(t, a, 2, 1200*ms+time.Duration(i)*100*ms, 210*ms)
		_, ok = advertised(rd, 2)
		assert.False(t, ok)
		assert.Empty(t, events(rd, EventBudgetViolation))
	}

	// Without a budget the same jump waits for the period.
	b := newNode(t, 1, rttMode, func(c *Config) { c.CostInterval = time.Hour })
	require.NoError(t, b.LinkUp(2, 7, 0))
	b.Tick(0)
	for i := range 5 {
		sample(t, b, 2, time.Duration(i+1)*100*ms, 24*ms)
	}
	rd = sample(t, b, 2, time.Second, 200*ms)
	_, ok = advertised(rd, 2)
	assert.False(t, ok)
}

func TestBudgetOnlyWithMeasuredCosts(t *testing.T) {
	// A configured weight says nothing about delay: no budget applies.
	a := newNode(t, 1)
	require.NoError(t, a.LinkUp(2, 7, 0))
	for i := range 5 {
		sample(t, a, 2, time.Duration(i+1)*100*ms, 24*ms)
	}
	a.SetDelayBudget(2, 10*ms)
	rd := sample(t, a, 2, time.Second, 200*ms)
	assert.Empty(t, events(rd, EventBudgetViolation))
	_, ok := advertised(rd, 2)
	assert.False(t, ok)
}

func TestBudgetViolationReroutes(t *testing.T) {
	// A triangle 1-2-3 with a slow detour: 1→3 goes direct until the direct
	// link breaks the budget, then over 2 at once.
	m := newMesh(t, newNode(t, 1, rttMode), newNode(t, 2, rttMode), newNode(t, 3, rttMode))
	for _, n := range m.nodes {
		n.cfg.CostInterval = time.Hour
	}
	m.link(1, 2, 1, 0)
	m.link(2, 3, 1, 0)
	m.link(1, 3, 1, 0)
	// Costs as RTTs: 1-3 20 ms, 1-2 and 2-3 15 ms each.
	for i := range 3 {
		now := time.Duration(i+1) * 100 * ms
		for _, l := range [][3]uint32{{1, 3, 20}, {3, 1, 20}, {1, 2, 15}, {2, 1, 15}, {2, 3, 15}, {3, 2, 15}} {
			sample(t, m.nodes[l[0]], l[1], now, time.Duration(l[2])*ms)
		}
		m.pump(now)
	}
	next, _ := m.nodes[1].Routes().NextHop(3)
	require.Equal(t, uint32(3), next)
	m.nodes[1].SetDelayBudget(3, 25*ms)
	rd := sample(t, m.nodes[1], 3, time.Second, 200*ms)
	require.Len(t, events(rd, EventBudgetViolation), 1)
	// sample drained the node's Ready; hand its messages to the mesh.
	for _, e := range rd.Messages {
		_ = m.nodes[e.To].Step(1, e.Msg, time.Second)
	}
	m.pump(time.Second)
	next, _ = m.nodes[1].Routes().NextHop(3)
	assert.Equal(t, uint32(2), next, "rerouted over 2")
}

func TestQoSClassesFlood(t *testing.T) {
	// docs/design.md §11: a router's deadline and two-path classes travel
	// with its predicate advertisement and reach every PREDICATES row.
	m := newMesh(t, newNode(t, 1), newNode(t, 2))
	m.link(1, 2, 1, 0)
	f, g := bloom(1, 5), bloom(2, 6)
	classes := []QoSClass{
		{TwoPaths: true, Filters: []encoding.Bloom{g}},
		{Deadline: 50 * ms, Filters: []encoding.Bloom{f}},
	}
	require.NoError(t, m.nodes[1].SetLocalPredicate([]encoding.Bloom{f, g}, classes...))
	m.pump(0)
	var last PredicateUpdate
	for _, u := range m.log[2].PredicateUpdates {
		if u.Router == 1 {
			last = u
		}
	}
	assert.Equal(t, []QoSClass{classes[1], classes[0]}, last.Classes, "in CompareQoS order")

	// Changing only a class's deadline is a new advertisement.
	m.reset()
	classes[1].Deadline = 40 * ms
	require.NoError(t, m.nodes[1].SetLocalPredicate([]encoding.Bloom{f, g}, classes...))
	m.pump(0)
	require.NotEmpty(t, m.log[2].PredicateUpdates)
	assert.Equal(t, 40*ms, m.log[2].PredicateUpdates[0].Classes[0].Deadline)

	// The same classes in another order are the same advertisement.
	m.reset()
	require.NoError(t, m.nodes[1].SetLocalPredicate([]encoding.Bloom{f, g}, classes[1], classes[0]))
	m.pump(0)
	assert.Empty(t, m.log[2].PredicateUpdates)
}

func TestQoSClassChecksum(t *testing.T) {
	f := bloom(3)
	p := &PredAd{Origin: 1, Params: encoding.DefaultParams(), Filters: []encoding.Bloom{f}}
	plain := p.Checksum()
	p.Classes = []QoSClass{{Deadline: 50 * ms, Filters: []encoding.Bloom{f}}}
	withClass := p.Checksum()
	assert.NotEqual(t, plain, withClass)
	p.Classes[0].TwoPaths = true
	assert.NotEqual(t, withClass, p.Checksum())
}

func TestQoSClassValidation(t *testing.T) {
	f := bloom(3)
	tests := []struct {
		name    string
		classes []QoSClass
		want    string
	}{
		{"negative deadline", []QoSClass{{Deadline: -1, Filters: []encoding.Bloom{f}}}, "negative deadline"},
		{"asks for nothing", []QoSClass{{Filters: []encoding.Bloom{f}}}, "asks for nothing"},
		{"no filters", []QoSClass{{Deadline: 1}}, "no filters"},
		{"repeated", []QoSClass{{Deadline: 1, Filters: []encoding.Bloom{f}}, {Deadline: 1, Filters: []encoding.Bloom{f}}}, "out of order or repeated"},
		{"out of order", []QoSClass{{Deadline: 2, Filters: []encoding.Bloom{f}}, {Deadline: 1, Filters: []encoding.Bloom{f}}}, "out of order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newNode(t, 1)
			require.NoError(t, a.LinkUp(2, 1, 0))
			err := a.Step(2, &PredAd{Origin: 2, Seq: 1, Params: encoding.DefaultParams(), Filters: []encoding.Bloom{f}, Classes: tt.classes}, 0)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	many := make([]QoSClass, MaxQoSClasses+1)
	for i := range many {
		many[i] = QoSClass{Deadline: time.Duration(i + 1), Filters: []encoding.Bloom{f}}
	}
	err := newNode(t, 1).SetLocalPredicate([]encoding.Bloom{f}, many...)
	require.ErrorContains(t, err, "QoS classes, at most 16")
}
