package transport

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

// randomFilters returns n Blooms of a few bits each among the first bits
// positions, in Advertise's order as a broker sends them.
func randomFilters(rng *rand.Rand, n, bits int) []encoding.Bloom {
	out := make([]encoding.Bloom, n)
	for i := range out {
		for range 2 + rng.IntN(6) {
			out[i].Set(rng.IntN(bits))
		}
	}
	return encoding.Advertise(out)
}

// edit returns filters with some taken out and some new ones put in, in
// Advertise's order.
func edit(rng *rand.Rand, filters []encoding.Bloom, bits int) []encoding.Bloom {
	var next []encoding.Bloom
	for _, f := range filters {
		if rng.IntN(10) > 0 {
			next = append(next, f)
		}
	}
	return encoding.Advertise(append(next, randomFilters(rng, rng.IntN(5), bits)...))
}

// deltaOf is PredAdDelta with ad's checksum computed.
func deltaOf(base, ad *linkstate.PredAd) (*dripv1.Control, bool) {
	return PredAdDelta(base, ad, ad.Checksum())
}

// sendAll passes ads over one link, encoded as sendControl does, and
// returns what the far end decoded and how many went as deltas.
func sendAll(t *testing.T, enc *AdEncoder, dec *AdDecoder, ads []*linkstate.PredAd) ([]*linkstate.PredAd, int) {
	t.Helper()
	var got []*linkstate.PredAd
	deltas := 0
	for _, ad := range ads {
		c, ok := deltaOf(enc.Base(ad.Origin), ad)
		if ok {
			deltas++
		} else {
			var err error
			c, err = ControlToProto(ad)
			require.NoError(t, err)
		}
		enc.Sent(ad)
		// Through the protobuf encoding, as on a link.
		b, err := proto.Marshal(c)
		require.NoError(t, err)
		var back dripv1.Control
		require.NoError(t, proto.Unmarshal(b, &back))
		m, err := dec.Decode(&back)
		require.NoError(t, err, "advertisement %d of router %d", ad.Seq, ad.Origin)
		s := m.(*linkstate.SummedPredAd)
		require.Equal(t, s.Ad.Checksum(), s.Sum, "the checksum handed to the core")
		got = append(got, s.Ad)
	}
	return got, deltas
}

// TestDeltasRebuildWhatWasSent is a property test: a link's decoder
// rebuilds, from deltas and whole advertisements, exactly the advertisements
// sent, for random successions of several origins' predicates, QoS classes
// and withdrawals included.
func TestDeltasRebuildWhatWasSent(t *testing.T) {
	p := encoding.DefaultParams()
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 19))
		bits := 16 + rng.IntN(p.M-16)
		cur := map[uint32]*linkstate.PredAd{}
		var ads []*linkstate.PredAd
		for range 30 {
			origin := uint32(1 + rng.IntN(3))
			prev := cur[origin]
			ad := &linkstate.PredAd{Origin: origin, Seq: 1, Params: p, Age: time.Duration(rng.IntN(1000)) * time.Millisecond}
			switch {
			case prev == nil:
				ad.Filters = randomFilters(rng, rng.IntN(60), bits)
			case rng.IntN(15) == 0:
				ad.Seq, ad.Withdrawn = prev.Seq+1, true
			default:
				ad.Seq, ad.Filters = prev.Seq+1, edit(rng, prev.Filters, bits)
			}
			if len(ad.Filters) > 0 && rng.IntN(4) == 0 {
				ad.Classes = []linkstate.QoSClass{{Deadline: time.Second, Filters: ad.Filters[:1]}}
			}
			if len(ad.Filters) == 0 {
				ad.Filters = nil
			}
			cur[origin] = ad
			ads = append(ads, ad)
		}
		got, deltas := sendAll(t, NewAdEncoder(), NewAdDecoder(true, 0), ads)
		require.Len(t, got, len(ads))
		for i := range ads {
			require.Equal(t, ads[i], got[i], "seed %d, advertisement %d", seed, i)
		}
		if seed == 0 {
			assert.Positive(t, deltas, "deltas used")
		}
	}
}

// TestDeltaIsTheChange: a subscription's worth of change travels as that
// change, not as the whole predicate.
func TestDeltaIsTheChange(t *testing.T) {
	p := encoding.DefaultParams()
	rng := rand.New(rand.NewPCG(1, 2))
	base := &linkstate.PredAd{Origin: 3, Seq: 7, Params: p, Filters: randomFilters(rng, 1000, p.M)}
	next := &linkstate.PredAd{Origin: 3, Seq: 8, Params: p,
		Filters: encoding.Advertise(append(base.Filters[20:], randomFilters(rng, 20, p.M)...))}
	whole, err := ControlToProto(next)
	require.NoError(t, err)
	c, ok := deltaOf(base, next)
	require.True(t, ok)
	d := c.GetPredicateAd()
	assert.Equal(t, uint64(7), d.DeltaBase)
	assert.Len(t, d.DeltaRemoved, 20)
	assert.Len(t, d.DeltaAddedAt, 20)
	assert.Less(t, proto.Size(c), proto.Size(whole)/20, "delta %d bytes, whole %d", proto.Size(c), proto.Size(whole))
}

