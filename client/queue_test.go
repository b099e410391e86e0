package client

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestDeliveryQueueMatchesASlice: pushes and pops in random runs keep the
// order a plain slice keeps, and the space stays within twice the most
// ever queued (it moves down instead of growing while half is free).
func TestDeliveryQueueMatchesASlice(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var q deliveryQueue
		var ref []Delivery
		next, most := uint64(1), 0
		for range 2000 {
			if rng.IntN(3) > 0 || len(ref) == 0 { // grow more often than shrink
				for range rng.IntN(40) {
					d := Delivery{Seq: next}
					next++
					q.push(d)
					ref = append(ref, d)
				}
			} else {
				for k := rng.IntN(len(ref) + 1); k > 0; k-- {
					require.Equal(t, ref[0].Seq, q.front().Seq, "seed %d", seed)
					q.pop()
					ref = ref[1:]
				}
			}
			most = max(most, len(ref))
			require.Equal(t, len(ref), q.len(), "seed %d", seed)
			if len(ref) > 0 {
				require.Equal(t, ref[0].Seq, q.all()[0].Seq, "seed %d", seed)
				require.Equal(t, ref[len(ref)-1].Seq, q.all()[q.len()-1].Seq, "seed %d", seed)
			}
		}
		require.LessOrEqual(t, cap(q.buf), 4*max(most, 8), "seed %d: space bounded by what was queued", seed)
	}
}

// TestPublisherQueueCutsRequests: a publisher queues messages in batches
// of one request each, within a request's bounds (maxBatchMessages,
// maxBatchBytes, unless one message alone is larger), and takes them in
// order.
func TestPublisherQueueCutsRequests(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload int
		n       int
		want    []int // messages per request
	}{
		{"small", 16, 2500, []int{maxBatchMessages, maxBatchMessages, 2500 - 2*maxBatchMessages}},
		{"100 KiB", 100 << 10, 5, []int{2, 2, 1}},
		{"over a request alone", maxBatchBytes + 1, 2, []int{1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Publisher{}
			p.cond = sync.NewCond(&p.mu)
			for i := range tc.n {
				require.NoError(t, p.enqueue(Message{Attrs: Attrs{"n": i}, Payload: make([]byte, tc.payload)}, nil))
			}
			require.Error(t, p.enqueue(Message{Attrs: Attrs{"": 1}}, nil), "a message that cannot be encoded")
			var got []int
			next := 0
			for len(p.queue) > 0 {
				b := p.take()
				got = append(got, b.len())
				if b.len() > 1 {
					assert.LessOrEqual(t, len(b.b), maxBatchBytes, "request %d", len(got))
				}
				for i, start := range b.start {
					end := len(b.b)
					if i+1 < b.len() {
						end = b.start[i+1]
					}
					m, _, err := messageFromWire(entryMessage(t, b.b[start:end]), nil)
					require.NoError(t, err)
					require.Equal(t, int64(next), m.Attrs["n"], "in order")
					next++
				}
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.n, p.queued)
		})
	}
}

// entryMessage is the drip.v1.Message of one batch entry (field 2).
func entryMessage(t *testing.T, entry []byte) []byte {
	t.Helper()
	_, _, n := protowire.ConsumeTag(entry)
	require.Positive(t, n)
	msg, m := protowire.ConsumeBytes(entry[n:])
	require.Equal(t, len(entry), n+m, "one field")
	return msg
}
