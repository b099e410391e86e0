package wire

import (
	"fmt"
	"math"
	"testing"

	"github.com/bits-and-blooms/bitset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
)

// referenceBundle is ParseBundle written the obvious way, over protobuf's
// decoder: the model the hand-written parser must agree with.
func referenceBundle(raw []byte, maxRouter uint32) (Bundle, error) {
	var b dripv1.Bundle
	if err := proto.Unmarshal(raw, &b); err != nil {
		return Bundle{}, err
	}
	if b.GetSource() > maxRouter {
		return Bundle{}, fmt.Errorf("bundle from router %d: source beyond the largest router ID %d", b.GetSource(), maxRouter)
	}
	words := b.GetDestinations()
	if limit := int(maxRouter/64) + 1; len(words) > limit {
		return Bundle{}, fmt.Errorf("bundle from router %d: %d destination words, more than the %d that router IDs up to %d need",
			b.GetSource(), len(words), limit, maxRouter)
	}
	dest := bitset.From(words)
	id := uint64(0)
	for i, d := range b.GetDestinationDeltas() {
		if uint64(d) > uint64(maxRouter)-id || i > 0 && d == 0 {
			return Bundle{}, fmt.Errorf("bundle from router %d: destinations not ascending router IDs up to the largest, %d", b.GetSource(), maxRouter)
		}
		id += uint64(d)
		dest.Set(uint(id))
	}
	if top, ok := lastSet(dest); ok && top > uint(maxRouter) {
		return Bundle{}, fmt.Errorf("bundle from router %d: destination %d beyond the largest router ID %d", b.GetSource(), top, maxRouter)
	}
	if b.GetHopsLeft() > math.MaxUint8 {
		return Bundle{}, fmt.Errorf("bundle from router %d: hops left %d, at most %d", b.GetSource(), b.GetHopsLeft(), math.MaxUint8)
	}
	if len(b.GetMessage()) == 0 {
		return Bundle{}, fmt.Errorf("bundle from router %d: no message", b.GetSource())
	}
	if b.GetDeadlineNs() < 0 {
		return Bundle{}, fmt.Errorf("bundle from router %d: negative deadline %d ns", b.GetSource(), b.GetDeadlineNs())
	}
	if p := b.GetPath(); p > PathSecond {
		return Bundle{}, fmt.Errorf("bundle from router %d: path %d, want 0, %d or %d", b.GetSource(), p, PathFirst, PathSecond)
	}
	return Bundle{
		QoS:         BundleQoS{Deadline: b.GetDeadlineNs(), Budget: b.GetBudgetNs(), Path: b.GetPath(), Marked: b.GetCongestionExperienced()},
		Bundle:      drp.Bundle{Source: b.GetSource(), Dest: dest, HopsLeft: uint8(b.GetHopsLeft()), Broadcast: b.GetBroadcast()},
		Stamp:       dedup.Stamp{Origin: b.GetSource(), Epoch: b.GetEpoch(), Seq: b.GetSeq()},
		PublishedAt: b.GetPublishedUnixNano(),
		Hops:        b.GetHops(),
		Message:     b.GetMessage(),
	}, nil
}

func parse(t testing.TB, raw []byte, maxRouter uint32) (Bundle, error) {
	t.Helper()
	var dest bitset.BitSet
	b, _, err := ParseBundle(raw, maxRouter, &dest, nil)
	return b, err
}

