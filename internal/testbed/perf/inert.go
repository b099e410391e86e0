package perf

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/testbed/stomp"
	"github.com/dripmesh/drip/internal/testbed/systems"
)

// inertPerConn is how many inert subscriptions share a connection.
const inertPerConn = 1000

// installTimeout bounds installing a case's inert filters (about a
// second for 10,000 when the broker takes them): a broker that refuses
// them, whose clients retry, fails the case with its refusal instead of
// holding the run.
const installTimeout = 2 * time.Minute

// inertSet holds inert filters installed at one broker, one subscription
// each (Henjes07 §4.5: every filter is a subscriber's). They receive
// nothing, so their clients keep a buffer of one delivery (drip) or frame
// (STOMP) instead of the default thousands.
type inertSet struct {
	t *target
	n int // installed: inertPredicate(1..n)

	mu      sync.Mutex
	drip    []*client.Client
	subs    []*client.Subscription
	stomp   []*stomp.Conn
	life    context.Context // the subscriptions' lifetime
	endLife context.CancelFunc
}

func newInertSet(t *target) *inertSet {
	life, end := context.WithCancel(context.Background())
	return &inertSet{t: t, life: life, endLife: end}
}

// grow installs filters n+1..to.
func (s *inertSet) grow(ctx context.Context, to int) error {
	if to <= s.n {
		return nil
	}
	// A setup that ends (Ctrl-C) must not leave subscribe calls waiting;
	// the case then ends anyway.
	stop := context.AfterFunc(ctx, s.endLife)
	defer stop()
	watchdog := time.AfterFunc(installTimeout, s.endLife)
	defer watchdog.Stop()
	conns := (to + inertPerConn - 1) / inertPerConn
	for i := len(s.drip) + len(s.stomp); i < conns; i++ {
		var err error
		switch s.t.system {
		case sysActiveMQ:
			var c *stomp.Conn
			c, err = stomp.Dial(ctx, s.t.first().Client, stomp.Options{Buffer: 1})
			if err == nil {
				s.stomp = append(s.stomp, c)
			}
		default:
			var c *client.Client
			c, err = dripDial(ctx, s.t.first().Client, client.WithBufferSize(1))
			if err == nil {
				s.drip = append(s.drip, c)
			}
		}
		if err != nil {
			return fmt.Errorf("inert filters at %s: %w", s.t.name, err)
		}
	}
	from := s.n
	err := parallel(ctx, to-from, 32, func(ctx context.Context, i int) error {
		k := from + i + 1
		conn := (k - 1) / inertPerConn
		text := inertPredicate(k)
		if s.t.system == sysActiveMQ {
			sel, err := systems.Selector(content.MustParse(text))
			if err != nil {
				return err
			}
			if _, err := s.stomp[conn].Subscribe(ctx, systems.ActiveMQTopic, stomp.Header{Key: "selector", Value: sel}); err != nil {
				return fmt.Errorf("inert filter %d at %s: %w", k, s.t.name, err)
			}
			return nil
		}
		sub, err := s.drip[conn].Subscribe(s.life, text)
		if err != nil {
			return fmt.Errorf("inert filter %d at %s: %w", k, s.t.name, err)
		}
		s.mu.Lock()
		s.subs = append(s.subs, sub)
		s.mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	s.n = to
	return nil
}

// close removes the filters with their connections.
func (s *inertSet) close() error {
	s.endLife()
	var errs []error
	for _, sub := range s.subs {
		errs = append(errs, ignoreClosed(sub.Close()))
	}
	for _, c := range s.drip {
		errs = append(errs, c.Close())
	}
	for _, c := range s.stomp {
		errs = append(errs, ignoreStompClosed(c.Close()))
	}
	return errors.Join(errs...)
}

func ignoreStompClosed(err error) error {
	if errors.Is(err, stomp.ErrClosed) {
		return nil
	}
	return err
}
