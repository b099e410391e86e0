package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/rawcodec"
)

// Summary is the brokers' account of a closed publisher: over every broker
// it published at, the messages accepted for routing and how many of those
// no subscriber anywhere matched.
type Summary struct {
	Accepted  uint64
	Unmatched uint64
}

// Failover says a Publisher moved from one broker to another.
type Failover struct {
	From, To string // addresses
	// Resent messages went to the new broker because the old one drained
	// and said exactly which it had not published: nothing was lost.
	Resent int
	// InFlight messages had been sent to a broker that failed before
	// acknowledging them: each may or may not have been published.
	InFlight uint64
	Err      error // why the old stream ended
}

// Batches: a request carries what accumulated while the previous one was
// being sent, up to these bounds.
const (
	maxBatchMessages = 1024
	maxBatchBytes    = 256 << 10
)

// A batch's buffers are used again once the broker has acknowledged
// every message in it (its bytes have then all been written): without
// that, each batch grew a fresh buffer from nothing, and the garbage
// collector spent about a seventh of a publishing and subscribing
// process's CPU. A publisher keeps at most maxSpareBatches of them, none
// larger than maxSpareBytes.
const (
	maxSpareBatches = 4
	maxSpareBytes   = 2 * maxBatchBytes
)

// Publisher is a publishing stream at one broker at a time, moving between
// the client's brokers. Publish queues a message and returns; a flusher
// goroutine sends what accumulated as one request whenever the stream can
// take it, so a publisher that sends faster than one request at a time
// sends batches, and one that sends slowly sends each message at once.
// Close it to get the Summary and release the stream.
type Publisher struct {
	c      *Client
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	cond     *sync.Cond // flusher: work or closing; Publish: room; Close: idle
	queue    []batch    // messages queued and not yet sent, in batches of one request each, none empty
	spare    []batch    // acknowledged batches' buffers, emptied, for the queue
	names    []string   // scratch for encoding
	queued   int        // messages in the queue plus unacknowledged on the stream
	flushing bool       // the flusher holds a batch it is sending
	closing  bool
	flushed  chan struct{} // closed when the flusher has exited
	st       *pubStream
	legacy   bool   // the brokers predate PublishStream: use Publish
	sent     uint64 // messages handed to Publish and not lost in flight
	inFlight uint64 // lost in flight to brokers that failed
	sum      Summary
	err      error // sticky: a broker rejected a message, or no broker could be reached
	done     bool
	cc       *pubCC // congestion control, if on
}

// batch is a PublishRequest in its wire form being built: its batch
// entries, and where each message's entry starts (for resending a tail).
type batch struct {
	b     []byte
	start []int
}

func (b *batch) len() int { return len(b.start) }

// from returns a batch of the messages from index i on.
func (b *batch) from(i int) batch {
	if i == 0 {
		return *b
	}
	off := b.start[i]
	out := batch{b: b.b[off:], start: make([]int, 0, len(b.start)-i)}
	for _, s := range b.start[i:] {
		out.start = append(out.start, s-off)
	}
	return out
}

// pubStream is one stream to one broker.
type pubStream struct {
	addr   string
	cancel context.CancelFunc
	bidi   dripv1.Broker_PublishStreamClient
	legacy dripv1.Broker_PublishClient

	mu        sync.Mutex
	unacked   []batch // sent, not yet fully acknowledged, in order
	skip      int     // messages of unacked[0] already acknowledged
	sent      uint64
	acked     uint64 // cumulative, as the broker counts
	unmatched uint64
	moving    bool
	ended     chan struct{}             // closed when the stream has ended
	err       error                     // why, once ended
	onAck     func(n int, done []batch) // messages newly acknowledged, and the batches now acknowledged whole
	done      []batch                   // scratch for onAck, of the receive goroutine
}

// NewPublisher opens a publish stream at one of the client's brokers.
// Cancelling ctx aborts it; messages already sent may or may not have been
// published.
func (c *Client) NewPublisher(ctx context.Context) (*Publisher, error) {
	return c.newPublisher(ctx, !c.opts.noCongestion)
}

