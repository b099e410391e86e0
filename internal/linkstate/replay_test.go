package linkstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/encoding"
)

// TestReplayAfterRestartIsOlder: a compromised broker keeps the signed
// advertisements of a mesh's earlier run and sends them again after the
// whole mesh restarted, when every router numbers its advertisements from
// 1 again. Numbered by incarnation (Config.Incarnation), the earlier run's
// copies are older than the current run's first: a router that holds the
// current copy answers the replay with it, the origin does not jump past
// its earlier numbers, and routes and predicates are unchanged. A router
// that has not heard of the origin's current run yet takes the replay only
// until the current copy reaches it, again without a jump.
func TestReplayAfterRestartIsOlder(t *testing.T) {
	p := newPKI(3)
	run := func(inc uint64) *mesh {
		nodes := make([]*Node, 3)
		for i := range nodes {
			id := uint32(i + 1)
			nodes[i] = newNode(t, id, func(c *Config) { c.Auth, c.Incarnation = p.auth(id), inc })
		}
		m := newMesh(t, nodes...)
		m.link(1, 2, 1, 0)
		m.link(2, 3, 1, 0)
		return m
	}

	// The earlier run: router 3 advertises often enough that its
	// sequence numbers are well past where a new run starts.
	before := run(100)
	for i := range 5 {
		require.NoError(t, before.nodes[3].SetLocalPredicate([]encoding.Bloom{bloom(i + 1)}))
		before.pump(time.Duration(i+1) * time.Second)
	}
	var kept []Message // what the compromised router 2 recorded
	for _, k := range []Key{{KindRouter, 3}, {KindPredicate, 3}, {KindRouter, 1}, {KindPredicate, 1}} {
		kept = append(kept, before.nodes[2].lsdb[k].message(5*time.Second))
	}

	// The whole mesh restarts, later.
	after := run(200)
	require.NoError(t, after.nodes[3].SetLocalPredicate([]encoding.Bloom{bloom(42)}))
	after.pump(time.Second)
	after.reset()
	digest, routes, preds := after.nodes[1].Digest(), after.nodes[1].Routes(), after.nodes[1].Predicates()
	for _, m := range kept {
		require.NoError(t, after.nodes[1].Step(2, m, 2*time.Second))
	}
	after.pump(2 * time.Second)
	assert.Equal(t, digest, after.nodes[1].Digest(), "a replayed advertisement was installed")
	assert.Same(t, routes, after.nodes[1].Routes(), "a replay moved routes")
	assert.Equal(t, preds, after.nodes[1].Predicates())
	for _, id := range after.ids() {
		assert.Empty(t, events(*after.log[id], EventSeqJump), "router %d jumped past its earlier run", id)
	}

	// A router of the new run that has not met the others yet.
	fresh := newNode(t, 4, func(c *Config) { c.Auth, c.Incarnation = p.auth(4), 200 })
	after.nodes[4] = fresh
	after.log[4] = &Ready{}
	require.NoError(t, fresh.LinkUp(3, 1, 3*time.Second))
	require.NoError(t, after.nodes[3].LinkUp(4, 1, 3*time.Second))
	for _, m := range kept[:2] {
		_ = fresh.Step(3, m, 3*time.Second)
	}
	after.pump(3 * time.Second)
	for _, id := range after.ids() {
		assert.Empty(t, events(*after.log[id], EventSeqJump), "router %d jumped past its earlier run", id)
	}
	for _, k := range []Key{{KindRouter, 3}, {KindPredicate, 3}} {
		assert.Equal(t, after.nodes[1].lsdb[k].summary(), fresh.lsdb[k].summary(), "the current run's copy of %v prevailed", k)
	}
}
