package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/qos"
	testingclock "k8s.io/utils/clock/testing"
)

// recorder collects what a link's handler receives: per frame, its
// control messages and its bundles decoded.
type recorder struct {
	mu      sync.Mutex
	frames  []recorded
	bundles int
	fail    error
}

type recorded struct {
	Control []linkstate.Message
	Bundles []*dripv1.Bundle
}

func (r *recorder) handle(_ *Link, control []linkstate.Message, bundles [][]byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := recorded{Control: slices.Clone(control)}
	for _, raw := range bundles {
		var b dripv1.Bundle
		if err := proto.Unmarshal(raw, &b); err != nil {
			return err
		}
		f.Bundles = append(f.Bundles, &b)
	}
	r.frames = append(r.frames, f)
	r.bundles += len(bundles)
	return r.fail
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bundles
}

// received returns the frames received so far, and how many control
// messages they held.
func (r *recorder) received() ([]recorded, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	control := 0
	for _, f := range r.frames {
		control += len(f.Control)
	}
	return slices.Clone(r.frames), control
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

func numbered(i int) []byte {
	b, err := proto.Marshal(&dripv1.Bundle{Source: 1, Seq: uint64(i), Message: []byte(fmt.Sprintf("message %06d with repeated attribute names", i))})
	if err != nil {
		panic(err)
	}
	return b
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
				require.True(t, a.PushBundle(numbered(i)))
				if i%500 == 0 {
					a.PushControl(&dripv1.Control{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{Router: 1, SentAtNs: int64(i)}}})
				}
			}
			// The last hello was pushed after the last bundle, so it may
			// come in a frame of its own after them.
			require.Eventually(t, func() bool {
				_, hellos := rb.received()
				return rb.count() == n && hellos == 4
			}, 5*time.Second, time.Millisecond)
			// Bundles arrive in push order; each frame's control precedes
			// its bundles.
			frames, _ := rb.received()
			want := uint64(1)
			for _, f := range frames {
				for _, bu := range f.Bundles {
					require.Equal(t, want, bu.Seq)
					want++
				}
			}
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

