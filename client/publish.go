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

// Publisher is one publishing stream at a time, moving between the
// client's brokers. Close it to get the Summary and release the stream.
type Publisher struct {
	c      *Client
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex // serialises Publish and Close: a gRPC stream allows one sender
	st       *pubStream
	legacy   bool   // the brokers predate PublishStream: use Publish
	sent     uint64 // messages handed to brokers
	inFlight uint64 // of those, lost in flight to brokers that failed
	sum      Summary
	err      error // sticky once a broker rejected a message
	done     bool
}

// pubStream is one stream to one broker.
type pubStream struct {
	addr   string
	cancel context.CancelFunc
	bidi   dripv1.Broker_PublishStreamClient
	legacy dripv1.Broker_PublishClient

	mu        sync.Mutex
	unacked   []*dripv1.Message // sent, not yet acknowledged, in order
	sent      uint64
	acked     uint64 // cumulative, as the broker counts
	unmatched uint64
	moving    bool
	ackCh     chan struct{} // closed and replaced at each ack
	ended     chan struct{} // closed when the stream has ended
	err       error         // why, once ended
}

// NewPublisher opens a publish stream at one of the client's brokers.
// Cancelling ctx aborts it; messages already sent may or may not have been
// published.
func (c *Client) NewPublisher(ctx context.Context) (*Publisher, error) {
	pctx, cancel := context.WithCancel(ctx)
	p := &Publisher{c: c, ctx: pctx, cancel: cancel}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.stream(); err != nil {
		cancel()
		return nil, fmt.Errorf("drip client: opening a publish stream to %s: %w", c.target, ctxOr(ctx, err))
	}
	return p, nil
}

