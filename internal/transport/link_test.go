package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

// recorder collects what a link's handler receives.
type recorder struct {
	mu      sync.Mutex
	frames  []*dripv1.Frame
	bundles int
	fail    error
}

func (r *recorder) handle(_ *Link, f *dripv1.Frame) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, f)
	r.bundles += len(f.GetBundles())
	return r.fail
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bundles
}

func newMetrics() LinkMetrics {
	c := func() prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: "c"}) }
	return LinkMetrics{SentBytes: c(), SentPlainBytes: c(), RecvBytes: c(), SentBundles: c(), RecvBundles: c(),
		SentControl: c(), DroppedFull: c(), DroppedDown: c(), QueueBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})}
}

// linkPair returns two started or unstarted links over an in-memory pipe.
func linkPair(t *testing.T, compress bool, ra, rb *recorder) (a, b *Link, ma, mb LinkMetrics) {
	t.Helper()
	oa, ob := open(1), open(2)
	if compress {
		oa.Compression = []string{CompressionDeflate}
		ob.Compression = []string{CompressionDeflate}
	}
	ca, cb := memPipe(oa, ob)
	ma, mb = newMetrics(), newMetrics()
	var err error
	a, err = NewLink(ca, LinkConfig{QueueBytes: 1 << 20, MaxFrameBytes: 4 << 10, Compression: compress, Dialed: true, Metrics: ma}, ra.handle)
	require.NoError(t, err)
	b, err = NewLink(cb, LinkConfig{QueueBytes: 1 << 20, MaxFrameBytes: 4 << 10, Compression: compress, Metrics: mb}, rb.handle)
	require.NoError(t, err)
	return a, b, ma, mb
}

func numbered(i int) *dripv1.Bundle {
	return &dripv1.Bundle{Source: 1, Seq: uint64(i), Message: []byte(fmt.Sprintf("message %d with repeated attribute names", i))}
}

func TestLinkCarriesControlAndBundlesInOrder(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("compress=%v", compress), func(t *testing.T) {
			var ra, rb recorder
			a, b, ma, mb := linkPair(t, compress, &ra, &rb)
			assert.Equal(t, compress, a.Compressed())
			a.Start()
			b.Start()
			const n = 2000
			for i := 1; i <= n; i++ {
				require.True(t, a.PushBundle(numbered(i), proto.Size(numbered(i))))
				if i%500 == 0 {
					a.PushControl(&dripv1.Control{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{Router: 1, SentAtNs: int64(i)}}})
				}
			}
			require.Eventually(t, func() bool { return rb.count() == n }, 5*time.Second, time.Millisecond)
			// Bundles arrive in push order; each frame's control precedes
			// its bundles.
			want := uint64(1)
			hellos := 0
			for _, f := range rb.frames {
				hellos += len(f.Control)
				for _, bu := range f.Bundles {
					require.Equal(t, want, bu.Seq)
					want++
				}
			}
			assert.Equal(t, 4, hellos)
			assert.Equal(t, float64(n), testutil.ToFloat64(ma.SentBundles))
			assert.Equal(t, float64(n), testutil.ToFloat64(mb.RecvBundles))
			assert.Equal(t, testutil.ToFloat64(ma.SentBytes), testutil.ToFloat64(mb.RecvBytes))
			if compress {
				assert.Less(t, testutil.ToFloat64(ma.SentBytes), testutil.ToFloat64(ma.SentPlainBytes))
			}
			a.Close(nil)
			a.Wait()
			b.Wait()
		})
	}
}

// TestLinkStepModeMatchesGoroutines: a driver moving frames with TakeFrame
// and Deliver delivers the same bundles in the same order as the
// goroutines do, compressed or not.
func TestLinkStepMode(t *testing.T) {
	for _, compress := range []bool{false, true} {
		var ra, rb recorder
		a, b, _, mb := linkPair(t, compress, &ra, &rb)
		for i := 1; i <= 300; i++ {
			a.PushBundle(numbered(i), proto.Size(numbered(i)))
		}
		frames := 0
		for {
			f, ok, err := a.TakeFrame()
			require.NoError(t, err)
			if !ok {
				break
			}
			frames++
			// Through the wire encoding, as gRPC carries it.
			raw, err := proto.Marshal(f)
			require.NoError(t, err)
			var got dripv1.Frame
			require.NoError(t, proto.Unmarshal(raw, &got))
			require.NoError(t, b.Deliver(&got))
		}
		assert.Greater(t, frames, 1, "4 KiB frames split 300 bundles")
		assert.Equal(t, 300, rb.count())
		assert.Equal(t, float64(300), testutil.ToFloat64(mb.RecvBundles))
		a.Close(nil)
	}
}

func TestLinkDrainDeliversQueuedData(t *testing.T) {
	var ra, rb recorder
	a, b, _, _ := linkPair(t, true, &ra, &rb)
	a.Start()
	b.Start()
	for i := 1; i <= 5000; i++ {
		a.PushBundle(numbered(i), proto.Size(numbered(i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a.Drain(ctx)
	a.Wait()
	b.Wait()
	assert.Equal(t, 5000, rb.count(), "everything queued before Drain arrives")
	assert.False(t, a.PushBundle(numbered(1), 10), "a drained link takes nothing")
	<-b.Done()
}

func TestLinkCloseCountsDroppedAndHandlerErrorCloses(t *testing.T) {
	var ra, rb recorder
	a, b, ma, _ := linkPair(t, false, &ra, &rb)
	for i := 1; i <= 10; i++ {
		a.PushBundle(numbered(i), 100)
	}
	a.Close(errors.New("gone"))
	a.Close(errors.New("twice"))
	assert.Equal(t, float64(10), testutil.ToFloat64(ma.DroppedDown), "counted once")
	assert.Equal(t, 0.0, testutil.ToFloat64(ma.QueueBytes))
	<-b.Done()

	// A handler error ends the link with that error.
	ra, rb = recorder{}, recorder{fail: errors.New("malformed")}
	a, b, _, _ = linkPair(t, false, &ra, &rb)
	a.Start()
	b.Start()
	a.PushBundle(numbered(1), 10)
	<-a.Done()
	a.Wait()
	b.Wait()
	assert.ErrorContains(t, b.Err(), "malformed")
}

func TestLinkRefusesCompressedFramesItDidNotOffer(t *testing.T) {
	var rb recorder
	_, cb := memPipe(open(1), open(2))
	b, err := NewLink(cb, LinkConfig{QueueBytes: 100, MaxFrameBytes: 100}, rb.handle)
	require.NoError(t, err)
	assert.ErrorContains(t, b.Deliver(&dripv1.Frame{Deflated: []byte{1}, InflatedSize: 1}), "did not offer compression")
	assert.ErrorContains(t, b.Deliver(&dripv1.Frame{Open: open(1)}), "second Open")
	_, err = NewLink(cb, LinkConfig{}, rb.handle)
	assert.ErrorContains(t, err, "must be positive")
	b.Close(nil)
}