// TestAdvertisementsGoPlain: on a compressed link a frame with a
// predicate advertisement is sent uncompressed and without bundles, the
// bundles around it compressed, and all arrive in order.
func TestAdvertisementsGoPlain(t *testing.T) {
	var ra, rb recorder
	a, b, ma, _ := linkPair(t, true, &ra, &rb)
	for i := 1; i <= 10; i++ {
		require.True(t, a.PushBundle(numbered(i)))
	}
	ad := &linkstate.PredAd{Origin: 1, Seq: 2, Params: encoding.DefaultParams()}
	for i := range 50 {
		var f encoding.Bloom
		f.Set(i)
		f.Set(3 * i)
		ad.Filters = append(ad.Filters, f)
	}
	require.NoError(t, a.SendControl(ad))
	for i := 11; i <= 20; i++ {
		require.True(t, a.PushBundle(numbered(i)))
	}
	var sent []int // plain minus sent bytes of each frame: 0 when it went plain
	for {
		before := testutil.ToFloat64(ma.SentPlainBytes) - testutil.ToFloat64(ma.SentBytes)
		f, ok, err := a.TakeFrame()
		require.NoError(t, err)
		if !ok {
			break
		}
		sent = append(sent, int(testutil.ToFloat64(ma.SentPlainBytes)-testutil.ToFloat64(ma.SentBytes)-before))
		require.NoError(t, b.Deliver(f))
	}
	require.Len(t, rb.frames, 2, "the advertisement's frame, then the bundles' (4 KiB frames)")
	assert.Len(t, rb.frames[0].Control, 1)
	assert.Empty(t, rb.frames[0].Bundles, "no bundles beside an advertisement")
	require.IsType(t, &linkstate.SummedPredAd{}, rb.frames[0].Control[0])
	assert.Equal(t, ad, rb.frames[0].Control[0].(*linkstate.SummedPredAd).Ad)
	assert.Zero(t, sent[0], "the advertisement went plain")
	assert.Len(t, rb.frames[1].Bundles, 20)
	assert.Positive(t, sent[1], "the bundles were compressed")
	for i, bu := range rb.frames[1].Bundles {
		assert.Equal(t, uint64(i+1), bu.Seq)
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
			a.PushBundle(numbered(i))
		}
		frames := 0
		for {
			f, ok, err := a.TakeFrame()
			require.NoError(t, err)
			if !ok {
				break
			}
			frames++
			// A frame in its wire form is a protobuf Frame.
			var asFrame dripv1.Frame
			require.NoError(t, proto.Unmarshal(f, &asFrame))
			require.NoError(t, b.Deliver(bytes.Clone(f)))
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
		a.PushBundle(numbered(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a.Drain(ctx)
	a.Wait()
	b.Wait()
	assert.Equal(t, 5000, rb.count(), "everything queued before Drain arrives")
	assert.False(t, a.PushBundle(numbered(1)), "a drained link takes nothing")
	<-b.Done()
}

// A finished link sends what it had queued, then the finished frame, and
// stays up for what the neighbour sends; what is pushed after Finish is
// refused and counted as dropped on a link down.
func TestLinkFinish(t *testing.T) {
	for _, compress := range []bool{false, true} {
		var ra, rb recorder
		a, b, ma, _ := linkPair(t, compress, &ra, &rb)
		a.Start()
		b.Start()
		for i := 1; i <= 3000; i++ {
			require.True(t, a.PushBundle(numbered(i)))
		}
		a.Finish()
		a.Finish()
		assert.False(t, a.PushBundle(numbered(1)), "a finished link takes nothing more")
		assert.Equal(t, 1.0, testutil.ToFloat64(ma.DroppedDown))
		assert.Zero(t, testutil.ToFloat64(ma.DroppedFull))
		select {
		case <-b.PeerFinishedC():
		case <-time.After(5 * time.Second):
			t.Fatal("the finished frame did not arrive")
		}
		assert.Equal(t, 3000, rb.count(), "every bundle queued before Finish came before the finished frame")
		select {
		case <-a.PeerFinishedC():
			t.Fatal("the neighbour did not finish")
		case <-a.Done():
			t.Fatal("finishing ends only this side's sending")
		default:
		}
		// The neighbour still sends, and then drains: the link ends.
		require.True(t, b.PushBundle(numbered(7)))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b.Drain(ctx)
		cancel()
		a.Wait()
		b.Wait()
		assert.Equal(t, 1, ra.count())
	}

	// In step mode the finished frame is the last TakeFrame returns, once.
	var ra, rb recorder
	a, b, _, _ := linkPair(t, false, &ra, &rb)
	a.PushBundle(numbered(1))
	a.Finish()
	var frames [][]byte
	for {
		f, ok, err := a.TakeFrame()
		require.NoError(t, err)
		if !ok {
			break
		}
		frames = append(frames, f)
	}
	require.Len(t, frames, 2)
	require.NoError(t, b.Deliver(frames[0]))
	select {
	case <-b.PeerFinishedC():
		t.Fatal("finished before the last frame")
	default:
	}
	require.NoError(t, b.Deliver(frames[1]))
	<-b.PeerFinishedC()
	assert.Equal(t, 1, rb.count())
	a.Close(nil)
	b.Close(nil)
}

func TestLinkCloseKeepsUnsentAndHandlerErrorCloses(t *testing.T) {
	var ra, rb recorder
	a, b, ma, _ := linkPair(t, false, &ra, &rb)
	assert.Zero(t, a.Unsent(nil), "nothing before the link ends")
	for i := 1; i <= 10; i++ {
		a.PushBundle(numbered(i))
	}
	a.Close(errors.New("gone"))
	a.Close(errors.New("twice"))
	assert.Equal(t, 10, a.UnsentAtClose(), "for the broker's log of the link's end")
	assert.Equal(t, 0.0, testutil.ToFloat64(ma.QueueBytes), "out of the owner's account at once")
	assert.Zero(t, testutil.ToFloat64(ma.DroppedDown), "not dropped until the owner says so")

	// The owner takes them back, oldest first, as pushed; what it
	// refuses is dropped, and counted once.
	var taken [][]byte
	dropped := a.Unsent(func(raw []byte) bool {
		if len(taken) == 7 {
			return false
		}
		taken = append(taken, raw)
		return true
	})
	assert.Equal(t, 3, dropped)
	require.Len(t, taken, 7)
	for i, raw := range taken {
		assert.Equal(t, numbered(i+1), raw)
	}
	assert.Equal(t, float64(3), testutil.ToFloat64(ma.DroppedDown))
	assert.Zero(t, a.Unsent(nil), "handed once")
	assert.Equal(t, float64(3), testutil.ToFloat64(ma.DroppedDown))
	<-b.Done()

	// Without an owner to take them, all are dropped.
	ra, rb = recorder{}, recorder{}
	a, _, ma, _ = linkPair(t, false, &ra, &rb)
	a.PushBundle(numbered(1))
	a.PushUrgent(numbered(2), qos.Urgency{Deadline: 5})
	a.Close(nil)
	assert.Equal(t, 2, a.Unsent(nil))
	assert.Equal(t, float64(2), testutil.ToFloat64(ma.DroppedDown))

	// A handler error ends the link with that error.
	ra, rb = recorder{}, recorder{fail: errors.New("malformed")}
	a, b, _, _ = linkPair(t, false, &ra, &rb)
	a.Start()
	b.Start()
	a.PushBundle(numbered(1))
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
	marshal := func(f *dripv1.Frame) []byte { b, err := proto.Marshal(f); require.NoError(t, err); return b }
	assert.ErrorContains(t, b.Deliver(marshal(&dripv1.Frame{Deflated: []byte{1}, InflatedSize: 1})), "did not offer compression")
	assert.ErrorContains(t, b.Deliver(marshal(&dripv1.Frame{Open: open(1)})), "second Open")
	_, err = NewLink(cb, LinkConfig{}, rb.handle)
	assert.ErrorContains(t, err, "must be positive")
	b.Close(nil)
}

// backpressured starts a link whose queue holds about three bundles, one
// per frame, sending into a pipe nobody reads until the test does.
func backpressured(t *testing.T, bp Backpressure) (*Link, *memConn, LinkMetrics) {
	t.Helper()
	ca, cb := memPipe(open(1), open(2))
	m := newMetrics()
	size := len(numbered(1))
	l, err := NewLink(ca, LinkConfig{QueueBytes: 3 * size, MaxFrameBytes: size, Backpressure: bp, Metrics: m},
		func(*Link, []linkstate.Message, [][]byte) error { return nil })
	require.NoError(t, err)
	l.Start()
	t.Cleanup(func() { l.Close(nil); l.Wait() })
	return l, cb, m
}

// TestLinkBackpressureSlowsProducers: while the writer keeps sending, a
// full queue makes producers wait instead of dropping, and everything
// arrives in order; without backpressure the same load drops.
func TestLinkBackpressureSlowsProducers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bp    Backpressure
		drops bool
	}{
		{"waits", Backpressure{Stalled: 5 * time.Second, Behind: 5 * time.Second}, false},
		{"drops without", Backpressure{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, peer, m := backpressured(t, tc.bp)
			const n = 200
			got := make(chan []uint64, 1)
			go func() {
				var seqs []uint64
				for range time.Tick(100 * time.Microsecond) {
					raw, err := peer.Recv()
					if err != nil {
						break
					}
					var f dripv1.Frame
					if proto.Unmarshal(raw, &f) != nil {
						break
					}
					for _, b := range f.Bundles {
						seqs = append(seqs, b.Seq)
					}
					if len(seqs) > 0 && seqs[len(seqs)-1] == n {
						break
					}
				}
				got <- seqs
			}()
			queued := 0
			for i := 1; i <= n; i++ {
				if l.PushBundle(numbered(i)) {
					queued++
				}
			}
			dropped := testutil.ToFloat64(m.DroppedFull)
			assert.Equal(t, float64(n-queued), dropped)
			if !tc.drops {
				assert.Equal(t, n, queued, "a producer waits for a writer that sends")
				select {
				case seqs := <-got:
					want := make([]uint64, n)
					for i := range want {
						want[i] = uint64(i + 1)
					}
					assert.Equal(t, want, seqs)
				case <-time.After(10 * time.Second):
					t.Fatal("bundles did not arrive")
				}
				return
			}
			assert.Positive(t, dropped, "a full queue drops when producers may not wait")
		})
	}
}

// TestLinkBackpressureStalledWriterDrops: a writer blocked in a send for
// longer than Stalled makes producers drop rather than wait out Behind, so
// brokers waiting on each other in a cycle come free.
func TestLinkBackpressureStalledWriterDrops(t *testing.T) {
	l, _, m := backpressured(t, Backpressure{Stalled: 50 * time.Millisecond, Behind: time.Minute})
	start := time.Now()
	queued := 0
	for i := 1; i <= 40 && time.Since(start) < 30*time.Second; i++ {
		if l.PushBundle(numbered(i)) {
			queued++
		}
	}
	// 16 frames fill the pipe, one more is in the writer's hands, three
	// wait in the queue.
	assert.Equal(t, 20, queued)
	assert.Equal(t, float64(20), testutil.ToFloat64(m.DroppedFull))
	assert.Less(t, time.Since(start), 20*time.Second, "no producer waited out Behind")
}

// TestLinkBackpressureCloseWakes: closing the link frees a waiting
// producer at once, with its bundle counted as dropped on a link down.
func TestLinkBackpressureCloseWakes(t *testing.T) {
	l, _, m := backpressured(t, Backpressure{Stalled: time.Minute, Behind: time.Minute})
	for i := 1; i <= 20; i++ {
		require.True(t, l.PushBundle(numbered(i)))
	}
	result := make(chan bool, 1)
	go func() { result <- l.PushBundle(numbered(21)) }()
	select {
	case <-result:
		t.Fatal("a full queue's producer did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	l.Close(nil)
	select {
	case ok := <-result:
		assert.False(t, ok)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake the waiting producer")
	}
	assert.Zero(t, testutil.ToFloat64(m.DroppedFull), "refused by a closed link, not a full one")
	assert.GreaterOrEqual(t, testutil.ToFloat64(m.DroppedDown), 1.0)
}

// TestLinkAccountsQueuedBytes: the owner's account follows the bytes
// queued — up as bundles are queued, down as frames take them or as a
// closed link discards them — and ends at zero.
func TestLinkAccountsQueuedBytes(t *testing.T) {
	oa, ob := open(1), open(2)
	ca, _ := memPipe(oa, ob)
	var account int64
	l, err := NewLink(ca, LinkConfig{QueueBytes: 1 << 20, MaxFrameBytes: 256, Account: func(d int64) { account += d }}, nil)
	require.NoError(t, err)
	for i := 1; i <= 20; i++ {
		require.True(t, l.PushBundle(numbered(i)))
		require.True(t, l.PushUrgent(numbered(100+i), qos.Urgency{SendBy: int64(i)}))
		assert.Equal(t, int64(l.QueuedBytes()), account, "after push %d", i)
	}
	for range 3 {
		_, ok, err := l.TakeFrame()
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, int64(l.QueuedBytes()), account, "after a frame")
	}
	assert.Positive(t, account)
	l.Close(errors.New("gone"))
	assert.Zero(t, account, "a closed link's queue leaves the account")
}

// TestLinkIsHeardWhileItsReaderWaits: a reader held in the handler (the
// broker's control plane behind, its event queue full) reads nothing, so
// the link's silence is this end's: LastReceived is now until the handler
// returns, and then the time it returned.
func TestLinkIsHeardWhileItsReaderWaits(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Unix(1000, 0))
	ca, cb := memPipe(open(1), open(2))
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	b, err := NewLink(cb, LinkConfig{QueueBytes: 1 << 16, MaxFrameBytes: 1 << 16, Metrics: newMetrics(), Clock: clock},
		func(*Link, []linkstate.Message, [][]byte) error { entered <- struct{}{}; <-release; return nil })
	require.NoError(t, err)
	assert.Zero(t, b.LastReceived(), "nothing yet")
	frame, err := AppendFrame(nil, []*dripv1.Control{{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{Router: 1}}}}, nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- b.Deliver(frame) }()
	<-entered
	clock.Step(5 * time.Second)
	heard := b.LastReceived()
	assert.Equal(t, b.Now(), heard, "held in the handler: heard now")
	close(release)
	require.NoError(t, <-done)
	clock.Step(4 * time.Second)
	assert.Equal(t, heard, b.LastReceived(), "then the time the handler returned")
	ca.Close(nil)
}

