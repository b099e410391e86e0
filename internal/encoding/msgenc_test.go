package encoding

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/workload"
	"github.com/stretchr/testify/require"
)

// The encoder's Blooms are EncodeMessage's, message after message, whether
// its cache hits, misses or evicts: over the adversary's names and values
// (escapes, -0, NaN, ±Inf, int and float equal), random numbers, strings
// around the cache's key bound and the paper's workloads, at several Params.
func TestMessageEncoderMatchesEncodeMessage(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	gen := newAdversary(13)
	var msgs []content.Message
	for range 2000 {
		msgs = append(msgs, gen.message())
	}
	long := func() content.Value {
		return content.String(strings.Repeat("x", r.IntN(60)) + string(rune('a'+r.IntN(3))))
	}
	for range 2000 {
		attrs := map[string]content.Value{
			strings.Repeat("n", 1+r.IntN(50)): randomNumber(r),
			advNames[r.IntN(len(advNames))]:   long(),
		}
		msgs = append(msgs, content.MessageFrom(attrs))
	}
	for _, cfg := range []workload.Config{workload.Default(), workload.SingleConstraint(), workload.Ranges()} {
		g, err := workload.New(cfg)
		require.NoError(t, err)
		msgs = append(msgs, g.Messages(2000)...)
	}
	for _, p := range []Params{DefaultParamsV1(), {Scheme: SchemeCatV2, M: 96, K: 2}, {Scheme: SchemeCatV2, M: 256, K: 3}, DefaultParams()} {
		e := NewMessageEncoder(p)
		for i, m := range msgs {
			want := p.EncodeMessage(m)
			if e.Encode(m) != want {
				require.Equal(t, want.String(), e.Encode(m).String(), "message %d %v (M=%d K=%d)", i, m, p.M, p.K)
			}
			// Encoding it again must hit and agree.
			if got := e.Encode(m); got != want {
				require.Equal(t, want.String(), got.String(), "message %d %v again (M=%d K=%d)", i, m, p.M, p.K)
			}
		}
	}
}

// Attributes that differ only in their name's escaping, their kind, or a
// number's trie key never share a cached entry.
func TestFineKeysAreDistinct(t *testing.T) {
	attrs := []content.Attribute{
		{Name: "a=", Value: content.String("b")},
		{Name: "a", Value: content.String("=b")},
		{Name: `a\`, Value: content.String("=b")},
		{Name: "a", Value: content.Int(1)},
		{Name: "a", Value: content.Float(1.5)},
		{Name: "a", Value: content.Int(2)},
		{Name: "a", Value: content.String("\x00\x01")},
		{Name: "a", Value: content.String("\x00\x02")},
	}
	seen := map[string]content.Attribute{}
	for _, a := range attrs {
		key, ok := fineKey(nil, a)
		require.True(t, ok, "%v", a)
		prev, dup := seen[string(key)]
		require.False(t, dup, "%v and %v share the key %q", prev, a, key)
		seen[string(key)] = a
	}
	for _, a := range []content.Attribute{
		{Name: "a", Value: content.String("")},
		{Name: "a", Value: content.Bool(true)},
		{Name: "a", Value: content.Float(math.NaN())},
		{Name: strings.Repeat("a", fineKeyMax), Value: content.Int(1)},
		{Name: "a", Value: content.String(strings.Repeat("a", fineKeyMax))},
	} {
		_, ok := fineKey(nil, a)
		require.False(t, ok, "%v has no fine categories or too long a key", a)
	}
}

func TestMessageEncoderDoesNotAllocateOnceWarm(t *testing.T) {
	g, err := workload.New(workload.Default())
	require.NoError(t, err)
	msgs := g.Messages(64)
	e := NewMessageEncoder(DefaultParams())
	i := 0
	e.Encode(msgs[0])
	require.Zero(t, testing.AllocsPerRun(200, func() { e.Encode(msgs[i%len(msgs)]); i++ }))
}
