package bench

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/content"
)

// memSystem is a system under test that is not drip: an in-memory topic
// where every subscriber sees every message and filters it itself, as a
// NATS client does. dropEvery > 0 loses every dropEvery-th delivery.
type memSystem struct {
	mu        sync.Mutex
	subs      []*memSub
	dropEvery int
	n         int
	dropped   atomic.Uint64
	connects  []string
	opened    atomic.Int32 // publishers
}

type memSub struct {
	pred content.Predicate
	ch   chan []byte
}

func (s *memSystem) connect(_ context.Context, broker string) (Endpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connects = append(s.connects, broker)
	return memEndpoint{s}, nil
}

type memEndpoint struct{ s *memSystem }

func (e memEndpoint) Subscribe(_ context.Context, p content.Predicate) (Subscriber, error) {
	sub := &memSub{pred: p, ch: make(chan []byte, 1<<16)}
	e.s.mu.Lock()
	e.s.subs = append(e.s.subs, sub)
	e.s.mu.Unlock()
	return sub, nil
}

func (e memEndpoint) NewPublisher(context.Context) (Publisher, error) {
	e.s.opened.Add(1)
	return memPublisher(e), nil
}
func (e memEndpoint) Close() error { return nil }

func (s *memSub) Next(ctx context.Context) ([]byte, error) {
	select {
	case b := <-s.ch:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
func (s *memSub) Lost() uint64 { return 0 }
func (s *memSub) Close() error { return nil }

type memPublisher struct{ s *memSystem }

func (p memPublisher) Publish(m content.Message, payload []byte) error {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	for _, sub := range p.s.subs {
		if !sub.pred.Matches(m) {
			continue
		}
		p.s.n++
		if p.s.dropEvery > 0 && p.s.n%p.s.dropEvery == 0 {
			p.s.dropped.Add(1)
			continue
		}
		select {
		case sub.ch <- payload:
		default:
			return errors.New("memSystem: subscriber queue full")
		}
	}
	return nil
}

func (p memPublisher) Close() (client.Summary, error) { return client.Summary{}, nil }

// The oracle and ledger judge any system reached through Config.Connect,
// and the per-second undelivered counts add up to the total.
func TestRunWithCustomConnector(t *testing.T) {
	for _, dropEvery := range []int{0, 5} {
		sys := &memSystem{dropEvery: dropEvery}
		cfg := smallConfig([]string{"site-a", "site-b"})
		cfg.Connect = sys.connect
		var ready, started atomic.Int32
		cfg.Ready = func(context.Context) error { ready.Add(1); return nil }
		cfg.OnSendStart = func() { started.Add(1) }
		if dropEvery > 0 {
			cfg.Drain = 200 * time.Millisecond // the lost deliveries never come
		}
		rep, err := Run(runCtx(t), cfg)
		require.NoError(t, err)
		assert.Equal(t, []string{"site-a", "site-b"}, sys.connects)
		assert.Equal(t, int32(1), ready.Load())
		assert.Equal(t, int32(1), started.Load())
		assert.True(t, rep.Exact())
		assert.Positive(t, rep.Totals.Ideal)
		assert.Equal(t, sys.dropped.Load(), rep.Totals.Undelivered)
		var undelivered uint64
		for _, s := range rep.Series {
			undelivered += s.Undelivered
		}
		assert.Equal(t, rep.Totals.Undelivered, undelivered)
		if dropEvery > 0 {
			assert.Positive(t, undelivered)
		}
		require.Len(t, rep.Misses, int(min(undelivered, MaxMisses)), "each undelivered delivery listed")
		sendingStarted, err := time.Parse(time.RFC3339Nano, rep.SendingStarted)
		require.NoError(t, err, "the wall clock of the misses' origin")
		assert.WithinDuration(t, time.Now(), sendingStarted, time.Minute)
		for _, m := range rep.Misses {
			assert.Contains(t, cfg.Brokers, m.SubscriberBroker)
			assert.Contains(t, cfg.Brokers, m.PublisherBroker)
			assert.GreaterOrEqual(t, m.SentS, 0.0)
			assert.LessOrEqual(t, m.SentS, rep.SendSeconds+0.001, "sent while sending")
		}
	}
}

// TestPublishersOpenBeforeReady: the mesh settles with every publisher
// open, since opening a drip publisher subscribes to its congestion
// feedback (Config.Ready).
func TestPublishersOpenBeforeReady(t *testing.T) {
	sys := &memSystem{}
	cfg := smallConfig([]string{"site-a", "site-b"})
	cfg.Connect = sys.connect
	atReady := int32(-1)
	cfg.Ready = func(context.Context) error { atReady = sys.opened.Load(); return nil }
	_, err := Run(runCtx(t), cfg)
	require.NoError(t, err)
	require.Positive(t, cfg.Publishers)
	assert.Equal(t, int32(cfg.Publishers), atReady)
}

func TestRunReadyError(t *testing.T) {
	sys := &memSystem{}
	cfg := smallConfig([]string{"a"})
	cfg.Connect = sys.connect
	cfg.Ready = func(context.Context) error { return errors.New("routes never converged") }
	_, err := Run(runCtx(t), cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "waiting for routing to settle: routes never converged")
}