func TestIdleLinkSendsKeepalives(t *testing.T) {
	// Step mode, on a fake clock: an idle link sends an empty frame once
	// it has sent nothing for its keepalive interval, and a link that
	// sends data sends none; the far end takes the empty frame as a sign
	// of life without calling its handler.
	clock := testingclock.NewFakeClock(time.Unix(1000, 0))
	ca, cb := memPipe(open(1), open(2))
	ma := newMetrics()
	ma.SentKeepalives = prometheus.NewCounter(prometheus.CounterOpts{Name: "k"})
	a, err := NewLink(ca, LinkConfig{QueueBytes: 1 << 16, MaxFrameBytes: 1 << 16, Metrics: ma, Clock: clock, Keepalive: 20 * time.Millisecond},
		func(*Link, []linkstate.Message, [][]byte) error { return nil })
	require.NoError(t, err)
	var rb recorder
	b, err := NewLink(cb, LinkConfig{QueueBytes: 1 << 16, MaxFrameBytes: 1 << 16, Metrics: newMetrics(), Clock: clock}, rb.handle)
	require.NoError(t, err)

	take := func() ([]byte, bool) {
		f, ok, err := a.TakeFrame()
		require.NoError(t, err)
		return f, ok
	}
	clock.Step(20 * time.Millisecond)
	f, ok := take()
	require.True(t, ok, "idle since the link was made")
	assert.Empty(t, f)
	_, ok = take()
	assert.False(t, ok, "not again at once")

	clock.Step(15 * time.Millisecond)
	a.PushBundle(numbered(1))
	_, ok = take()
	require.True(t, ok)
	clock.Step(15 * time.Millisecond)
	_, ok = take()
	assert.False(t, ok, "data went 15 ms ago")
	clock.Step(5 * time.Millisecond)
	f, ok = take()
	require.True(t, ok, "20 ms after the data")
	assert.Empty(t, f)
	assert.Equal(t, 2.0, testutil.ToFloat64(ma.SentKeepalives))

	clock.Step(time.Second)
	require.NoError(t, b.Deliver(bytes.Clone(f)))
	assert.Equal(t, b.Now(), b.LastReceived(), "heard")
	assert.Empty(t, rb.frames, "nothing for the handler")
	a.Close(nil)
	b.Close(nil)
}