// TestDeltaOnlyWhenItHelps: withdrawals, other parameters or origins, and
// predicates that changed wholesale go whole; so do filters out of
// Advertise's order, which one merge cannot diff.
func TestDeltaOnlyWhenItHelps(t *testing.T) {
	p := encoding.DefaultParams()
	rng := rand.New(rand.NewPCG(3, 4))
	filters := randomFilters(rng, 50, p.M)
	base := &linkstate.PredAd{Origin: 1, Seq: 1, Params: p, Filters: filters}
	reversed := make([]encoding.Bloom, len(filters))
	for i, f := range filters {
		reversed[len(filters)-1-i] = f
	}
	for name, ad := range map[string]*linkstate.PredAd{
		"withdrawn":      {Origin: 1, Seq: 2, Params: p, Withdrawn: true},
		"other params":   {Origin: 1, Seq: 2, Params: encoding.DefaultParamsV1(), Filters: nil},
		"other origin":   {Origin: 2, Seq: 2, Params: p, Filters: filters[1:]},
		"all new":        {Origin: 1, Seq: 2, Params: p, Filters: randomFilters(rng, 50, p.M)},
		"out of order":   {Origin: 1, Seq: 2, Params: p, Filters: reversed[1:]},
		"no base":        nil,
		"empty, to none": {Origin: 1, Seq: 2, Params: p},
	} {
		t.Run(name, func(t *testing.T) {
			b := base
			if ad == nil {
				b, ad = nil, &linkstate.PredAd{Origin: 1, Seq: 2, Params: p, Filters: filters[1:]}
			}
			_, ok := deltaOf(b, ad)
			assert.False(t, ok)
		})
	}
	_, ok := deltaOf(base, &linkstate.PredAd{Origin: 1, Seq: 2, Params: p, Filters: filters[1:]})
	assert.True(t, ok, "one filter fewer")
}

// TestAdDecoderRefusesBadDeltas: everything a peer can get wrong in a delta
// is an error naming it, never a crash or a silently different predicate.
func TestAdDecoderRefusesBadDeltas(t *testing.T) {
	p := encoding.DefaultParams()
	rng := rand.New(rand.NewPCG(5, 6))
	base := &linkstate.PredAd{Origin: 4, Seq: 10, Params: p, Filters: randomFilters(rng, 30, p.M)}
	next := &linkstate.PredAd{Origin: 4, Seq: 11, Params: p, Filters: encoding.Advertise(append(base.Filters[2:], randomFilters(rng, 2, p.M)...))}
	good, ok := deltaOf(base, next)
	require.True(t, ok)
	for _, tc := range []struct {
		name   string
		accept bool
		noBase bool
		mutate func(d *dripv1.PredicateAd)
		want   string
	}{
		{name: "not offered", mutate: func(*dripv1.PredicateAd) {}, want: "not offered"},
		{name: "no base", accept: true, noBase: true, mutate: func(*dripv1.PredicateAd) {}, want: "no earlier advertisement"},
		{name: "other base", accept: true, mutate: func(d *dripv1.PredicateAd) { d.DeltaBase = 9 }, want: "has seq 10"},
		{name: "withdrawn", accept: true, mutate: func(d *dripv1.PredicateAd) { d.Withdrawn = true }, want: "sent whole"},
		{name: "other params", accept: true, mutate: func(d *dripv1.PredicateAd) { d.BloomHashes++ }, want: "differ from the base"},
		{name: "removed beyond the base", accept: true, mutate: func(d *dripv1.PredicateAd) { d.DeltaRemoved[1] = 30 }, want: "removed index 30"},
		{name: "removed twice", accept: true, mutate: func(d *dripv1.PredicateAd) { d.DeltaRemoved[1] = d.DeltaRemoved[0] }, want: "not ascending"},
		{name: "too many removed", accept: true, mutate: func(d *dripv1.PredicateAd) { d.DeltaRemoved = make([]uint32, 31) }, want: "31 filters removed"},
		{name: "added beyond the result", accept: true, mutate: func(d *dripv1.PredicateAd) { d.DeltaAddedAt[1] = 30 }, want: "added position 30"},
		{name: "added out of order", accept: true, mutate: func(d *dripv1.PredicateAd) {
			d.DeltaAddedAt[0], d.DeltaAddedAt[1] = d.DeltaAddedAt[1], d.DeltaAddedAt[0]
		}, want: "not ascending"},
		{name: "positions without filters", accept: true, mutate: func(d *dripv1.PredicateAd) { d.DeltaAddedAt = append(d.DeltaAddedAt, 29) }, want: "3 positions for 2 added filters"},
		{name: "checksum", accept: true, mutate: func(d *dripv1.PredicateAd) { d.DeltaSum++ }, want: "checksum"},
		{name: "added filters malformed", accept: true, mutate: func(d *dripv1.PredicateAd) { d.Filters = []byte{0xff} }, want: "predicate advertisement of router 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec := NewAdDecoder(tc.accept, 0)
			if !tc.noBase {
				c, err := ControlToProto(base)
				require.NoError(t, err)
				_, err = dec.Decode(c)
				require.NoError(t, err)
			}
			bad := proto.Clone(good).(*dripv1.Control)
			tc.mutate(bad.GetPredicateAd())
			m, err := dec.Decode(bad)
			require.Error(t, err)
			assert.Nil(t, m)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, 1, strings.Count(err.Error(), "predicate advertisement of router 4"), "says where once: %v", err)
		})
	}
}