func TestBundleRoundTrip(t *testing.T) {
	dest := bitset.New(200).Set(3).Set(130)
	in := drp.Bundle{Source: 7, Dest: dest, HopsLeft: 9, Broadcast: true}
	st := dedup.Stamp{Origin: 7, Epoch: 1_700_000_000_000_000_000, Seq: 42}
	raw := AppendBundle(nil, in, st, 123, 2, []byte("m"))
	assert.LessOrEqual(t, len(raw), BundleSizeBound(1, len(dest.Words())))

	var pb dripv1.Bundle
	require.NoError(t, proto.Unmarshal(raw, &pb), "the wire form is a drip.v1.Bundle")
	assert.Equal(t, uint32(7), pb.GetSource())
	assert.Equal(t, st.Epoch, pb.GetEpoch())

	got, err := parse(t, raw, 255)
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

func TestBundleQoSRoundTrip(t *testing.T) {
	// docs/design.md §11: a bundle carries its deadline, the budget left
	// and its path; the budget is the last 8 bytes, set in place as the
	// bundle leaves a link queue.
	in := drp.Bundle{Source: 7, Dest: bitset.New(8).Set(3), HopsLeft: 9}
	q := BundleQoS{Deadline: 50_000_000, Budget: 41_000_000, Path: PathSecond, Marked: true}
	raw := AppendBundleQoS(nil, in, dedup.Stamp{Origin: 7, Epoch: 1, Seq: 2}, 123, 2, []byte("m"), q)
	assert.LessOrEqual(t, len(raw), BundleSizeBound(1, 1))
	got, err := parse(t, raw, 255)
	require.NoError(t, err)
	assert.Equal(t, q, got.QoS)

	SetBudget(raw, -3)
	var pb dripv1.Bundle
	require.NoError(t, proto.Unmarshal(raw, &pb))
	assert.Equal(t, int64(-3), pb.GetBudgetNs())
	assert.Equal(t, int64(50_000_000), pb.GetDeadlineNs())
	assert.Equal(t, uint32(PathSecond), pb.GetPath())
	assert.True(t, pb.GetCongestionExperienced())

	// A mark alone: the bundle of a plain message queued on a filling link.
	marked := AppendBundleQoS(nil, in, dedup.Stamp{}, 0, 0, []byte("m"), BundleQoS{Marked: true})
	got, err = parse(t, marked, 255)
	require.NoError(t, err)
	assert.Equal(t, BundleQoS{Marked: true}, got.QoS)

	// Without QoS nothing is added: bundles stay what older brokers send.
	plain := AppendBundle(nil, in, dedup.Stamp{}, 0, 0, []byte("m"))
	assert.Equal(t, plain, AppendBundleQoS(nil, in, dedup.Stamp{}, 0, 0, []byte("m"), BundleQoS{}))
}

func setBits(s *bitset.BitSet) []uint {
	var out []uint
	for i, ok := s.NextSet(0); ok; i, ok = s.NextSet(i + 1) {
		out = append(out, i)
	}
	return out
}

func TestParseBundleRejects(t *testing.T) {
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
		{"negative deadline", func(b *dripv1.Bundle) { b.DeadlineNs = -1 }, "negative deadline -1 ns"},
		{"unknown path", func(b *dripv1.Bundle) { b.Path = 3 }, "path 3, want 0, 1 or 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ok()
			tc.edit(b)
			raw, err := proto.Marshal(b)
			require.NoError(t, err)
			_, err = parse(t, raw, 99)
			_, refErr := referenceBundle(raw, 99)
			assert.Equal(t, refErr, err, "the reference says the same")
			assert.ErrorContains(t, err, tc.want)
		})
	}
	raw, err := proto.Marshal(ok())
	require.NoError(t, err)
	_, err = parse(t, raw, 99)
	require.NoError(t, err)
	_, err = parse(t, raw[:len(raw)-1], 99)
	assert.ErrorContains(t, err, "truncated")
}