func TestWriterSendsKeepalivesWhileIdle(t *testing.T) {
	// The writer goroutine, in a synctest bubble: over 200 ms of an idle
	// link with 20 ms keepalives, the far end hears the link at least
	// every 20 ms; over the same time with data every 10 ms, it hears no
	// keepalive.
	synctest.Test(t, func(t *testing.T) {
		for _, busy := range []bool{false, true} {
			ca, cb := memPipe(open(1), open(2))
			ma := newMetrics()
			ma.SentKeepalives = prometheus.NewCounter(prometheus.CounterOpts{Name: "k"})
			a, err := NewLink(ca, LinkConfig{QueueBytes: 1 << 16, MaxFrameBytes: 1 << 16, Metrics: ma, Keepalive: 20 * time.Millisecond},
				func(*Link, []linkstate.Message, [][]byte) error { return nil })
			require.NoError(t, err)
			var rb recorder
			b, err := NewLink(cb, LinkConfig{QueueBytes: 1 << 16, MaxFrameBytes: 1 << 16, Metrics: newMetrics()}, rb.handle)
			require.NoError(t, err)
			a.Start()
			b.Start()
			var worst int64
			for i := range 20 {
				if busy {
					a.PushBundle(numbered(i))
				}
				time.Sleep(10 * time.Millisecond)
				synctest.Wait()
				if i > 0 {
					worst = max(worst, b.Now()-b.LastReceived())
				}
			}
			if busy {
				assert.Zero(t, testutil.ToFloat64(ma.SentKeepalives), "data keeps the link alive")
				assert.Equal(t, 20, rb.count())
			} else {
				assert.InDelta(t, 10, testutil.ToFloat64(ma.SentKeepalives), 1, "one every 20 ms")
			}
			assert.LessOrEqual(t, worst, int64(20*time.Millisecond), "never silent longer than the keepalive")
			a.Close(nil)
			a.Wait()
			b.Wait()
		}
	})
}

