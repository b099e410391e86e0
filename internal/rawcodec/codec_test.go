package rawcodec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/wire"
)

// countingPool is a buffer pool that records what is given back to it.
type countingPool struct {
	mem.BufferPool
	put [][]byte
}

func (p *countingPool) Put(b *[]byte) { p.put = append(p.put, *b) }

func TestCodecRaw(t *testing.T) {
	pub := wire.NewPublished([]byte("message"), wire.PublishedHeader{})
	payload := wire.AppendDelivery(nil, &pub)
	for _, tc := range []struct {
		name   string
		pooled bool
	}{
		{"plain", false},
		{"pooled", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, len(payload), 2<<10) // over gRPC's pooling threshold
			copy(b, payload)
			pool := &countingPool{BufferPool: mem.DefaultBufferPool()}
			raw := &Raw{B: b}
			if tc.pooled {
				raw.Pool = pool
			}
			data, err := Codec{}.Marshal(raw)
			require.NoError(t, err)
			assert.Equal(t, payload, data.Materialize(), "the bytes as they are")

			// What gRPC does when the transport is done with the message.
			data.Free()
			if !tc.pooled {
				assert.Empty(t, pool.put)
				return
			}
			require.Len(t, pool.put, 1, "given back to its pool once written")
			assert.Same(t, &b[:1][0], &pool.put[0][:1][0], "the sender's own buffer")
		})
	}
}

func TestCodecProto(t *testing.T) {
	msg := &dripv1.Delivery{Event: &dripv1.Delivery_Message{Message: &dripv1.Published{IngressRouter: 7}}}
	data, err := Codec{}.Marshal(msg)
	require.NoError(t, err)
	var raw Raw
	require.NoError(t, Codec{}.Unmarshal(data, &raw))
	var back dripv1.Delivery
	require.NoError(t, Codec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw.B)}, &back))
	assert.Equal(t, uint32(7), back.GetMessage().GetIngressRouter(), "plain messages through protobuf, received raw or decoded")
}