// FuzzParseBundle: whatever a peer sends, the parser agrees with protobuf's
// decoder and the reference checks: the same bundle, or an error where
// they find one (the parser may word it differently only for bytes
// protobuf refuses).
func FuzzParseBundle(f *testing.F) {
	f.Add(AppendBundle(nil, drp.Bundle{Source: 1, Dest: bitset.New(64).Set(2), HopsLeft: 4}, dedup.Stamp{Origin: 1, Epoch: 2, Seq: 3}, 5, 1, []byte("x")))
	f.Add(AppendBundle(nil, drp.Bundle{Source: 9, Dest: bitset.New(1200).Set(1100), Broadcast: true}, dedup.Stamp{}, -5, 0, []byte("long message")))
	f.Add(AppendBundleQoS(nil, drp.Bundle{Source: 3, Dest: bitset.New(64).Set(5), HopsLeft: 2}, dedup.Stamp{Origin: 3, Epoch: 2, Seq: 9}, 5, 1, []byte("q"),
		BundleQoS{Deadline: 50e6, Budget: -7, Path: PathSecond, Marked: true}))
	unpacked, _ := proto.Marshal(&dripv1.Bundle{Source: 2, Destinations: []uint64{1, 2}, Message: []byte("m")})
	f.Add(unpacked)
	f.Add(AppendBundle(nil, drp.Bundle{Source: 9, Dest: bitset.New(1000).Set(3).Set(999), HopsLeft: 4}, dedup.Stamp{Origin: 9, Epoch: 2, Seq: 3}, 5, 1, []byte("sparse")))
	both, _ := proto.Marshal(&dripv1.Bundle{Source: 2, Destinations: []uint64{1}, DestinationDeltas: []uint32{70, 0, 5}, Message: []byte("m")})
	f.Add(both)
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, wantErr := referenceBundle(raw, 1000)
		got, err := parse(t, raw, 1000)
		if wantErr != nil {
			require.Error(t, err, "protobuf or the checks refuse these bytes: %v", wantErr)
			return
		}
		require.NoError(t, err)
		require.Equal(t, setBits(want.Dest), setBits(got.Dest))
		want.Dest, got.Dest = nil, nil
		if len(want.Message) == 0 {
			want.Message = nil
		}
		require.Equal(t, want, got)
	})
}

// TestBundleBytesFollowDestinations: a bundle's size follows its
// destinations, not the largest router ID among them: up to router IDs of
// 2^20, a bundle for three routers takes a few bytes of destinations,
// where their bitset would take up to 128 KiB. Sets of small IDs are the
// bitset, byte for byte as before the list existed; every form parses
// back to its set, and DenseDestinations turns the list into the bitset
// for a neighbour that takes only that.
func TestBundleBytesFollowDestinations(t *testing.T) {
	msg := []byte("m")
	st := dedup.Stamp{Origin: 1, Epoch: 2, Seq: 3}
	for _, top := range []uint32{1 << 10, 65534, 1 << 20} {
		dest := bitset.New(uint(top) + 1).Set(2).Set(uint(top / 2)).Set(uint(top))
		b := drp.Bundle{Source: 1, Dest: dest, HopsLeft: 4}
		raw := AppendBundleQoS(nil, b, st, 5, 1, msg, BundleQoS{Deadline: 9, Budget: 1})
		assert.LessOrEqual(t, len(raw), 48, "destinations up to %d", top)
		assert.LessOrEqual(t, len(raw), BundleSizeBound(len(msg), len(dest.Words())))
		got, err := parse(t, raw, top)
		require.NoError(t, err)
		assert.Equal(t, setBits(dest), setBits(got.Dest))
		_, err = parse(t, raw, top-1)
		assert.ErrorContains(t, err, "up to the largest", "an ID beyond the largest is refused")

		dense := DenseDestinations(raw)
		var pb dripv1.Bundle
		require.NoError(t, proto.Unmarshal(dense, &pb))
		assert.Empty(t, pb.GetDestinationDeltas(), "as a broker older than the list reads it")
		assert.Equal(t, setBits(dest), setBits(bitset.From(pb.GetDestinations())))
		assert.Equal(t, int64(1), pb.GetBudgetNs())
		SetBudget(dense, 7)
		require.NoError(t, proto.Unmarshal(dense, &pb))
		assert.Equal(t, int64(7), pb.GetBudgetNs(), "the budget is still last")
	}
	small := drp.Bundle{Source: 1, Dest: bitset.New(64).Set(2).Set(40), HopsLeft: 4}
	raw := AppendBundle(nil, small, st, 5, 1, msg)
	var pb dripv1.Bundle
	require.NoError(t, proto.Unmarshal(raw, &pb))
	assert.Equal(t, small.Dest.Words(), pb.GetDestinations(), "small IDs: the bitset")
	assert.Equal(t, &raw[0], &DenseDestinations(raw)[0], "nothing to convert")
}
