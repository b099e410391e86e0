package transport

import (
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"k8s.io/utils/clock"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/qos"
	"github.com/dripmesh/drip/internal/wire"
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
	SentKeepalives prometheus.Counter // empty frames sent on an idle link
	DroppedFull    prometheus.Counter // bundles refused by a full queue
	DroppedDown    prometheus.Counter // bundles queued when the link went down
	QueueBytes     prometheus.Gauge
	// Predicate advertisements sent, and their bytes before frame
	// compression, by form: whole, or a delta against the last one of the
	// same origin sent on the link. A broker shares them across its links.
	AdsWhole, AdsDelta         prometheus.Counter
	AdBytesWhole, AdBytesDelta prometheus.Counter
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
	// PredicateDeltas says this side offered Open.predicate_deltas: it
	// takes predicate advertisements as deltas, and sends them so if the
	// neighbour offered too (SendsPredicateDeltas).
	PredicateDeltas bool
	// MaxAdFilters bounds the filters of a predicate advertisement the
	// neighbour sends, its QoS classes' included (0: no bound): the link
	// counts them before it decodes any, and hands the control plane a
	// linkstate.OversizedAd for one beyond, which is refused as the
	// advertisement would be (linkstate.Config.MaxFilters).
	MaxAdFilters int
	// Control converts the link-state messages SendControl is given; the
	// links of one broker share one, so that a flood converts each message
	// once (nil: the link's own).
	Control *ControlEncoder
	// Clock is what every time of the link is read from: its Now, and the
	// waits of Backpressure (default: the real clock).
	Clock clock.WithTicker
	// Dialed says this side dialled the link; it decides which of two
	// simultaneous links to one neighbour survives.
	Dialed bool
	// Account, if set, is told every change of the bytes queued (positive
	// as bundles are queued, negative as they leave or are discarded), so
	// the owner can bound what all its queues hold. It is called with the
	// queue's lock held and must not block.
	Account func(delta int64)
	// Backpressure says what a full queue does to a started link's
	// producers; the zero value drops at once.
	Backpressure Backpressure
	// Keepalive, if positive, is the longest the link stays silent: when
	// it has sent nothing for Keepalive, it sends an empty frame, so that
	// the neighbour can tell a failed link from an idle one long before
	// its dead interval (linkstate.Config.Keepalive, which hellos
	// announce). The writer sends them, not the control plane, so that a
	// broker whose control plane is busy still keeps its links alive.
	Keepalive time.Duration
	// ReplayBytes, if positive, is how many bytes of the bundles it sent
	// last the link keeps, newest first, for Recent.
	ReplayBytes int
	// MarkBytes, if positive, is the queued bytes from which the link is
	// Congested: the bundles then queued on it are marked, so that
	// congestion control backs off before the queue overflows.
	MarkBytes int
	Metrics   LinkMetrics
}

// Backpressure is what a started link does when its queue is full. While
// the writer keeps sending — a send lasting less than Stalled — a producer
// waits up to Behind for room: the publishers, and upstream brokers through
// the link readers that forward to this link, are slowed to what the link
// carries instead of losing messages. A link whose writer has stalled
// drops instead, which also breaks cycles of brokers waiting on each other
// (each waits at most Stalled for a writer blocked by the next). Step-mode
// links (TakeFrame) never wait.
type Backpressure struct {
	Stalled time.Duration
	Behind  time.Duration
}

