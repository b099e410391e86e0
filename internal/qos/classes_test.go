package qos

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

func TestClassesGroupByFlow(t *testing.T) {
	f1, f2, f3 := bloomOf(1), bloomOf(2), bloomOf(3)
	covered := bloomOf(1, 9) // contains f1's bit: covered by f1
	got := Classes([]Request{
		{Flow: Flow{Deadline: 50 * ms}, Filters: []encoding.Bloom{f1}},
		{Flow: Flow{}, Filters: []encoding.Bloom{f2}}, // asks nothing: no class
		{Flow: Flow{TwoPaths: true}, Filters: []encoding.Bloom{f3}},
		{Flow: Flow{Deadline: 50 * ms}, Filters: []encoding.Bloom{covered, f2}},
		{Flow: Flow{Deadline: 20 * ms, TwoPaths: true}, Filters: nil}, // no filters: no class
	})
	require.Len(t, got, 2)
	assert.Equal(t, 50*ms, got[0].Deadline)
	assert.False(t, got[0].TwoPaths)
	assert.ElementsMatch(t, []encoding.Bloom{f1, f2}, got[0].Filters, "the covered filter is dropped")
	assert.Equal(t, time.Duration(0), got[1].Deadline, "no deadline sorts last")
	assert.True(t, got[1].TwoPaths)
}

func bloomOf(bits ...int) encoding.Bloom {
	var b encoding.Bloom
	for _, i := range bits {
		b.Set(i)
	}
	return b
}

func TestClassesNeverLooserThanAsked(t *testing.T) {
	// Property: the advertisement is valid (at most MaxQoSClasses, in
	// order), and for any message, the lookup over the classes is at
	// least as strict as every request whose filter the message contains:
	// its deadline no later, two paths if asked. Merging may only tighten.
	rng := rand.New(rand.NewPCG(3, 4))
	cfg := linkstate.DefaultConfig(1, "r1")
	cfg.Encoding = encoding.Params{Scheme: encoding.SchemeCatV2, M: 64, K: 2}
	node, err := linkstate.New(cfg)
	require.NoError(t, err)
	for trial := range 300 {
		var reqs []Request
		for range rng.IntN(40) {
			r := Request{Flow: Flow{TwoPaths: rng.IntN(3) == 0}}
			if rng.IntN(4) > 0 {
				r.Flow.Deadline = time.Duration(1+rng.IntN(200)) * ms
			}
			for range 1 + rng.IntN(2) {
				r.Filters = append(r.Filters, randomBloom(rng, 1+rng.IntN(3)))
			}
			reqs = append(reqs, r)
		}
		cs := Classes(reqs)
		require.LessOrEqual(t, len(cs), linkstate.MaxQoSClasses, "trial %d", trial)
		var all []encoding.Bloom
		for _, r := range reqs {
			all = append(all, r.Filters...)
		}
		require.NoError(t, node.SetLocalPredicate(encoding.Advertise(all), cs...), "trial %d: the advertisement is refused", trial)
		tab := NewTable(map[uint32][]linkstate.QoSClass{1: cs})
		for range 20 {
			m := randomBloom(rng, 25)
			got := tab.Lookup(1, &m)
			for _, r := range reqs {
				if r.Flow == (Flow{}) || !anySubset(r.Filters, m) {
					continue
				}
				if r.Flow.Deadline != 0 {
					require.NotZero(t, got.Deadline, "trial %d: a deadline was lost", trial)
					require.LessOrEqual(t, got.Deadline, r.Flow.Deadline, "trial %d", trial)
				}
				if r.Flow.TwoPaths {
					require.True(t, got.TwoPaths, "trial %d: two paths were lost", trial)
				}
			}
		}
	}
}

func anySubset(fs []encoding.Bloom, m encoding.Bloom) bool {
	for _, f := range fs {
		if f.SubsetOf(m) {
			return true
		}
	}
	return false
}

func TestClassesMergeClosestDeadlines(t *testing.T) {
	// 17 deadlines: 10, 20, …, 160 ms and 161 ms. The closest in ratio
	// are 160 and 161; they merge into 160.
	var reqs []Request
	for i := 1; i <= 16; i++ {
		reqs = append(reqs, Request{Flow: Flow{Deadline: time.Duration(i*10) * ms}, Filters: []encoding.Bloom{bloomOf(i)}})
	}
	reqs = append(reqs, Request{Flow: Flow{Deadline: 161 * ms}, Filters: []encoding.Bloom{bloomOf(40)}})
	cs := Classes(reqs)
	require.Len(t, cs, linkstate.MaxQoSClasses)
	last := cs[len(cs)-1]
	assert.Equal(t, 160*ms, last.Deadline)
	assert.ElementsMatch(t, []encoding.Bloom{bloomOf(16), bloomOf(40)}, last.Filters)
	assert.Equal(t, 10*ms, cs[0].Deadline, "the rest are untouched")
}
