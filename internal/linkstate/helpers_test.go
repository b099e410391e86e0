package linkstate

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const ms = time.Millisecond

// newNode returns a router of DefaultConfig without fast failure
// detection, whose tests (suspect_test.go) turn it on with fastDetect:
// the other tests hold links silent on purpose, to see what hellos and
// dead intervals do.
func newNode(t testing.TB, id uint32, edit ...func(*Config)) *Node {
	t.Helper()
	cfg := DefaultConfig(id, "r"+string(rune('a'+id%26)))
	cfg.Keepalive, cfg.SuspectMultiplier = 0, 0
	for _, f := range edit {
		f(&cfg)
	}
	n, err := New(cfg)
	require.NoError(t, err)
	return n
}

func rttMode(c *Config) { c.CostMode = CostRTT }

// fastDetect announces keepalives every keepalive and suspects a link
// after mult of its neighbour's.
func fastDetect(keepalive time.Duration, mult int) func(*Config) {
	return func(c *Config) { c.Keepalive, c.SuspectMultiplier = keepalive, mult }
}

// drain collects everything the node has to say.
func drain(n *Node) Ready {
	var all Ready
	for n.HasReady() {
		rd := n.Ready()
		all.Messages = append(all.Messages, rd.Messages...)
		all.PredicateUpdates = append(all.PredicateUpdates, rd.PredicateUpdates...)
		all.Events = append(all.Events, rd.Events...)
		all.RoutesChanged = all.RoutesChanged || rd.RoutesChanged
		n.Advance()
	}
	return all
}

// to returns the messages for one neighbour, in order.
func to(rd Ready, id uint32) []Message {
	var out []Message
	for _, e := range rd.Messages {
		if e.To == id {
			out = append(out, e.Msg)
		}
	}
	return out
}

// only returns the messages of type T among ms.
func only[T Message](ms []Message) []T {
	var out []T
	for _, m := range ms {
		if x, ok := m.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

func events(rd Ready, typ EventType) []Event {
	var out []Event
	for _, e := range rd.Events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// mesh is a zero-delay network of nodes for hand-driven unit tests: pump
// delivers queued messages until none are left, at one instant.
type mesh struct {
	t     testing.TB
	nodes map[uint32]*Node
	queue []struct {
		from uint32
		env  Envelope
	}
	// drop, if set, discards a message instead of delivering it.
	drop func(from, to uint32, m Message) bool
	// log keeps everything drained, for assertions.
	log map[uint32]*Ready
	// stepErr, if set, sees every error Step returns while pumping.
	stepErr func(from, to uint32, err error)
}

func newMesh(t testing.TB, nodes ...*Node) *mesh {
	m := &mesh{t: t, nodes: map[uint32]*Node{}, log: map[uint32]*Ready{}}
	for _, n := range nodes {
		m.nodes[n.ID()] = n
		m.log[n.ID()] = &Ready{}
	}
	return m
}

func (m *mesh) ids() []uint32 {
	ids := make([]uint32, 0, len(m.nodes))
	for id := range m.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (m *mesh) collect() {
	for _, id := range m.ids() {
		rd := drain(m.nodes[id])
		l := m.log[id]
		l.Messages = append(l.Messages, rd.Messages...)
		l.PredicateUpdates = append(l.PredicateUpdates, rd.PredicateUpdates...)
		l.Events = append(l.Events, rd.Events...)
		for _, e := range rd.Messages {
			m.queue = append(m.queue, struct {
				from uint32
				env  Envelope
			}{id, e})
		}
	}
}

func (m *mesh) pump(now time.Duration) {
	m.collect()
	for steps := 0; len(m.queue) > 0; steps++ {
		require.Less(m.t, steps, 100000, "messages keep flowing")
		q := m.queue[0]
		m.queue = m.queue[1:]
		dst := m.nodes[q.env.To]
		if dst == nil || m.drop != nil && m.drop(q.from, q.env.To, q.env.Msg) {
			continue
		}
		if err := dst.Step(q.from, q.env.Msg, now); err != nil && m.stepErr != nil {
			m.stepErr(q.from, q.env.To, err)
		}
		m.collect()
	}
}

// link brings a link up at both ends and lets the adjacency form.
func (m *mesh) link(a, b uint32, w uint32, now time.Duration) {
	require.NoError(m.t, m.nodes[a].LinkUp(b, w, now))
	require.NoError(m.t, m.nodes[b].LinkUp(a, w, now))
	m.pump(now)
}

func (m *mesh) tick(now time.Duration) {
	for _, id := range m.ids() {
		m.nodes[id].Tick(now)
	}
	m.pump(now)
}

func (m *mesh) reset() {
	for id := range m.log {
		m.log[id] = &Ready{}
	}
}