// FrameHandler receives what each frame the neighbour sends carries, in
// order, from one goroutine: its control messages, decoded (predicate
// advertisements rebuilt from their deltas), then its bundles in their wire
// form, which alias the frame's bytes (owned by the handler from then on).
// An error closes the link with it.
type FrameHandler func(l *Link, control []linkstate.Message, bundles [][]byte) error

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
	clock    clock.WithTicker
	made     time.Time  // the origin of Now
	ads      *AdDecoder // what the neighbour sends as deltas; the reader's
	adEnc    *AdEncoder // what was sent on the link, when both ends take deltas; the control plane's
	control  *ControlEncoder
	// dense says the neighbour does not offer sparse destinations: the
	// bundles queued for it carry theirs as the bitset.
	dense bool

	started    atomic.Bool
	writerDone chan struct{} // closed when the writer has sent its last frame
	readerDone chan struct{}
	closeOnce  sync.Once
	// unsent are the bundles still queued when the link ended (Close),
	// until the owner takes them (Unsent); unsentAtClose is how many.
	unsentMu      sync.Mutex
	unsent        [][]byte
	unsentAtClose atomic.Int64
	parsed        ParsedFrame  // the reader's, reused
	sending       atomic.Int64 // when the writer's current send began (Now); 0: not sending
	sent          atomic.Int64 // when TakeFrame last gave a frame (Now), for its keepalives; 0: none yet
	replay        *sentRing    // what was sent last (LinkConfig.ReplayBytes); nil: nothing kept
	oneWay        atomic.Int64 // estimated one-way delay to the neighbour, ns (SetOneWay)
	received      atomic.Int64 // when the last frame arrived (Now); 0: none yet
	handling      atomic.Bool  // the reader is in the handler, reading nothing

	// Finish and the neighbour's finished frame (Frame.finished).
	finishing    atomic.Bool
	finishSent   atomic.Bool   // the finished frame has been sent (or taken, TakeFrame)
	peerFinished chan struct{} // closed when the neighbour's arrives
	peerFinOnce  sync.Once
}

