package node

import (
	"testing"
	"time"

	"github.com/bits-and-blooms/bitset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/linkstate"
)

func TestBounceHoldIsBounded(t *testing.T) {
	t.Run("bundles", func(t *testing.T) {
		var bh bounceHold
		for i := range maxHeldBundles {
			require.True(t, bh.add(heldBundle{msg: []byte{1}}), "bundle %d", i)
		}
		assert.False(t, bh.add(heldBundle{msg: []byte{1}}), "one bundle beyond the bound")
		assert.EqualValues(t, maxHeldBundles, bh.count.Load())
	})
	t.Run("bytes", func(t *testing.T) {
		var bh bounceHold
		require.True(t, bh.add(heldBundle{msg: make([]byte, maxHeldBytes-10)}))
		assert.False(t, bh.add(heldBundle{msg: make([]byte, 11)}), "one byte beyond the bound")
		assert.True(t, bh.add(heldBundle{msg: make([]byte, 10)}), "exactly at the bound")
		bh.take(nil, time.Time{}, true)
		assert.Zero(t, bh.bytes, "taking everything frees every byte")
		assert.True(t, bh.add(heldBundle{msg: make([]byte, maxHeldBytes)}))
	})
}

func TestBounceHoldTakesWhatIsDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	oldRoutes, newRoutes := &linkstate.Table{}, &linkstate.Table{}
	held := func(seq uint64, routes *linkstate.Table, until time.Time) heldBundle {
		return heldBundle{dest: bitset.New(8), routes: routes, until: until, msg: []byte{byte(seq)}, h: bundleHeader{hops: uint32(seq)}}
	}
	tests := []struct {
		name   string
		routes *linkstate.Table
		now    time.Time
		all    bool
		due    []uint32 // by h.hops
	}{
		{"nothing changed, nothing expired", oldRoutes, t0, false, nil},
		{"routes changed: all decided on the old ones", newRoutes, t0, false, []uint32{1, 3}},
		{"the first reaches its hold time", oldRoutes, t0.Add(bounceHoldFor), false, []uint32{1}},
		{"both held long enough", oldRoutes, t0.Add(2 * bounceHoldFor), false, []uint32{1, 3}},
		{"all, when stopping", oldRoutes, t0, true, []uint32{1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bh bounceHold
			require.True(t, bh.add(held(1, oldRoutes, t0.Add(bounceHoldFor))))
			require.True(t, bh.add(held(3, oldRoutes, t0.Add(2*bounceHoldFor))))
			var got []uint32
			for _, hb := range bh.take(tt.routes, tt.now, tt.all) {
				got = append(got, hb.h.hops)
			}
			assert.Equal(t, tt.due, got)
			assert.EqualValues(t, 2-len(tt.due), bh.count.Load(), "held after")
			assert.Equal(t, 2-len(tt.due), bh.bytes, "bytes held after")
		})
	}
}