// stream returns the current stream, connecting (with failover) if there
// is none. Called with p.mu held.
func (p *Publisher) stream() (*pubStream, error) {
	if p.st != nil {
		return p.st, nil
	}
	r := p.c.newRetrier()
	for {
		st, err := p.open()
		if err == nil {
			p.st = st
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
	st := &pubStream{addr: addr, cancel: cancel, ackCh: make(chan struct{}), ended: make(chan struct{})}
	api := dripv1.NewBrokerClient(cc)
	if p.legacy {
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
			return
		}
		a := resp.GetAck()
		if n := a.GetAccepted(); n > st.acked {
			k := min(int(n-st.acked), len(st.unacked))
			clear(st.unacked[:k])
			st.unacked = st.unacked[k:]
			st.acked = n
		}
		st.unmatched = a.GetUnmatched()
		st.moving = st.moving || a.GetMoving()
		close(st.ackCh)
		st.ackCh = make(chan struct{})
		st.mu.Unlock()
	}
}

// Publish sends m. A message the client cannot encode (an unsupported
// attribute type, an empty name) is an error that leaves the publisher
// usable. When its broker drains, the publisher moves to another and
// resends what the broker did not publish; when its broker fails, it moves
// and counts what was in flight (InFlightLost, WithFailoverHandler).
// Publish waits while WithMaxInFlight messages await acknowledgement, and
// while no broker is reachable (bounded by WithFailoverWait). Once a broker
// has rejected a message (codes.InvalidArgument, naming it), Publish
// returns that error, and so does every later call.
func (p *Publisher) Publish(m Message) error {
	pm, err := m.toProto()
	if err != nil {
		return fmt.Errorf("drip client: message %d: %w", p.Sent(), err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.send(pm)
}

// send publishes one encoded message. Called with p.mu held.
func (p *Publisher) send(pm *dripv1.Message) error {
	if p.err != nil {
		return p.err
	}
	if p.done {
		return errors.New("drip client: publish on a closed Publisher")
	}
	for {
		st, err := p.stream()
		if err != nil {
			return fmt.Errorf("drip client: no broker to publish to: %w", err)
		}
		if err := p.window(st); err != nil {
			return err
		}
		if p.st != st {
			continue // the window wait failed the stream over
		}
		if err := st.send(pm); err != nil {
			if err := p.failover(st, err); err != nil {
				return err
			}
			continue
		}
		p.sent++
		return nil
	}
}

// window waits until the stream can take another message, failing it over
// if it ends or its broker drains meanwhile.
func (p *Publisher) window(st *pubStream) error {
	if st.legacy != nil {
		return nil
	}
	for {
		st.mu.Lock()
		room := len(st.unacked) < p.c.opts.maxInFlight
		moving, ch := st.moving, st.ackCh
		st.mu.Unlock()
		select {
		case <-st.ended:
			st.mu.Lock()
			err := st.err
			st.mu.Unlock()
			return p.failover(st, err)
		default:
		}
		if moving {
			return p.failover(st, errBrokerMoving)
		}
		if room {
			return nil
		}
		select {
		case <-ch:
		case <-st.ended:
		case <-p.ctx.Done():
			return p.ctx.Err()
		}
	}
}

var errBrokerMoving = errors.New("broker is draining")

func (st *pubStream) send(pm *dripv1.Message) error {
	if st.legacy != nil {
		if err := st.legacy.Send(&dripv1.PublishRequest{Message: pm}); err != nil {
			return err
		}
		st.sent++
		return nil
	}
	st.mu.Lock()
	st.unacked = append(st.unacked, pm)
	st.sent++
	st.mu.Unlock()
	if err := st.bidi.Send(&dripv1.PublishRequest{Batch: []*dripv1.Message{pm}}); err != nil {
		st.mu.Lock()
		st.unacked = st.unacked[:len(st.unacked)-1] // not sent
		st.sent--
		st.mu.Unlock()
		return err
	}
	return nil
}

// failover ends st and moves to another broker. A broker that drained (or
// predates PublishStream) published exactly what it acknowledged, so the
// rest is resent; after a failure, what was unacknowledged is counted in
// flight. A broker's rejection of a message is returned instead, and stays.
func (p *Publisher) failover(st *pubStream, cause error) error {
	err := p.endStream(st, cause)
	if err != nil {
		return err
	}
	st.mu.Lock()
	exact := st.moving || status.Code(st.err) == codes.Unimplemented
	resend := st.unacked
	st.unacked = nil
	st.mu.Unlock()
	if status.Code(st.err) == codes.Unimplemented {
		p.legacy = true
	}
	f := Failover{From: st.addr, Err: cause}
	if exact {
		f.Resent = len(resend)
	} else {
		f.InFlight = uint64(len(resend))
		if st.legacy != nil {
			f.InFlight = st.sent // nothing says what the broker had read
		}
		p.inFlight += f.InFlight
		p.sent -= f.InFlight
		resend = nil
	}
	p.sent -= uint64(len(resend)) // counted again when resent
	if exact {
		p.c.failed(st.addr) // move on even though it still answers
	}
	next, err := p.stream()
	if err != nil {
		return fmt.Errorf("drip client: no broker to publish to: %w", err)
	}
	f.To = next.addr
	if p.c.opts.onFailover != nil && (f.Resent > 0 || f.InFlight > 0 || !exact || st.moving) {
		p.c.opts.onFailover(f)
	}
	for _, pm := range resend {
		if err := p.send(pm); err != nil {
			return err
		}
	}
	return nil
}

// endStream closes st and adds what it published to the summary; it
// returns a broker's rejection, which ends the publisher.
func (p *Publisher) endStream(st *pubStream, cause error) error {
	st.cancel()
	if st.bidi != nil {
		<-st.ended
	}
	if p.st == st {
		p.st = nil
	}
	st.mu.Lock()
	p.sum.Accepted += st.acked
	p.sum.Unmatched += st.unmatched
	err := st.err
	st.mu.Unlock()
	if err == nil {
		err = cause
	}
	if permanent(err) && status.Code(err) != codes.Unimplemented {
		p.err = fmt.Errorf("drip client: broker %s rejected a message: %w", st.addr, err)
		return p.err
	}
	return nil
}

// Sent returns the number of messages handed to brokers so far, less those
// lost in flight to brokers that failed.
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

// Close ends the stream and returns the brokers' summary, or the error that
// ended the publisher. Calling it again returns the same result.
func (p *Publisher) Close() (Summary, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return p.sum, p.err
	}
	defer p.cancel()
	if p.err != nil {
		p.done = true
		return Summary{}, p.err
	}
	for p.st != nil {
		st := p.st
		// A broker that drains gets no more; what it did not publish goes
		// elsewhere first.
		st.mu.Lock()
		moving := st.moving
		st.mu.Unlock()
		if moving {
			if err := p.failover(st, errBrokerMoving); err != nil {
				p.done = true
				return Summary{}, err
			}
			continue
		}
		if err := p.finish(st); err != nil {
			if p.err != nil {
				p.done = true
				return Summary{}, p.err
			}
			if err := p.failover(st, err); err != nil {
				p.done = true
				return Summary{}, err
			}
			continue
		}
	}
	p.done = true
	return p.sum, nil
}

// finish half-closes st and waits for the broker's final count.
func (p *Publisher) finish(st *pubStream) error {
	if st.legacy != nil {
		s, err := st.legacy.CloseAndRecv()
		if err != nil {
			return p.endStream(st, fmt.Errorf("closing the publish stream after %d messages: %w", st.sent, err))
		}
		p.st = nil
		p.sum.Accepted += s.GetAccepted()
		p.sum.Unmatched += s.GetUnmatched()
		if s.GetAccepted() < st.sent {
			return fmt.Errorf("broker accepted %d of %d messages", s.GetAccepted(), st.sent)
		}
		return nil
	}
	if err := st.bidi.CloseSend(); err != nil {
		return err
	}
	select {
	case <-st.ended:
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
	st.mu.Lock()
	err, moving, left := st.err, st.moving, len(st.unacked)
	st.mu.Unlock()
	if !errors.Is(err, io.EOF) || moving || left > 0 {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("broker acknowledged all but %d messages", left)
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
	pms := make([]*dripv1.Message, len(msgs))
	for i, m := range msgs {
		pm, err := m.toProto()
		if err != nil {
			return Summary{}, fmt.Errorf("drip client: message %d: %w", i, err)
		}
		pms[i] = pm
	}
	p, err := c.NewPublisher(ctx)
	if err != nil {
		return Summary{}, err
	}
	p.mu.Lock()
	for _, pm := range pms {
		if err := p.send(pm); err != nil {
			break // Close returns the same error
		}
	}
	p.mu.Unlock()
	return p.Close()
}
