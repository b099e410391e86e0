package wire

import (
	"testing"

	"github.com/bits-and-blooms/bitset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
)

func TestBundleRoundTrip(t *testing.T) {
	dest := bitset.New(200).Set(3).Set(130)
	in := drp.Bundle{Source: 7, Dest: dest, HopsLeft: 9, Broadcast: true}
	st := dedup.Stamp{Origin: 7, Epoch: 1_700_000_000_000_000_000, Seq: 42}
	pb := NewBundle(in, st, 123, 2, []byte("m"))
	raw, err := proto.Marshal(pb)
	require.NoError(t, err)
	var back dripv1.Bundle
	require.NoError(t, proto.Unmarshal(raw, &back))
	got, err := BundleFromProto(&back, 255)
	require.NoError(t, err)
	assert.Equal(t, uint32(7), got.Source)
	assert.Equal(t, []uint{3, 130}, setBits(got.Dest))
	assert.Equal(t, uint8(9), got.HopsLeft)
	assert.True(t, got.Broadcast)
	assert.Equal(t, st, got.Stamp)
	assert.Equal(t, int64(123), got.PublishedAt)
	assert.Equal(t, uint32(2), got.Hops)
	assert.Equal(t, []byte("m"), got.Message)
}

func setBits(s *bitset.BitSet) []uint {
	var out []uint
	for i, ok := s.NextSet(0); ok; i, ok = s.NextSet(i + 1) {
		out = append(out, i)
	}
	return out
}

func TestBundleFromProtoRejects(t *testing.T) {
	ok := func() *dripv1.Bundle {
		return &dripv1.Bundle{Source: 1, Destinations: []uint64{1 << 9}, HopsLeft: 3, Message: []byte("m")}
	}
	for _, tc := range []struct {
		name string
		edit func(*dripv1.Bundle)
		want string
	}{
		{"source beyond the largest ID", func(b *dripv1.Bundle) { b.Source = 100 }, "source beyond the largest router ID 99"},
		{"too many words", func(b *dripv1.Bundle) { b.Destinations = make([]uint64, 3) }, "3 destination words, more than the 2"},
		{"destination beyond the largest ID", func(b *dripv1.Bundle) { b.Destinations = []uint64{0, 1 << 40} }, "destination 104 beyond the largest router ID 99"},
		{"hops left beyond a byte", func(b *dripv1.Bundle) { b.HopsLeft = 256 }, "hops left 256"},
		{"no message", func(b *dripv1.Bundle) { b.Message = nil }, "no message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ok()
			tc.edit(b)
			_, err := BundleFromProto(b, 99)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	_, err := BundleFromProto(ok(), 99)
	require.NoError(t, err)
}

// FuzzBundleFromProto: whatever a peer sends, decoding returns a bundle
// within the bounds or an error, never a panic.
func FuzzBundleFromProto(f *testing.F) {
	seed, _ := proto.Marshal(NewBundle(drp.Bundle{Source: 1, Dest: bitset.New(64).Set(2), HopsLeft: 4}, dedup.Stamp{Origin: 1, Epoch: 2, Seq: 3}, 5, 1, []byte("x")))
	f.Add(seed)
	f.Fuzz(func(t *testing.T, raw []byte) {
		var b dripv1.Bundle
		if proto.Unmarshal(raw, &b) != nil {
			return
		}
		got, err := BundleFromProto(&b, 1000)
		if err != nil {
			return
		}
		require.LessOrEqual(t, got.Source, uint32(1000))
		if top, ok := lastSet(got.Dest); ok {
			require.LessOrEqual(t, top, uint(1000))
		}
	})
}
