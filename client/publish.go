package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

// Summary is the broker's account of a closed publish stream.
type Summary struct {
	Accepted  uint64 // messages accepted for routing
	Unmatched uint64 // of those, messages no subscriber anywhere matched
}

// Publisher is one publish stream. Close it to get the Summary and release
// the stream.
type Publisher struct {
	cancel context.CancelFunc

	mu     sync.Mutex // serialises sends: a gRPC stream allows one sender
	stream dripv1.Broker_PublishClient
	sent   uint64
	err    error // sticky once the stream has broken
	done   bool  // Close has run; sum and err are final
	sum    Summary
}

// NewPublisher opens a publish stream. Cancelling ctx aborts it; messages
// already sent may or may not have been published.
func (c *Client) NewPublisher(ctx context.Context) (*Publisher, error) {
	sctx, cancel := context.WithCancel(ctx)
	stream, err := c.api.Publish(sctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("drip client: opening a publish stream to %s: %w", c.addr, ctxOr(ctx, err))
	}
	return &Publisher{cancel: cancel, stream: stream}, nil
}

// Publish sends m. A message the client cannot encode (an unsupported
// attribute type, an empty name) is an error that leaves the stream usable.
// Once the broker has aborted the stream, Publish returns the broker's error
// (with codes.InvalidArgument for a malformed message, its message naming
// the message's index) and so does every later call.
func (p *Publisher) Publish(m Message) error {
	pm, err := m.toProto()
	if err != nil {
		return fmt.Errorf("drip client: message %d: %w", p.Sent(), err)
	}
	return p.send(pm)
}

func (p *Publisher) send(pm *dripv1.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	if p.done {
		return errors.New("drip client: publish on a closed Publisher")
	}
	if err := p.stream.Send(&dripv1.PublishRequest{Message: pm}); err != nil {
		// io.EOF means the broker ended the stream; its status comes from
		// the receive side.
		if errors.Is(err, io.EOF) {
			_, err = p.stream.CloseAndRecv()
			if err == nil {
				err = errors.New("broker ended the stream without an error")
			}
		}
		p.err = fmt.Errorf("drip client: publish stream broke after %d messages: %w", p.sent, err)
		return p.err
	}
	p.sent++
	return nil
}

// Sent returns the number of messages sent on the stream so far.
func (p *Publisher) Sent() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent
}

// Close ends the stream and returns the broker's summary, or the error that
// broke the stream. Calling it again returns the same result.
func (p *Publisher) Close() (Summary, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return p.sum, p.err
	}
	p.done = true
	defer p.cancel()
	if p.err != nil {
		return Summary{}, p.err
	}
	s, err := p.stream.CloseAndRecv()
	if err != nil {
		p.err = fmt.Errorf("drip client: closing the publish stream after %d messages: %w", p.sent, err)
		return Summary{}, p.err
	}
	p.sum = Summary{Accepted: s.GetAccepted(), Unmatched: s.GetUnmatched()}
	return p.sum, nil
}

// Publish sends msgs on a new stream and returns the broker's summary. Every
// message is encoded before any is sent, so an encoding error publishes
// nothing; after a broker error, messages before the one it names were
// published.
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
	for _, pm := range pms {
		if err := p.send(pm); err != nil {
			break // Close returns the same error
		}
	}
	return p.Close()
}
