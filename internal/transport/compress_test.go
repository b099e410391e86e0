package transport

import (
	"compress/flate"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/clientapi"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/workload"
)

// workloadFrames returns n frames of the workload's messages as bundles,
// of 1 to maxBundles bundles each, some with a control message, in their
// wire form.
func workloadFrames(t testing.TB, rng *rand.Rand, n, maxBundles int) [][]byte {
	gen, err := workload.New(workload.SingleConstraint())
	require.NoError(t, err)
	var out [][]byte
	for range n {
		f := &dripv1.Frame{}
		for range 1 + rng.IntN(maxBundles) {
			b, err := proto.Marshal(clientapi.MessageToProto(gen.Message()))
			require.NoError(t, err)
			f.Bundles = append(f.Bundles, &dripv1.Bundle{Source: rng.Uint32N(64), Destinations: []uint64{rng.Uint64()},
				HopsLeft: 8, Message: b, PublishedUnixNano: rng.Int64()})
		}
		if rng.IntN(4) == 0 {
			f.Control = append(f.Control, &dripv1.Control{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{Router: 3, SentAtNs: rng.Int64()}}})
		}
		raw, err := proto.Marshal(f)
		require.NoError(t, err)
		out = append(out, raw)
	}
	return out
}

// TestFrameCompressionRoundTrip: a stream of frames of every size — one
// bundle, and frames far beyond the 32 KB DEFLATE window — inflates back
// to the same frames, in order, through one compressor and one
// decompressor; and the seed's workload compresses well.
func TestFrameCompressionRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxBundles int
		wantRatio  float64 // compressed over plain, at most
	}{
		{"single bundles", 1, 0.6},
		{"small frames", 8, 0.5},
		{"large frames", 1500, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.maxBundles)))
			frames := workloadFrames(t, rng, min(300, 60000/tc.maxBundles), tc.maxBundles)
			c, err := NewFrameCompressor(flate.DefaultCompression)
			require.NoError(t, err)
			d := NewFrameDecompressor(0)
			plain, compressed := 0, 0
			for i, f := range frames {
				cf, err := c.Compress(f)
				require.NoError(t, err)
				plain, compressed = plain+len(f), compressed+len(cf)
				// A compressed frame is a protobuf Frame too.
				var asFrame dripv1.Frame
				require.NoError(t, proto.Unmarshal(cf, &asFrame))
				assert.Equal(t, uint32(len(f)), asFrame.InflatedSize)
				in, err := d.Decompress(cf)
				require.NoError(t, err, "frame %d", i)
				require.Equal(t, f, in, "frame %d differs after the round trip", i)
			}
			ratio := float64(compressed) / float64(plain)
			t.Logf("%d frames: %d bytes plain, %d compressed (%.2f)", len(frames), plain, compressed, ratio)
			assert.Less(t, ratio, tc.wantRatio)
		})
	}
}

func TestFrameDecompressorPassesPlainFrames(t *testing.T) {
	d := NewFrameDecompressor(0)
	f, err := proto.Marshal(&dripv1.Frame{Bundles: []*dripv1.Bundle{{Source: 1}}})
	require.NoError(t, err)
	got, err := d.Decompress(f)
	require.NoError(t, err)
	assert.Equal(t, &f[0], &got[0], "the same bytes, not a copy")
}