// NewLink wraps an established connection. It does not start goroutines.
func NewLink(c Conn, cfg LinkConfig, handle FrameHandler) (*Link, error) {
	if cfg.QueueBytes <= 0 || cfg.MaxFrameBytes <= 0 {
		return nil, fmt.Errorf("link to %s: queue bytes %d and max frame bytes %d must be positive",
			c.Remote().GetRouterName(), cfg.QueueBytes, cfg.MaxFrameBytes)
	}
	l := &Link{
		conn: c, cfg: cfg, handle: handle, queue: NewQueue(cfg.QueueBytes),
		writerDone: make(chan struct{}), readerDone: make(chan struct{}), peerFinished: make(chan struct{}),
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
	l.queue.account = cfg.Account
	if g := cfg.Metrics.QueueBytes; g != nil {
		g.Set(0)
	}
	if l.clock = cfg.Clock; l.clock == nil {
		l.clock = clock.RealClock{}
	}
	l.made = l.clock.Now()
	if cfg.ReplayBytes > 0 {
		l.replay = newSentRing(cfg.ReplayBytes)
	}
	l.ads = NewAdDecoder(cfg.PredicateDeltas, cfg.MaxAdFilters)
	if l.SendsPredicateDeltas() {
		l.adEnc = NewAdEncoder()
	}
	l.dense = !c.Remote().GetSparseDestinations()
	if l.control = cfg.Control; l.control == nil {
		l.control = &ControlEncoder{}
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

// SendsPredicateDeltas reports whether both ends offered predicate
// advertisements as deltas (LinkConfig.PredicateDeltas).
func (l *Link) SendsPredicateDeltas() bool {
	return l.cfg.PredicateDeltas && l.conn.Remote().GetPredicateDeltas()
}

// PushControl queues a control message; control is never dropped while the
// link is up, and leaves in the order queued.
func (l *Link) PushControl(c *dripv1.Control) {
	l.queue.PushControl(c)
	inc(l.cfg.Metrics.SentControl, 1)
}

// SendControl converts a link-state message and queues it (PushControl): a
// predicate advertisement as a delta against the last one of its origin
// sent on the link, where both ends take deltas and the delta is smaller.
// Call it from one goroutine at a time (the broker's control plane), which
// the link's ControlEncoder and its delta base belong to.
func (l *Link) SendControl(m linkstate.Message) error {
	ad, isAd := m.(*linkstate.PredAd)
	var base *linkstate.PredAd
	if isAd && l.adEnc != nil {
		base = l.adEnc.Base(ad.Origin)
	}
	c, delta, err := l.control.convert(m, base)
	if err != nil {
		return fmt.Errorf("link to %s: %w", l.Name(), err)
	}
	l.PushControl(c)
	if isAd {
		if l.adEnc != nil {
			l.adEnc.Sent(ad) // what the neighbour now holds: the base of the next delta
		}
		m := l.cfg.Metrics
		size := proto.Size(c)
		if delta {
			inc(m.AdsDelta, 1)
			inc(m.AdBytesDelta, size)
		} else {
			inc(m.AdsWhole, 1)
			inc(m.AdBytesWhole, size)
		}
	}
	return nil
}

// PushBundle queues a bundle in its wire form. A full queue makes the
// caller wait as Backpressure says; PushBundle returns false, and counts
// the drop, when it may wait no longer or the link has closed.
func (l *Link) PushBundle(b []byte) bool { return l.PushUrgent(b, qos.Urgency{}) }

// PushUrgent is PushBundle for a bundle of a deadline flow: it leaves as
// its urgency says (Queue), and with a deadline its budget field is set
// when it leaves: the time left then, less the link's one-way delay. A
// bundle for a neighbour that does not offer sparse destinations goes
// with the bitset (wire.DenseDestinations).
func (l *Link) PushUrgent(b []byte, u qos.Urgency) bool {
	if l.dense {
		b = wire.DenseDestinations(b)
	}
	ok, room := l.queue.TryPushUrgent(b, u)
	if !ok && room != nil && l.started.Load() && l.cfg.Backpressure.Behind > 0 {
		ok = l.waitRoom(b, u, room)
	}
	if !ok {
		if l.down() {
			inc(l.cfg.Metrics.DroppedDown, 1)
		} else {
			inc(l.cfg.Metrics.DroppedFull, 1)
		}
		return false
	}
	if g := l.cfg.Metrics.QueueBytes; g != nil {
		g.Set(float64(l.queue.Bytes()))
	}
	return true
}

// Down reports whether the link takes no more bundles: it has ended, or
// it is draining or finished.
func (l *Link) Down() bool { return l.down() }

func (l *Link) down() bool {
	select {
	case <-l.conn.Done():
		return true
	default:
		return l.queue.Closed()
	}
}

// waitRoom waits for room for b and queues it; false when it may wait no
// more.
func (l *Link) waitRoom(b []byte, u qos.Urgency, room <-chan struct{}) bool {
	bp := l.cfg.Backpressure
	deadline := l.Now() + int64(bp.Behind)
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := l.Now()
		if since := l.sending.Load(); since != 0 && now-since > int64(bp.Stalled) {
			return false
		}
		left := time.Duration(deadline - now)
		if left <= 0 {
			return false
		}
		// Wake at least every Stalled to look again whether the writer
		// has stalled meanwhile.
		wait := min(left, max(bp.Stalled, time.Millisecond))
		if timer == nil {
			timer = l.clock.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-room:
		case <-timer.C():
		case <-l.conn.Done():
			return false
		}
		var ok bool
		if ok, room = l.queue.TryPushUrgent(b, u); ok {
			return true
		} else if room == nil {
			return false // closed
		}
	}
}

// SetOneWay sets the estimated one-way delay to the neighbour (half the
// smoothed RTT), which budgets set as bundles leave are reduced by.
func (l *Link) SetOneWay(d time.Duration) { l.oneWay.Store(int64(d)) }

// LastReceived is when the last frame from the neighbour arrived or was
// handled, on the link's clock (Now); 0 before the first. Any frame proves the neighbour
// alive, even while its hellos wait behind data or behind the handler:
// the routing protocol takes it as such (linkstate.Node.Alive). While the
// reader is in the handler it reads nothing, and what the neighbour sent
// meanwhile waits unread: LastReceived is then now, since the silence is
// this end's: a broker whose control plane fell behind blocks its readers
// on its full event queue, and must not then declare dead the neighbours
// that kept sending.
func (l *Link) LastReceived() int64 {
	if l.handling.Load() {
		return l.Now()
	}
	return l.received.Load()
}

// Recent returns the bundles the link took to send at or after since, on
// its clock (Now), oldest first, as far back as LinkConfig.ReplayBytes
// keeps them (none without): those it may have lost if it has failed
// silently. They are the bundles as pushed, which must not be changed.
func (l *Link) Recent(since int64) [][]byte {
	if l.replay == nil {
		return nil
	}
	return l.replay.since(since)
}

// Now reads the link's clock in nanoseconds since the link was made (plus
// one, so that it is never 0): the clock of qos.Urgency and LastReceived.
func (l *Link) Now() int64 { return int64(l.clock.Since(l.made)) + 1 }

// Congested reports whether the bundles waiting to be sent reach
// LinkConfig.MarkBytes; never without it.
func (l *Link) Congested() bool { return l.cfg.MarkBytes > 0 && l.queue.Bytes() >= l.cfg.MarkBytes }

// QueuedBytes is the encoded size of the bundles waiting to be sent.
func (l *Link) QueuedBytes() int { return l.queue.Bytes() }

// Done is closed when the link has ended, from either side.
func (l *Link) Done() <-chan struct{} { return l.conn.Done() }

// Err is why the link ended, once Done is closed.
func (l *Link) Err() error { return l.conn.Err() }

// Close ends the link at once. The bundles still queued were never sent:
// they wait for the owner to send them another way or count them as
// dropped (Unsent).
func (l *Link) Close(reason error) {
	l.conn.Close(reason)
	l.closeOnce.Do(func() {
		l.queue.Close()
		// Nobody sends them here: they leave the owner's account now.
		unsent := l.queue.Discard()
		l.unsentMu.Lock()
		l.unsent = unsent
		l.unsentMu.Unlock()
		l.unsentAtClose.Store(int64(len(unsent)))
		if g := l.cfg.Metrics.QueueBytes; g != nil {
			g.Set(0)
		}
	})
}

// UnsentAtClose is how many bundles were still queued when the link ended.
func (l *Link) UnsentAtClose() int { return int(l.unsentAtClose.Load()) }

// Unsent hands each bundle that was still queued when the link ended —
// never sent, as pushed — to resend, once, oldest first; those it refuses
// (false), and all of them with a nil resend, are counted as dropped (link
// down). It returns how many were dropped. Before the link has ended, and
// after the first call, there is nothing to hand.
func (l *Link) Unsent(resend func(raw []byte) bool) int {
	l.unsentMu.Lock()
	unsent := l.unsent
	l.unsent = nil
	l.unsentMu.Unlock()
	dropped := 0
	for _, raw := range unsent {
		if resend == nil || !resend(raw) {
			dropped++
		}
	}
	inc(l.cfg.Metrics.DroppedDown, dropped)
	return dropped
}

// Start runs the writer and reader goroutines. The link ends when the
// connection does (Close, a failed send or receive, the neighbour leaving,
// a handler error); Wait returns once both goroutines have stopped.
func (l *Link) Start() {
	l.started.Store(true)
	go l.writeLoop()
	go l.readLoop()
}

// Wait blocks until the goroutines Start began have stopped.
func (l *Link) Wait() {
	if l.started.Load() {
		<-l.writerDone
		<-l.readerDone
	}
}

// Finish says this side will queue nothing more on the link: further
// pushes are refused (and counted as dropped, link down), and once what is
// queued has been sent, a finished frame tells the neighbour that nothing
// follows. Unlike Drain it does not end the link: the neighbour may still
// send, and the link ends when it closes or half-closes. A broker finishes
// the links to neighbours that withdrew from the mesh once its routes lead
// around them, so that they know when the last bundle on its way to them
// has arrived (PeerFinished).
func (l *Link) Finish() {
	if !l.finishing.Swap(true) {
		l.queue.Close()
	}
}

// Finishing reports whether Finish has been called.
func (l *Link) Finishing() bool { return l.finishing.Load() }

// PeerFinishedC is closed when the neighbour's finished frame has arrived:
// every bundle it will send on this link has been handed to the handler.
func (l *Link) PeerFinishedC() <-chan struct{} { return l.peerFinished }

// PeerFinished reports whether the neighbour's finished frame has arrived,
// or the link has ended: either way nothing more will arrive on it.
func (l *Link) PeerFinished() bool {
	select {
	case <-l.peerFinished:
		return true
	case <-l.conn.Done():
		return true
	default:
		return false
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
	var idle clock.Timer
	if l.cfg.Keepalive > 0 {
		idle = l.clock.NewTimer(l.cfg.Keepalive)
		defer idle.Stop()
	}
	for {
		var idleC <-chan time.Time
		if idle != nil {
			idleC = idle.C()
		}
		f, ok, isIdle := l.queue.NextWithin(l.conn.Done(), idleC, l.cfg.MaxFrameBytes)
		if !ok {
			if l.finishing.Load() && l.finishSent.CompareAndSwap(false, true) {
				_ = l.conn.Send(AppendFinishedFrame(nil))
			}
			return
		}
		var out []byte
		if isIdle {
			inc(l.cfg.Metrics.SentKeepalives, 1)
			out = keepaliveFrame
		} else {
			l.writerMu.Lock()
			var err error
			out, err = l.prepare(f)
			l.writerMu.Unlock()
			if err != nil {
				l.Close(fmt.Errorf("link to %s: %w", l.Name(), err))
				return
			}
		}
		if idle != nil {
			// Timer.Reset after the timer fired and its value was
			// taken, or before it fired: either way nothing stale is
			// left in its channel (Go 1.23 timers).
			idle.Reset(l.cfg.Keepalive)
		}
		l.sending.Store(l.Now())
		err := l.conn.Send(out)
		l.sending.Store(0)
		if err != nil {
			return
		}
	}
}

// keepaliveFrame is what an idle link sends (LinkConfig.Keepalive): a
// frame with nothing in it, which every version of the protocol parses
// and which the neighbour's reader takes as a sign of life
// (LastReceived).
var keepaliveFrame = []byte{}

// closedCh makes Queue.Next return at once when nothing is queued.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// TakeFrame returns the next frame the writer would send, in its wire
// form, compressed and counted, or false if nothing is queued: an empty
// frame when the link has a Keepalive and has sent nothing for that long
// on the link's clock. It is for
// drivers that move frames themselves (virtual-time tests); do not mix it
// with Start.
func (l *Link) TakeFrame() ([]byte, bool, error) {
	f, ok := l.queue.Next(closedCh, l.cfg.MaxFrameBytes)
	if !ok {
		if l.finishing.Load() && l.finishSent.CompareAndSwap(false, true) {
			return AppendFinishedFrame(nil), true, nil
		}
		if k := int64(l.cfg.Keepalive); k > 0 && !l.down() && l.Now()-l.sent.Load() >= k {
			l.sent.Store(l.Now())
			inc(l.cfg.Metrics.SentKeepalives, 1)
			return keepaliveFrame, true, nil
		}
		return nil, false, nil
	}
	l.sent.Store(l.Now())
	l.writerMu.Lock()
	defer l.writerMu.Unlock()
	out, err := l.prepare(f)
	if err != nil {
		return nil, false, fmt.Errorf("link to %s: %w", l.Name(), err)
	}
	return out, true, nil
}

// prepare encodes a batch taken from the queue as a frame, compresses it
// if the link is compressed and it carries no predicate advertisement, and
// counts it.
func (l *Link) prepare(b Batch) ([]byte, error) {
	if b.Deadlines != nil {
		// The budget the receiver gets: what is left now, less the time
		// the link will take (Kim10 §2.2: budgets follow measured delays).
		now := l.Now() + l.oneWay.Load()
		for i, d := range b.Deadlines {
			if d != 0 {
				wire.SetBudget(b.Bundles[i], d-now)
			}
		}
	}
	controlSize := 0
	for _, c := range b.Control {
		controlSize += protowire.SizeTag(2) + protowire.SizeBytes(proto.Size(c))
	}
	frame, err := AppendFrame(make([]byte, 0, FrameSize(controlSize, b.Bundles)), b.Control, b.Bundles)
	if err != nil {
		return nil, err
	}
	plain := len(frame)
	if l.comp != nil && !carriesAdvertisement(b.Control) {
		if frame, err = l.comp.Compress(frame); err != nil {
			return nil, err
		}
	}
	if l.replay != nil && len(b.Bundles) > 0 {
		l.replay.record(l.Now(), b.Bundles)
	}
	m := l.cfg.Metrics
	inc(m.SentBytes, len(frame))
	inc(m.SentPlainBytes, plain)
	inc(m.SentBundles, len(b.Bundles))
	if m.QueueBytes != nil {
		m.QueueBytes.Set(float64(l.queue.Bytes()))
	}
	return frame, nil
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

// Deliver handles one frame received from the neighbour, in its wire
// form, which it then owns: it counts it, inflates it if it is compressed,
// parses it and hands its contents to the handler. An error means the link
// must end; the reader goroutine closes it. Drivers that move frames
// themselves call it in the order frames were taken.
func (l *Link) Deliver(frame []byte) error {
	l.received.Store(l.Now())
	l.readerMu.Lock()
	defer l.readerMu.Unlock()
	inc(l.cfg.Metrics.RecvBytes, len(frame))
	if l.decomp != nil {
		var err error
		if frame, err = l.decomp.Decompress(frame); err != nil {
			return fmt.Errorf("link from %s: %w", l.Name(), err)
		}
	}
	f := &l.parsed
	if err := ParseFrame(frame, f); err != nil {
		return fmt.Errorf("link from %s: %w", l.Name(), err)
	}
	switch {
	case f.Compressed():
		return fmt.Errorf("link from %s: compressed frame, but this broker did not offer compression", l.Name())
	case f.Open:
		return fmt.Errorf("link from %s: a second Open on an established link", l.Name())
	}
	inc(l.cfg.Metrics.RecvBundles, len(f.Bundles))
	if len(f.Control) > 0 || len(f.Bundles) > 0 {
		msgs, err := l.decodeControl(f.Control)
		if err != nil {
			return err
		}
		l.handling.Store(true)
		err = l.handle(l, msgs, f.Bundles)
		// Until now the link was not silent; the next frame may have
		// waited unread all along.
		l.received.Store(l.Now())
		l.handling.Store(false)
		if err != nil {
			return err
		}
	}
	if f.Finished {
		l.peerFinOnce.Do(func() { close(l.peerFinished) })
	}
	return nil
}

// ErrMalformedControl is what the error of a frame whose control messages
// do not decode wraps: a peer that sends one is broken, and its link ends
// rather than let it corrupt routing.
var ErrMalformedControl = errors.New("malformed control message")

// decodeControl turns the control messages of one frame into the
// protocol's, on the link's reader, so that the control plane does not
// spend its time on the copying. One malformed message makes the whole
// frame unusable.
func (l *Link) decodeControl(cs []*dripv1.Control) ([]linkstate.Message, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	msgs := make([]linkstate.Message, len(cs))
	for i, c := range cs {
		msg, err := l.ads.Decode(c)
		if err != nil {
			return nil, fmt.Errorf("%w from %s: %w", ErrMalformedControl, l.Name(), err)
		}
		msgs[i] = msg
	}
	return msgs, nil
}

// carriesAdvertisement reports whether control holds a predicate
// advertisement. Such a frame is sent uncompressed, and without bundles
// (Queue.Next): an advertisement's filters are lists of hashed Bloom
// positions, which DEFLATE shrinks only to about 0.7 of their size, for
// 1.2 ms per advertisement of 1,000 filters and per link
// (BenchmarkAdvertisementCompression) — and every advertisement crosses
// every link of the mesh, so that compressing them would cost a hub most
// of its CPU while subscriptions change.
func carriesAdvertisement(control []*dripv1.Control) bool {
	for _, c := range control {
		if _, ok := c.GetMsg().(*dripv1.Control_PredicateAd); ok {
			return true
		}
	}
	return false
}
