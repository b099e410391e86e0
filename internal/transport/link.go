package transport

import (
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

// LinkMetrics are one link's counters, resolved by the owner (per peer
// label) so the data path never looks a label up. Nil fields count nothing.
type LinkMetrics struct {
	SentBytes      prometheus.Counter // frames as sent, after compression
	SentPlainBytes prometheus.Counter // frames before compression
	RecvBytes      prometheus.Counter
	SentBundles    prometheus.Counter
	RecvBundles    prometheus.Counter
	SentControl    prometheus.Counter
	DroppedFull    prometheus.Counter // bundles refused by a full queue
	DroppedDown    prometheus.Counter // bundles queued when the link went down
	QueueBytes     prometheus.Gauge
}

func inc(c prometheus.Counter, n int) {
	if c != nil && n > 0 {
		c.Add(float64(n))
	}
}

// LinkConfig configures a Link.
type LinkConfig struct {
	// QueueBytes bounds the bundles queued (Queue).
	QueueBytes int
	// MaxFrameBytes bounds the bundles batched into one frame.
	MaxFrameBytes int
	// Compression says this side offered CompressionDeflate in its Open:
	// it then accepts compressed frames, and compresses what it sends if
	// the neighbour offered too.
	Compression bool
	// Dialed says this side dialled the link; it decides which of two
	// simultaneous links to one neighbour survives.
	Dialed  bool
	Metrics LinkMetrics
}

// FrameHandler receives each frame the neighbour sends, decompressed, in
// order, from one goroutine. An error closes the link with it.
type FrameHandler func(l *Link, f *dripv1.Frame) error

// Link is an established link to a neighbour: the connection, its send
// queue (control first, data bounded in bytes), the compression both sides
// agreed on, and the byte counters. Start runs it with a writer and a
// reader goroutine; a deterministic test driver instead moves frames with
// TakeFrame and Deliver, so the same code runs in virtual time.
type Link struct {
	conn     Conn
	cfg      LinkConfig
	handle   FrameHandler
	queue    *Queue
	comp     *FrameCompressor   // what this side sends, when both agreed
	decomp   *FrameDecompressor // what the neighbour sends, when this side offered
	writerMu sync.Mutex         // TakeFrame and the writer goroutine share the compressor
	readerMu sync.Mutex         // Deliver and the reader goroutine share the decompressor

	started    bool
	writerDone chan struct{} // closed when the writer has sent its last frame
	readerDone chan struct{}
	closeOnce  sync.Once
}

// NewLink wraps an established connection. It does not start goroutines.
func NewLink(c Conn, cfg LinkConfig, handle FrameHandler) (*Link, error) {
	if cfg.QueueBytes <= 0 || cfg.MaxFrameBytes <= 0 {
		return nil, fmt.Errorf("link to %s: queue bytes %d and max frame bytes %d must be positive",
			c.Remote().GetRouterName(), cfg.QueueBytes, cfg.MaxFrameBytes)
	}
	l := &Link{
		conn: c, cfg: cfg, handle: handle, queue: NewQueue(cfg.QueueBytes),
		writerDone: make(chan struct{}), readerDone: make(chan struct{}),
	}
	if cfg.Compression {
		l.decomp = NewFrameDecompressor(0)
		if slices.Contains(c.Remote().GetCompression(), CompressionDeflate) {
			var err error
			if l.comp, err = NewFrameCompressor(flate.DefaultCompression); err != nil {
				return nil, err
			}
		}
	}
	if g := cfg.Metrics.QueueBytes; g != nil {
		g.Set(0)
	}
	return l, nil
}

// Peer is the neighbour's router ID.
func (l *Link) Peer() uint32 { return l.conn.Remote().GetRouterId() }

// Name is the neighbour's router name.
func (l *Link) Name() string { return l.conn.Remote().GetRouterName() }

// Remote is the neighbour's Open.
func (l *Link) Remote() *dripv1.Open { return l.conn.Remote() }

// Dialed says whether this side dialled the link.
func (l *Link) Dialed() bool { return l.cfg.Dialed }

// Compressed says whether frames to the neighbour are compressed.
func (l *Link) Compressed() bool { return l.comp != nil }

// PushControl queues a control message; control is never dropped while the
// link is up.
func (l *Link) PushControl(c *dripv1.Control) {
	l.queue.PushControl(c)
	inc(l.cfg.Metrics.SentControl, 1)
}

// PushBundle queues a bundle of the given encoded size. It returns false,
// and counts the drop, when the queue is full or closed.
func (l *Link) PushBundle(b *dripv1.Bundle, size int) bool {
	if !l.queue.PushBundle(b, size) {
		inc(l.cfg.Metrics.DroppedFull, 1)
		return false
	}
	if g := l.cfg.Metrics.QueueBytes; g != nil {
		g.Set(float64(l.queue.Bytes()))
	}
	return true
}

// QueuedBytes is the encoded size of the bundles waiting to be sent.
func (l *Link) QueuedBytes() int { return l.queue.Bytes() }

// Done is closed when the link has ended, from either side.
func (l *Link) Done() <-chan struct{} { return l.conn.Done() }

// Err is why the link ended, once Done is closed.
func (l *Link) Err() error { return l.conn.Err() }

// Close ends the link at once; queued bundles are dropped and counted.
func (l *Link) Close(reason error) {
	l.conn.Close(reason)
	l.closeOnce.Do(func() {
		if n := l.queue.Close(); n > 0 {
			inc(l.cfg.Metrics.DroppedDown, n)
		}
		if g := l.cfg.Metrics.QueueBytes; g != nil {
			g.Set(0)
		}
	})
}

// Start runs the writer and reader goroutines. The link ends when the
// connection does (Close, a failed send or receive, the neighbour leaving,
// a handler error); Wait returns once both goroutines have stopped.
func (l *Link) Start() {
	l.started = true
	go l.writeLoop()
	go l.readLoop()
}

// Wait blocks until the goroutines Start began have stopped.
func (l *Link) Wait() {
	if l.started {
		<-l.writerDone
		<-l.readerDone
	}
}

// Drain ends a started link without losing what is queued: it refuses
// further pushes, lets the writer send everything queued, half-closes so
// that the neighbour reads up to end of stream, and waits for the
// neighbour to close its side. ctx bounds the whole; what is still queued
// then is dropped and counted.
func (l *Link) Drain(ctx context.Context) {
	l.queue.Close()
	select {
	case <-l.writerDone:
		_ = l.conn.CloseSend()
		select {
		case <-l.conn.Done():
		case <-ctx.Done():
		}
	case <-ctx.Done():
	}
	l.Close(errors.New("link drained"))
}

func (l *Link) writeLoop() {
	defer close(l.writerDone)
	for {
		f, ok := l.queue.Next(l.conn.Done(), l.cfg.MaxFrameBytes)
		if !ok {
			return
		}
		l.writerMu.Lock()
		out, err := l.prepare(f)
		l.writerMu.Unlock()
		if err != nil {
			l.Close(fmt.Errorf("link to %s: %w", l.Name(), err))
			return
		}
		if err := l.conn.Send(out); err != nil {
			return
		}
	}
}

// closedCh makes Queue.Next return at once when nothing is queued.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// TakeFrame returns the next frame the writer would send, compressed and
// counted, or false if nothing is queued. It is for drivers that move
// frames themselves (virtual-time tests); do not mix it with Start.
func (l *Link) TakeFrame() (*dripv1.Frame, bool, error) {
	f, ok := l.queue.Next(closedCh, l.cfg.MaxFrameBytes)
	if !ok {
		return nil, false, nil
	}
	l.writerMu.Lock()
	defer l.writerMu.Unlock()
	out, err := l.prepare(f)
	if err != nil {
		return nil, false, fmt.Errorf("link to %s: %w", l.Name(), err)
	}
	return out, true, nil
}

// prepare compresses a frame taken from the queue and counts it.
func (l *Link) prepare(f *dripv1.Frame) (*dripv1.Frame, error) {
	bundles, plain := len(f.Bundles), 0
	if l.comp != nil {
		var err error
		if f, plain, err = l.comp.Compress(f); err != nil {
			return nil, err
		}
	}
	size := proto.Size(f)
	if l.comp == nil {
		plain = size
	}
	m := l.cfg.Metrics
	inc(m.SentBytes, size)
	inc(m.SentPlainBytes, plain)
	inc(m.SentBundles, bundles)
	if m.QueueBytes != nil {
		m.QueueBytes.Set(float64(l.queue.Bytes()))
	}
	return f, nil
}

func (l *Link) readLoop() {
	defer close(l.readerDone)
	for {
		f, err := l.conn.Recv()
		if err != nil {
			// End of stream included: the neighbour has sent its last frame
			// (it is leaving), so the link is over.
			l.Close(fmt.Errorf("link from %s: %w", l.Name(), err))
			return
		}
		if err := l.Deliver(f); err != nil {
			l.Close(err)
			return
		}
	}
}

// Deliver handles one frame received from the neighbour: it counts it,
// inflates it if it is compressed and hands it to the handler. An error
// means the link must end; the reader goroutine closes it. Drivers that
// move frames themselves call it in the order frames were taken.
func (l *Link) Deliver(f *dripv1.Frame) error {
	l.readerMu.Lock()
	defer l.readerMu.Unlock()
	inc(l.cfg.Metrics.RecvBytes, proto.Size(f))
	if l.decomp != nil {
		var err error
		if f, err = l.decomp.Decompress(f); err != nil {
			return fmt.Errorf("link from %s: %w", l.Name(), err)
		}
	} else if len(f.GetDeflated()) > 0 {
		return fmt.Errorf("link from %s: compressed frame, but this broker did not offer compression", l.Name())
	}
	if f.GetOpen() != nil {
		return fmt.Errorf("link from %s: a second Open on an established link", l.Name())
	}
	inc(l.cfg.Metrics.RecvBundles, len(f.GetBundles()))
	return l.handle(l, f)
}