// TestFrameDecompressorRejects: each corruption is an error naming the
// problem, and after one the decompressor refuses everything (the stream
// cannot be resynchronised; the link ends).
func TestFrameDecompressorRejects(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	frames := workloadFrames(t, rng, 2, 4)
	compress := func() (*FrameCompressor, *dripv1.Frame) {
		c, err := NewFrameCompressor(flate.BestSpeed)
		require.NoError(t, err)
		raw, err := c.Compress(frames[0])
		require.NoError(t, err)
		var cf dripv1.Frame
		require.NoError(t, proto.Unmarshal(raw, &cf))
		return c, &cf
	}
	for _, tc := range []struct {
		name  string
		limit int
		edit  func(*dripv1.Frame)
		want  string
	}{
		{"oversized", 16, func(*dripv1.Frame) {}, "more than the limit"},
		{"size too large", 0, func(f *dripv1.Frame) { f.InflatedSize += 10 }, "ends before"},
		// What is detected is the truncated frame that results.
		{"size too small", 0, func(f *dripv1.Frame) { f.InflatedSize -= 10 }, "truncated"},
		{"mixed with plain fields", 0, func(f *dripv1.Frame) { f.Bundles = []*dripv1.Bundle{{}} }, "plain fields"},
		{"garbage", 0, func(f *dripv1.Frame) { f.Deflated = []byte{0xff, 0xff, 0xff, 0xff} }, ""},
		{"trailing garbage", 0, func(f *dripv1.Frame) { f.Deflated = append(f.Deflated, make([]byte, 100)...) }, "left after"},
		{"truncated", 0, func(f *dripv1.Frame) { f.Deflated = f.Deflated[:len(f.Deflated)/2] }, "ends before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cf := compress()
			tc.edit(cf)
			d := NewFrameDecompressor(tc.limit)
			raw, err := proto.Marshal(cf)
			require.NoError(t, err)
			_, err = d.Decompress(raw)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			_, again := d.Decompress(nil)
			assert.Error(t, again, "a broken stream stays broken")
		})
	}
	// A compressed Open smuggled inside is refused.
	c, err := NewFrameCompressor(flate.BestSpeed)
	require.NoError(t, err)
	raw, err := proto.Marshal(&dripv1.Frame{Open: &dripv1.Open{RouterId: 1}})
	require.NoError(t, err)
	c.out.Reset()
	_, err = c.w.Write(raw)
	require.NoError(t, err)
	require.NoError(t, c.w.Flush())
	smuggled, err := proto.Marshal(&dripv1.Frame{Deflated: c.out.Bytes(), InflatedSize: uint32(len(raw))})
	require.NoError(t, err)
	_, err = NewFrameDecompressor(0).Decompress(smuggled)
	assert.ErrorContains(t, err, "Open or compressed")
}

// FuzzFrameDecompressor: whatever a peer sends, Decompress returns a frame
// or an error, never panics, and never inflates beyond its limit.
func FuzzFrameDecompressor(f *testing.F) {
	c, err := NewFrameCompressor(flate.BestSpeed)
	require.NoError(f, err)
	for _, fr := range workloadFrames(f, rand.New(rand.NewPCG(3, 3)), 3, 3) {
		raw, err := c.Compress(fr)
		require.NoError(f, err)
		var cf dripv1.Frame
		require.NoError(f, proto.Unmarshal(raw, &cf))
		f.Add(cf.Deflated, cf.InflatedSize, []byte(nil), uint32(0))
	}
	f.Add([]byte{1, 0, 0, 0xff, 0xff}, uint32(0), []byte{0, 0, 0xff, 0xff}, uint32(5))
	f.Fuzz(func(t *testing.T, d1 []byte, n1 uint32, d2 []byte, n2 uint32) {
		d := NewFrameDecompressor(1 << 16)
		for _, fr := range []*dripv1.Frame{{Deflated: d1, InflatedSize: n1}, {Deflated: d2, InflatedSize: n2}} {
			raw, err := proto.Marshal(fr)
			require.NoError(t, err)
			out, err := d.Decompress(raw)
			if err != nil {
				return
			}
			require.LessOrEqual(t, len(out), 1<<16)
		}
	})
}

func BenchmarkFrameCompression(b *testing.B) {
	rng := rand.New(rand.NewPCG(4, 4))
	frames := workloadFrames(b, rng, 512, 1)
	for _, level := range []int{flate.BestSpeed, flate.DefaultCompression} {
		b.Run(map[int]string{flate.BestSpeed: "level=1", flate.DefaultCompression: "level=default"}[level], func(b *testing.B) {
			benchCompression(b, frames, level, NewFrameDecompressor(0))
		})
	}
}

