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

const ms = time.Millisecond

func TestShare(t *testing.T) {
	// Kim10 §2.2: b_i = (D − d)/k.
	tests := []struct {
		name          string
		budget, delay time.Duration
		hops          int
		want          time.Duration
	}{
		{"one link, direct", 50 * ms, 12 * ms, 1, 38 * ms},
		{"two links share the margin", 50 * ms, 30 * ms, 2, 10 * ms},
		{"three links", 50 * ms, 20 * ms, 3, 10 * ms},
		{"no link left: the whole margin", 50 * ms, 0, 0, 50 * ms},
		{"margin gone", 40 * ms, 60 * ms, 2, -10 * ms},
		{"budget spent", -5 * ms, 10 * ms, 1, -15 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Share(tt.budget, tt.delay, tt.hops))
		})
	}
}

func TestOneWay(t *testing.T) {
	assert.Equal(t, 12*ms, OneWay(24000))
	assert.Equal(t, time.Duration(1<<63-1), OneWay(1<<63))
}

func TestTighter(t *testing.T) {
	assert.Equal(t, 5*ms, Tighter(0, 5*ms))
	assert.Equal(t, 5*ms, Tighter(5*ms, 0))
	assert.Equal(t, 3*ms, Tighter(5*ms, 3*ms))
	assert.Equal(t, time.Duration(0), Tighter(0, 0))
}

func randomBloom(rng *rand.Rand, bits int) encoding.Bloom {
	var b encoding.Bloom
	for range bits {
		b.Set(rng.IntN(64))
	}
	return b
}

func TestLookupMatchesNaive(t *testing.T) {
	// The lookup against the definition: over every class with a filter
	// the message contains, the least non-zero deadline and any two-paths.
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		by := map[uint32][]linkstate.QoSClass{}
		for r := range uint32(4) {
			var cs []linkstate.QoSClass
			for range rng.IntN(4) {
				c := linkstate.QoSClass{Deadline: time.Duration(rng.IntN(4)) * 10 * ms, TwoPaths: rng.IntN(2) == 0}
				if c.Deadline == 0 && !c.TwoPaths {
					c.TwoPaths = true
				}
				for range 1 + rng.IntN(3) {
					c.Filters = append(c.Filters, randomBloom(rng, 1+rng.IntN(3)))
				}
				cs = append(cs, c)
			}
			by[r] = cs
		}
		tab := NewTable(by)
		m := randomBloom(rng, 20)
		for r := range uint32(5) {
			var want Flow
			for _, c := range by[r] {
				for _, f := range c.Filters {
					if f.SubsetOf(m) {
						want.Deadline = Tighter(want.Deadline, c.Deadline)
						want.TwoPaths = want.TwoPaths || c.TwoPaths
					}
				}
			}
			require.Equal(t, want, tab.Lookup(r, &m), "trial %d router %d", trial, r)
		}
	}
}

func TestEmptyTable(t *testing.T) {
	var nilTable *Table
	assert.True(t, nilTable.Empty())
	var m encoding.Bloom
	assert.Equal(t, Flow{}, nilTable.Lookup(1, &m))
	tab := NewTable(map[uint32][]linkstate.QoSClass{3: nil})
	assert.True(t, tab.Empty())
	assert.Empty(t, tab.Routers())
}