// TestLinkCongestedFromMarkBytes: a link is Congested while what it has
// queued reaches LinkConfig.MarkBytes, and never without it.
func TestLinkCongestedFromMarkBytes(t *testing.T) {
	var ra, rb recorder
	ca, _ := memPipe(open(1), open(2))
	size := len(numbered(1))
	a, err := NewLink(ca, LinkConfig{QueueBytes: 1 << 20, MaxFrameBytes: 4 << 10, MarkBytes: 3 * size, Dialed: true}, ra.handle)
	require.NoError(t, err)
	var seen []bool
	for i := 1; i <= 4; i++ {
		seen = append(seen, a.Congested())
		require.True(t, a.PushBundle(numbered(i)))
	}
	seen = append(seen, a.Congested())
	assert.Equal(t, []bool{false, false, false, true, true}, seen)
	f, ok, err := a.TakeFrame()
	require.NoError(t, err)
	require.True(t, ok)
	require.NotEmpty(t, f)
	assert.False(t, a.Congested(), "sent: the queue is empty again")
	a.Close(nil)

	b, _, _, _ := linkPair(t, false, &ra, &rb)
	for i := 1; i <= 100; i++ {
		b.PushBundle(numbered(i))
	}
	assert.False(t, b.Congested(), "no marks without MarkBytes")
	b.Close(nil)
}