// TestADeltaNeedsItsLink: outside a link's decoder a delta is refused
// rather than read as an advertisement of only its added filters.
func TestADeltaNeedsItsLink(t *testing.T) {
	p := encoding.DefaultParams()
	rng := rand.New(rand.NewPCG(7, 8))
	base := &linkstate.PredAd{Origin: 2, Seq: 1, Params: p, Filters: randomFilters(rng, 20, p.M)}
	c, ok := deltaOf(base, &linkstate.PredAd{Origin: 2, Seq: 2, Params: p, Filters: base.Filters[1:]})
	require.True(t, ok)
	_, err := ControlFromProto(c)
	require.ErrorContains(t, err, "a delta, which only a link's AdDecoder can rebuild")
}

// TestDeltasCannotGrowAnAdvertisementWithoutBound: a peer adding a little
// at a time cannot build an advertisement larger than any it could send
// whole.
func TestDeltasCannotGrowAnAdvertisementWithoutBound(t *testing.T) {
	p := encoding.DefaultParamsV1() // fixed size a filter: easy to count
	dec := NewAdDecoder(true, 0)
	dec.maxBytes = 40 * p.Bytes() // MaxAdvertisementBytes takes a minute to fill
	// Distinct Blooms of two bits each: none covers another.
	var filters []encoding.Bloom
	for i := range 40 {
		var b encoding.Bloom
		b.Set(i)
		b.Set(100 + i)
		filters = append(filters, b)
	}
	filters = encoding.Advertise(filters)
	full := &linkstate.PredAd{Origin: 1, Seq: 1, Params: p, Filters: filters}
	whole, err := ControlToProto(full)
	require.NoError(t, err)
	_, err = dec.Decode(whole)
	require.NoError(t, err, "as big as an advertisement may be")
	var extra encoding.Bloom
	extra.Set(200)
	extra.Set(201)
	grown := encoding.Advertise(append(append([]encoding.Bloom{}, filters...), extra))
	require.Len(t, grown, len(filters)+1)
	c, ok := deltaOf(full, &linkstate.PredAd{Origin: 1, Seq: 2, Params: p, Filters: grown})
	require.True(t, ok)
	_, err = dec.Decode(c)
	require.ErrorContains(t, err, fmt.Sprintf("over the %d an advertisement may", dec.maxBytes))
}

// FuzzAdDecoder: no delta a peer sends crashes the decoder, and one it
// takes rebuilds a predicate of the size its edit says.
func FuzzAdDecoder(f *testing.F) {
	p := encoding.DefaultParams()
	rng := rand.New(rand.NewPCG(9, 10))
	base := &linkstate.PredAd{Origin: 5, Seq: 3, Params: p, Filters: randomFilters(rng, 8, p.M)}
	baseC, err := ControlToProto(base)
	require.NoError(f, err)
	good, ok := deltaOf(base, &linkstate.PredAd{Origin: 5, Seq: 4, Params: p, Filters: encoding.Advertise(append(base.Filters[1:], randomFilters(rng, 1, p.M)...))})
	require.True(f, ok)
	b, err := proto.Marshal(good)
	require.NoError(f, err)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var c dripv1.Control
		if proto.Unmarshal(data, &c) != nil {
			return
		}
		dec := NewAdDecoder(true, 0)
		_, err := dec.Decode(baseC)
		require.NoError(t, err)
		m, err := dec.Decode(&c)
		if err != nil {
			return
		}
		d := c.GetPredicateAd()
		if s, ok := m.(*linkstate.SummedPredAd); ok {
			assert.Equal(t, s.Ad.Checksum(), s.Sum)
			if d.GetDeltaBase() != 0 {
				assert.Len(t, s.Ad.Filters, len(base.Filters)-len(d.DeltaRemoved)+len(d.DeltaAddedAt))
			}
		}
	})
}