func (c *Client) newPublisher(ctx context.Context, controlled bool) (*Publisher, error) {
	pctx, cancel := context.WithCancel(ctx)
	p := &Publisher{c: c, ctx: pctx, cancel: cancel, flushed: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	st, err := p.connect()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("drip client: opening a publish stream to %s: %w", c.target, ctxOr(ctx, err))
	}
	p.st = st
	if controlled {
		if err := p.startCongestion(); err != nil {
			cancel()
			return nil, fmt.Errorf("drip client: %w", err)
		}
	}
	go p.flush()
	// A cancelled context must wake anyone waiting on the condition.
	go func() {
		<-pctx.Done()
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	return p, nil
}

// connect opens a stream at the current broker, failing over as the
// client does, until one answers or the failover wait ends.
func (p *Publisher) connect() (*pubStream, error) {
	r := p.c.newRetrier()
	for {
		st, err := p.open()
		if err == nil {
			return st, nil
		}
		wait, ok := r.next(p.ctx)
		if !ok || p.ctx.Err() != nil {
			return nil, ctxOr(p.ctx, err)
		}
		if err := sleep(p.ctx, wait); err != nil {
			return nil, err
		}
	}
}

func (p *Publisher) open() (*pubStream, error) {
	cc, addr, err := p.c.use()
	if err != nil {
		return nil, err
	}
	if err := waitReady(p.ctx, cc); err != nil {
		p.c.failed(addr)
		return nil, fmt.Errorf("broker %s: %w", addr, err)
	}
	sctx, cancel := context.WithCancel(p.ctx)
	st := &pubStream{addr: addr, cancel: cancel, ended: make(chan struct{}), onAck: p.acked}
	api := dripv1.NewBrokerClient(cc)
	p.mu.Lock()
	legacy := p.legacy
	p.mu.Unlock()
	if legacy {
		st.legacy, err = api.Publish(sctx)
	} else {
		st.bidi, err = api.PublishStream(sctx)
	}
	if err != nil {
		cancel()
		p.c.failed(addr)
		return nil, fmt.Errorf("broker %s: %w", addr, err)
	}
	if st.bidi != nil {
		go st.receive()
	}
	return st, nil
}

// receive reads a stream's acknowledgements until it ends.
func (st *pubStream) receive() {
	for {
		resp, err := st.bidi.Recv()
		st.mu.Lock()
		if err != nil {
			st.err = err
			close(st.ended)
			st.mu.Unlock()
			st.onAck(0, nil) // wakes whoever waits on the stream
			return
		}
		a := resp.GetAck()
		newly := 0
		st.done = st.done[:0]
		if n := a.GetAccepted(); n > st.acked {
			newly = int(n - st.acked)
			st.acked = n
			// Drop the batches now acknowledged whole.
			for k := newly; k > 0 && len(st.unacked) > 0; {
				left := st.unacked[0].len() - st.skip
				if k < left {
					st.skip += k
					break
				}
				k -= left
				st.done = append(st.done, st.unacked[0])
				st.unacked[0] = batch{}
				st.unacked, st.skip = st.unacked[1:], 0
			}
		}
		st.unmatched = a.GetUnmatched()
		st.moving = st.moving || a.GetMoving()
		st.mu.Unlock()
		if newly > 0 || a.GetMoving() {
			st.onAck(newly, st.done)
		}
		clear(st.done)
	}
}

// acked frees room for acknowledged messages, keeps the buffers of
// batches acknowledged whole for the next, and wakes waiters.
func (p *Publisher) acked(n int, done []batch) {
	p.mu.Lock()
	p.queued -= n
	for _, b := range done {
		if len(p.spare) < maxSpareBatches && cap(b.b) <= maxSpareBytes {
			p.spare = append(p.spare, batch{b: b.b[:0], start: b.start[:0]})
		}
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Publish queues m for sending. A message the client cannot encode (an
// unsupported attribute type, an empty name) is an error that leaves the
// publisher usable. Publish waits while WithMaxInFlight messages are queued
// or unacknowledged. When its broker drains, the publisher moves to another
// and resends what the broker did not publish; when its broker fails, it
// moves and counts what was in flight (InFlightLost, WithFailoverHandler).
// Once a broker has rejected a message (codes.InvalidArgument, naming its
// index on that broker's stream), or no broker could be reached within
// WithFailoverWait, Publish returns that error, and so does every later
// call.
func (p *Publisher) Publish(m Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usable(); err != nil {
		return err
	}
	for p.queued >= p.c.opts.maxInFlight && p.err == nil && p.ctx.Err() == nil {
		p.cond.Wait()
	}
	if err := p.usable(); err != nil {
		return err
	}
	if p.ctx.Err() != nil {
		return p.ctx.Err()
	}
	if p.cc != nil {
		return p.publishControlled(m)
	}
	if err := p.enqueue(m, nil); err != nil {
		return err
	}
	p.sent++
	return nil
}

// enqueue adds m, with congestion-control header cc if not nil, to what
// the flusher sends next. Called with p.mu held.
func (p *Publisher) enqueue(m Message, cc []byte) error {
	last := len(p.queue) - 1
	if last < 0 || p.queue[last].len() >= maxBatchMessages || len(p.queue[last].b) >= maxBatchBytes {
		p.queue = append(p.queue, p.spareBatch())
		last++
	}
	cur := &p.queue[last]
	start := len(cur.b)
	var err error
	if cur.b, p.names, err = appendBatchEntry(cur.b, m, cc, p.names); err != nil {
		if cur.len() == 0 {
			p.queue = p.queue[:last]
		}
		return fmt.Errorf("drip client: message %d: %w", p.sent, err)
	}
	if start > 0 && len(cur.b) > maxBatchBytes {
		// Over a request's bytes with this message: it starts the next.
		next := p.spareBatch()
		next.b = append(next.b, cur.b[start:]...)
		next.start = append(next.start, 0)
		cur.b = cur.b[:start]
		p.queue = append(p.queue, next)
	} else {
		cur.start = append(cur.start, start)
	}
	p.queued++
	p.cond.Broadcast()
	return nil
}

// spareBatch is an empty batch, in an acknowledged batch's buffers if
// there is one.
func (p *Publisher) spareBatch() batch {
	if len(p.spare) == 0 {
		return batch{}
	}
	b := p.spare[len(p.spare)-1]
	p.spare[len(p.spare)-1] = batch{}
	p.spare = p.spare[:len(p.spare)-1]
	return b
}

func (p *Publisher) usable() error {
	if p.err != nil {
		return p.err
	}
	if p.done || p.closing {
		return errors.New("drip client: publish on a closed Publisher")
	}
	return nil
}

// flush is the flusher goroutine: it sends what Publish queued, one
// request per turn, and moves the publisher when its stream ends.
func (p *Publisher) flush() {
	defer close(p.flushed)
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for len(p.queue) == 0 && !p.closing && p.err == nil && p.ctx.Err() == nil && !p.mustMove() {
			p.cond.Wait()
		}
		if p.err != nil || p.ctx.Err() != nil {
			p.cond.Broadcast()
			return
		}
		if p.mustMove() && !p.closing {
			// Idle, and the broker failed or drains: move now, so that
			// what it did not publish goes on.
			st := p.st
			st.mu.Lock()
			cause := st.err
			st.mu.Unlock()
			if cause == nil {
				cause = errBrokerMoving
			}
			p.failover(st, cause, batch{})
			p.cond.Broadcast()
			continue
		}
		if len(p.queue) == 0 && p.closing {
			p.cond.Broadcast()
			return
		}
		b := p.take()
		st := p.st
		p.flushing = true
		p.mu.Unlock()
		err := p.sendBatch(st, b)
		p.mu.Lock()
		p.flushing = false
		if err != nil {
			p.failover(st, err, b)
		}
		p.cond.Broadcast()
	}
}

// mustMove says whether the current stream has ended or its broker
// drains. Called with p.mu held.
func (p *Publisher) mustMove() bool {
	st := p.st
	if st == nil {
		return false
	}
	select {
	case <-st.ended:
		return true
	default:
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.moving
}

// take removes the first request's worth from the queue. Called with
// p.mu held and the queue not empty.
func (p *Publisher) take() batch {
	out := p.queue[0]
	// Moved down, not resliced, so that the array serves on: the queue
	// is a few batches long (a window of 8,192 is eight full requests).
	n := copy(p.queue, p.queue[1:])
	p.queue[n] = batch{}
	p.queue = p.queue[:n]
	return out
}

// sendBatch sends one request, recording it as unacknowledged first (an
// acknowledgement can overtake the return of the send).
func (p *Publisher) sendBatch(st *pubStream, b batch) error {
	if st == nil {
		return errNoStream
	}
	select {
	case <-st.ended:
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.err
	default:
	}
	st.mu.Lock()
	moving := st.moving
	st.mu.Unlock()
	if moving {
		return errBrokerMoving
	}
	if st.legacy != nil {
		// One message per request, no acknowledgements.
		for i := range b.len() {
			one := b.from(i)
			end := len(one.b)
			if len(one.start) > 1 {
				end = one.start[1]
			}
			if err := st.legacy.SendMsg(&rawcodec.Raw{B: batchToMessage(one.b[:end])}); err != nil {
				return err
			}
			st.mu.Lock()
			st.sent++
			st.mu.Unlock()
		}
		p.acked(b.len(), nil) // nothing will acknowledge them
		return nil
	}
	st.mu.Lock()
	st.unacked = append(st.unacked, b)
	st.sent += uint64(b.len())
	st.mu.Unlock()
	if err := st.bidi.SendMsg(&rawcodec.Raw{B: b.b}); err != nil {
		return err
	}
	return nil
}

// batchToMessage turns one batch entry (field 2) into a request carrying it
// as message (field 1), for brokers before batches.
func batchToMessage(entry []byte) []byte {
	out := append([]byte(nil), entry...)
	out[0] = 0x0a // field 1, length-delimited
	return out
}

var (
	errBrokerMoving = errors.New("broker is draining")
	errNoStream     = errors.New("no stream")
)

// failover ends st after a failed or refused send of b and moves to
// another broker. A broker that drained (or predates PublishStream)
// published exactly what it acknowledged, so the rest — b included — is
// queued again, first; after a failure, what was unacknowledged is counted
// in flight. A broker's rejection of a message ends the publisher instead.
// Called by the flusher with p.mu held; it releases it while it waits.
func (p *Publisher) failover(st *pubStream, cause error, b batch) {
	var resend []batch
	f := Failover{Err: cause}
	if st == nil && b.len() > 0 {
		resend = []batch{b} // never sent
	}
	if st != nil {
		if err := p.endStream(st, cause); err != nil {
			return
		}
		f.From = st.addr
		st.mu.Lock()
		unimplemented := status.Code(st.err) == codes.Unimplemented
		exact := st.moving || unimplemented
		pending := st.unacked
		skip := st.skip
		st.unacked = nil
		st.mu.Unlock()
		if unimplemented {
			p.legacy = true
		}
		// b is in pending if the send failed after recording it.
		if b.len() > 0 && (len(pending) == 0 || &pending[len(pending)-1].b[0] != &b.b[0]) {
			pending = append(pending, b)
		}
		if len(pending) > 0 && skip > 0 {
			pending[0] = pending[0].from(skip)
		}
		n := 0
		for _, pb := range pending {
			n += pb.len()
		}
		if exact {
			f.Resent, resend = n, pending
		} else {
			// The batch whose send failed may not have left: it and
			// everything unacknowledged may or may not be published.
			f.InFlight = uint64(n)
			p.inFlight += f.InFlight
			p.sent -= f.InFlight
			p.queued -= n
		}
		if st.moving {
			p.c.failed(st.addr) // move on even though it still answers
		}
	}
	p.mu.Unlock()
	next, err := p.connect()
	p.mu.Lock()
	if err != nil {
		p.err = fmt.Errorf("drip client: no broker to publish to: %w", err)
		return
	}
	p.st = next
	f.To = next.addr
	if len(resend) > 0 {
		// Before what was queued meanwhile, to keep the order; each was
		// one request and is one again.
		p.queue = append(resend, p.queue...)
	}
	if p.c.opts.onFailover != nil {
		p.c.opts.onFailover(f)
	}
}

// endStream closes st and adds what it published to the summary; it
// records a broker's rejection, which ends the publisher. Called with p.mu
// held.
func (p *Publisher) endStream(st *pubStream, cause error) error {
	st.cancel()
	if st.bidi != nil {
		p.mu.Unlock()
		<-st.ended
		p.mu.Lock()
	}
	if p.st == st {
		p.st = nil
	}
	st.mu.Lock()
	p.sum.Accepted += st.acked
	p.sum.Unmatched += st.unmatched
	err := st.err
	st.mu.Unlock()
	if err == nil || errors.Is(err, context.Canceled) {
		err = cause
	}
	if permanent(err) && status.Code(err) != codes.Unimplemented {
		p.err = fmt.Errorf("drip client: broker %s rejected a message: %w", st.addr, err)
		return p.err
	}
	return nil
}

// Sent returns the number of messages published so far, less those lost
// in flight to brokers that failed.
func (p *Publisher) Sent() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent
}

// InFlightLost returns the number of messages sent to brokers that failed
// before acknowledging them: each may or may not have been published.
func (p *Publisher) InFlightLost() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inFlight
}

// Close sends what is queued, ends the stream and returns the brokers'
// summary, or the error that ended the publisher. Calling it again returns
// the same result.
func (p *Publisher) Close() (Summary, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return p.sum, p.err
	}
	// Messages that congestion control holds go first: the pacer sends
	// them as their flows allow (cancel the context not to wait).
	for p.cc != nil && p.cc.core.Queued() > 0 && p.err == nil && p.ctx.Err() == nil {
		p.cond.Wait()
	}
	p.closing = true
	p.cond.Broadcast()
	for {
		flushed := p.flushed
		p.mu.Unlock()
		<-flushed // everything queued was sent, or the publisher failed
		p.mu.Lock()
		if p.err != nil || p.st == nil || p.ctx.Err() != nil {
			break
		}
		st := p.st
		err := p.finish(st)
		if err == nil || p.err != nil {
			break
		}
		// The broker drained or failed while closing: what it did not
		// publish is queued again (or counted in flight), and a flusher
		// sends it to the next broker before closing there.
		p.failover(st, err, batch{})
		if p.err != nil {
			break
		}
		p.flushed = make(chan struct{})
		go p.flush()
	}
	p.done = true
	aborted := p.ctx.Err() // the caller's cancellation, before ours
	p.cancel()
	switch {
	case p.err != nil:
		return Summary{}, p.err
	case aborted != nil:
		p.err = fmt.Errorf("drip client: publisher aborted: %w", aborted)
		return p.sum, p.err
	}
	return p.sum, nil
}

// finish half-closes st and waits for the broker's final count. Called
// with p.mu held; it releases it while it waits.
func (p *Publisher) finish(st *pubStream) error {
	if st.legacy != nil {
		p.mu.Unlock()
		s, err := st.legacy.CloseAndRecv()
		p.mu.Lock()
		if err != nil {
			if permanent(err) {
				p.err = fmt.Errorf("drip client: broker %s rejected a message: %w", st.addr, err)
			}
			return fmt.Errorf("closing the publish stream after %d messages: %w", st.sent, err)
		}
		p.st = nil
		p.sum.Accepted += s.GetAccepted()
		p.sum.Unmatched += s.GetUnmatched()
		return nil
	}
	if err := st.bidi.CloseSend(); err != nil {
		return err
	}
	p.mu.Unlock()
	select {
	case <-st.ended:
	case <-p.ctx.Done():
	}
	p.mu.Lock()
	if p.ctx.Err() != nil {
		return p.ctx.Err()
	}
	st.mu.Lock()
	err, moving, left := st.err, st.moving, len(st.unacked)
	st.mu.Unlock()
	if !errors.Is(err, io.EOF) || moving || left > 0 {
		if permanent(err) {
			return p.endStream(st, err)
		}
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("broker acknowledged all but %d messages", left)
		}
		if moving {
			err = errBrokerMoving
		}
		return err
	}
	return p.endStream(st, nil)
}

// Publish sends msgs on a new publisher and returns the brokers' summary.
// Every message is encoded before any is sent, so an encoding error
// publishes nothing; after a broker's rejection, messages before the one
// it names were published.
func (c *Client) Publish(ctx context.Context, msgs ...Message) (Summary, error) {
	var names []string
	for i, m := range msgs {
		var err error
		if names, _, err = messageSize(m, names); err != nil {
			return Summary{}, fmt.Errorf("drip client: message %d: %w", i, err)
		}
	}
	// A publisher this short-lived has no use for congestion control.
	p, err := c.newPublisher(ctx, false)
	if err != nil {
		return Summary{}, err
	}
	for _, m := range msgs {
		if err := p.Publish(m); err != nil {
			break // Close returns the same error
		}
	}
	return p.Close()
}
