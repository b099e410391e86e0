package bench

import (
	"context"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/content"
)

// The system under test is reached through these interfaces, so that the
// same oracle, ledger and clock drive drip and the systems it is compared
// with (internal/testbed/systems adapts ActiveMQ and NATS to them). By default the
// bench connects to drip brokers with the client package.

// Connector opens an Endpoint at one of Config.Brokers.
type Connector func(ctx context.Context, broker string) (Endpoint, error)

// Endpoint is the bench's connection to one broker; the subscribers and
// publishers placed at that broker share it.
type Endpoint interface {
	// Subscribe installs p. The subscription must deliver every published
	// message whose attributes satisfy p, with its payload unchanged.
	Subscribe(ctx context.Context, p content.Predicate) (Subscriber, error)
	// NewPublisher opens a publisher; cancelling ctx aborts it.
	NewPublisher(ctx context.Context) (Publisher, error)
	Close() error
}

// Subscriber receives one predicate's deliveries.
type Subscriber interface {
	// Next returns the payload of the next delivery, waiting until ctx
	// ends; a subscription that ended is an error.
	Next(ctx context.Context) ([]byte, error)
	// Lost is how many matching messages the system reported dropping
	// for this subscriber (0 when it does not report drops).
	Lost() uint64
	Close() error
}

// Publisher sends messages.
type Publisher interface {
	// Publish sends m's attributes with payload. It may block while the
	// system pushes back.
	Publish(m content.Message, payload []byte) error
	// Close ends the publisher once what it sent has been handed over, and
	// returns the system's account of it (zero when it gives none).
	Close() (client.Summary, error)
}

// DripEndpoint adapts a drip client connection; its subscriptions are made
// with opts (a deadline, two paths). Its publishers send client.Fields and
// its subscribers take client.Fields (WithFields): the bench reads only
// payloads, and a map per message would cost the machine what it measures.
func DripEndpoint(c *client.Client, opts ...client.SubscribeOption) Endpoint {
	return dripEndpoint{c, append([]client.SubscribeOption{client.WithFields()}, opts...)}
}

type dripEndpoint struct {
	c    *client.Client
	opts []client.SubscribeOption
}

func (e dripEndpoint) Subscribe(ctx context.Context, p content.Predicate) (Subscriber, error) {
	s, err := e.c.Subscribe(ctx, p.String(), e.opts...)
	if err != nil {
		return nil, err
	}
	return dripSubscriber{s}, nil
}

func (e dripEndpoint) NewPublisher(ctx context.Context) (Publisher, error) {
	p, err := e.c.NewPublisher(ctx)
	if err != nil {
		return nil, err
	}
	return &dripPublisher{p: p}, nil
}

func (e dripEndpoint) Close() error { return e.c.Close() }

type dripSubscriber struct{ s *client.Subscription }

func (s dripSubscriber) Next(ctx context.Context) ([]byte, error) {
	d, err := s.s.Next(ctx)
	return d.Payload, err
}

func (s dripSubscriber) Lost() uint64 { return s.s.Lost() }

// Duplicates is how many copies the client dropped by their stamps.
func (s dripSubscriber) Duplicates() uint64 { return s.s.Duplicates() }
func (s dripSubscriber) Close() error       { return s.s.Close() }

type dripPublisher struct {
	p      *client.Publisher
	fields client.Fields // reused: Publish encodes before it returns
}

func (p *dripPublisher) Publish(m content.Message, payload []byte) error {
	p.fields = AppendFields(p.fields[:0], m)
	return p.p.Publish(client.Message{Fields: p.fields, Payload: payload})
}

func (p *dripPublisher) Close() (client.Summary, error) { return p.p.Close() }

// InFlightLost is how many messages were in flight to brokers that failed.
func (p *dripPublisher) InFlightLost() uint64 { return p.p.InFlightLost() }

// Congestion is what congestion control did for the publisher.
func (p *dripPublisher) Congestion() client.CongestionStats { return p.p.Congestion() }

// Congestion is what congestion control did for the subscription.
func (s dripSubscriber) Congestion() client.CongestionStats { return s.s.Congestion() }