// TestFrameDecompressorWindowBoundary: when a frame's inflated bytes end
// exactly where the 32 KiB DEFLATE window fills, the inflater hands them
// out before it has read the end of the frame's sync flush. Those bytes
// are the next frame's business, not a corrupt stream (a check that
// treated them as corruption closed a link about once per 32 K frames).
func TestFrameDecompressorWindowBoundary(t *testing.T) {
	sized := func(n int) []byte {
		f := &dripv1.Frame{Bundles: []*dripv1.Bundle{{Message: make([]byte, n)}}}
		for k := n; proto.Size(f) != n && k > 0; k-- {
			f.Bundles[0].Message = make([]byte, k)
			if proto.Size(f) <= n {
				break
			}
		}
		require.Equal(t, n, proto.Size(f), "cannot size a frame to %d bytes", n)
		raw, err := proto.Marshal(f)
		require.NoError(t, err)
		return raw
	}
	for _, first := range []int{1 << 15, 1<<15 - 1000} {
		c, err := NewFrameCompressor(flate.BestSpeed)
		require.NoError(t, err)
		d := NewFrameDecompressor(0)
		frames := [][]byte{sized(first)}
		if first < 1<<15 {
			frames = append(frames, sized(1000))
		}
		frames = append(frames, sized(300), sized(1<<16), sized(100))
		for i, f := range frames {
			cf, err := c.Compress(f)
			require.NoError(t, err)
			got, err := d.Decompress(cf)
			require.NoError(t, err, "frame %d", i)
			require.Equal(t, f, got, "frame %d", i)
		}
	}
}

// adFrames returns one frame per router, each carrying that router's
// predicate advertisement: clients of 20 one-constraint filters each, the
// 42-site lab's subscribers (docs/results/experiments/scale).
func adFrames(tb testing.TB, routers, clients int) [][]byte {
	cfg := workload.SingleConstraint()
	cfg.FiltersPerPredicate = 20
	gen, err := workload.New(cfg)
	require.NoError(tb, err)
	p := encoding.DefaultParams()
	var out [][]byte
	for r := range routers {
		var filters []encoding.Bloom
		for range clients {
			filters = append(filters, p.EncodePredicate(gen.Predicate())...)
		}
		c, err := ControlToProto(&linkstate.PredAd{Origin: uint32(r), Seq: 1, Params: p, Filters: encoding.Advertise(filters)})
		require.NoError(tb, err)
		raw, err := proto.Marshal(&dripv1.Frame{Control: []*dripv1.Control{c}})
		require.NoError(tb, err)
		out = append(out, raw)
	}
	return out
}

// BenchmarkAdvertisementCompression is what compressing the frames of a
// flood of predicate advertisements costs a link, and what it saves.
func BenchmarkAdvertisementCompression(b *testing.B) {
	levels := map[int]string{flate.HuffmanOnly: "huffman", flate.BestSpeed: "level=1", flate.DefaultCompression: "level=default"}
	for _, clients := range []int{10, 50} {
		frames := adFrames(b, 42, clients)
		for _, level := range []int{flate.HuffmanOnly, flate.BestSpeed, flate.DefaultCompression} {
			b.Run(fmt.Sprintf("clients=%d/%s", clients, levels[level]), func(b *testing.B) {
				benchCompression(b, frames, level, nil)
			})
		}
	}
}

// benchCompression compresses frames in turn at level, and inflates each
// again with d unless it is nil, reporting the compressed-to-plain ratio.
func benchCompression(b *testing.B, frames [][]byte, level int, d *FrameDecompressor) {
	c, err := NewFrameCompressor(level)
	require.NoError(b, err)
	plain, packed := 0, 0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f := frames[i%len(frames)]
		cf, err := c.Compress(f)
		if err != nil {
			b.Fatal(err)
		}
		if d != nil {
			if _, err := d.Decompress(cf); err != nil {
				b.Fatal(err)
			}
		}
		plain, packed = plain+len(f), packed+len(cf)
	}
	b.SetBytes(int64(plain / max(b.N, 1)))
	b.ReportMetric(float64(packed)/float64(plain), "ratio")
}