// BenchmarkAdvertisementDelta: what a re-advertisement costs its sender
// (once per flood) and each receiver's link reader (once per link it
// arrives on, the checksum the core would otherwise compute included), whole
// against as a delta, at the 42-site lab's 50 clients per site (1,000
// filters, one client's 20 changed).
func BenchmarkAdvertisementDelta(b *testing.B) {
	p := encoding.DefaultParams()
	rng := rand.New(rand.NewPCG(11, 12))
	base := &linkstate.PredAd{Origin: 3, Seq: 7, Params: p, Filters: randomFilters(rng, 1000, p.M)}
	next := &linkstate.PredAd{Origin: 3, Seq: 8, Params: p,
		Filters: encoding.Advertise(append(base.Filters[20:], randomFilters(rng, 20, p.M)...))}
	// The sender's database has the checksums.
	baseSum, nextSum := base.Checksum(), next.Checksum()
	whole, err := ControlToProto(next)
	require.NoError(b, err)
	there, ok := PredAdDelta(base, next, nextSum)
	require.True(b, ok)
	back, ok := PredAdDelta(next, base, baseSum)
	require.True(b, ok)
	b.Run("send/whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ControlToProto(next); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(proto.Size(whole)), "bytes/ad")
	})
	b.Run("send/delta", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := PredAdDelta(base, next, nextSum); !ok {
				b.Fatal("no delta")
			}
		}
		b.ReportMetric(float64(proto.Size(there)), "bytes/ad")
	})
	b.Run("receive/whole", func(b *testing.B) {
		dec := NewAdDecoder(true, 0)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := dec.Decode(whole); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("receive/delta", func(b *testing.B) {
		dec := NewAdDecoder(true, 0)
		c, err := ControlToProto(base)
		require.NoError(b, err)
		_, err = dec.Decode(c)
		require.NoError(b, err)
		b.ReportAllocs()
		// There and back again, so that each delta finds its base.
		for i := 0; b.Loop(); i++ {
			c := there
			if i%2 == 1 {
				c = back
			}
			if _, err := dec.Decode(c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestOversizedAdvertisementTakesNoMemory: an advertisement of more
// filters than the link takes — one peer's 100,000 one-bit filters took
// 150 MB on every broker — is counted in its wire form and handed on as a
// linkstate.OversizedAd, before a single filter is decoded: whole, or
// rebuilt from a delta. The stand-in names the limit.
func TestOversizedAdvertisementTakesNoMemory(t *testing.T) {
	params := encoding.DefaultParams()
	// Distinct three-bit filters, none covering another.
	filters := func(k, from int) []encoding.Bloom {
		out := make([]encoding.Bloom, k)
		for i := range out {
			p, r := (from+i)%params.M, (from+i)/params.M
			out[i].Set(p)
			out[i].Set((p + 1 + r) % params.M)
			out[i].Set((p + 100 + 7*r) % params.M)
		}
		return encoding.Advertise(out)
	}
	whole, err := ControlToProto(&linkstate.PredAd{Origin: 7, Seq: 9, Params: params, Filters: filters(100000, 0)})
	require.NoError(t, err)
	dec := NewAdDecoder(true, 10000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m, err := dec.Decode(whole)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	o, ok := m.(*linkstate.OversizedAd)
	require.True(t, ok, "got %T", m)
	assert.Equal(t, linkstate.OversizedAd{Origin: 7, Seq: 9, Filters: 100000, Bytes: len(whole.GetPredicateAd().Filters),
		Limit: "10000 filters and 4194304 bytes per advertisement"}, *o)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "decoding took the memory of the filters")

	// Within the bound as a base, past it once a delta adds to it.
	base := &linkstate.PredAd{Origin: 7, Seq: 10, Params: params, Filters: filters(9000, 0)}
	c, err := ControlToProto(base)
	require.NoError(t, err)
	_, err = dec.Decode(c)
	require.NoError(t, err)
	grown := &linkstate.PredAd{Origin: 7, Seq: 11, Params: params, Filters: encoding.Advertise(append(slices.Clone(base.Filters), filters(3000, 9000)...))}
	d, ok := PredAdDelta(base, grown, grown.Checksum())
	require.True(t, ok)
	m, err = dec.Decode(d)
	require.NoError(t, err)
	o, ok = m.(*linkstate.OversizedAd)
	require.True(t, ok, "got %T", m)
	assert.Equal(t, 12000, o.Filters)
}
