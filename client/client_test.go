package client

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/broker/brokertest"
	"github.com/dripmesh/drip/internal/clientapi"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/wire"
)

// hangGuard bounds a wait that only a bug would make long, so that a
// deadlock fails the test instead of hanging it.
const hangGuard = 10 * time.Second

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// line starts n real brokers in a line (b0–b1–…) with the test limits:
// payloads up to 1 MiB, predicates of at most 4 filters.
func line(t *testing.T, n int, configure func(*broker.Config)) *brokertest.Cluster {
	t.Helper()
	var edges [][2]int
	for i := 1; i < n; i++ {
		edges = append(edges, [2]int{i - 1, i})
	}
	cl := brokertest.NewCluster(t, n, edges, func(c *broker.Config) {
		c.Messages.MaxPayload = 1 << 20
		c.Predicates.MaxFilters = 4
		if configure != nil {
			configure(c)
		}
	}, brokertest.InMemory())
	require.NoError(t, cl.WaitConverged(testContext(t)))
	return cl
}

// dialAt connects to the cluster through broker first, failing over to the
// others in turn.
func dialAt(t *testing.T, cl *brokertest.Cluster, first int, opts ...Option) *Client {
	t.Helper()
	opts = append([]Option{WithDialOptions(cl.DialOption()), WithReconnectBackoff(10*time.Millisecond, 100*time.Millisecond)}, opts...)
	c, err := Dial(testContext(t), cl.Target(first), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// converged waits until the cluster's routing has settled, so that a
// subscription just made is known everywhere.
func converged(t *testing.T, cl *brokertest.Cluster) {
	t.Helper()
	require.NoError(t, cl.WaitConverged(testContext(t)))
}

func TestPublishAndSubscribe(t *testing.T) {
	cl := line(t, 2, nil)
	sc, pc := dialAt(t, cl, 1), dialAt(t, cl, 0)
	ctx := testContext(t)
	sub, err := sc.Subscribe(ctx, `symbol = "DRIP" && price > 10`)
	require.NoError(t, err)
	defer sub.Close()
	assert.Equal(t, "b1", sub.Broker())
	assert.Equal(t, `symbol = "DRIP" && price > 10`, sub.Predicate())
	converged(t, cl)

	sum, err := pc.Publish(ctx,
		Message{Attrs: Attrs{"symbol": "DRIP", "price": 12.5}, Payload: []byte("yes")},
		// No broker's encoded predicate matches OTHER, so it is routed
		// nowhere (price 9 would be: a range maps to price's existence).
		Message{Attrs: Attrs{"symbol": "OTHER", "price": 12.5}},
	)
	require.NoError(t, err)
	assert.Equal(t, Summary{Accepted: 2, Unmatched: 1}, sum)
	d, err := sub.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, Attrs{"symbol": "DRIP", "price": 12.5}, d.Attrs)
	assert.Equal(t, []byte("yes"), d.Payload)
	assert.Equal(t, uint32(0), d.Ingress)
	assert.Equal(t, 1, d.Hops)
	assert.NotZero(t, d.Seq)
	assert.NotZero(t, d.IngressEpoch)
	assert.WithinDuration(t, time.Now(), d.PublishedAt, time.Minute)
}

func TestPublisherStream(t *testing.T) {
	cl := line(t, 1, nil)
	c := dialAt(t, cl, 0)
	ctx := testContext(t)
	sub, err := c.Subscribe(ctx, `n >= 0`)
	require.NoError(t, err)
	defer sub.Close()

	p, err := c.NewPublisher(ctx)
	require.NoError(t, err)
	for i := range 100 {
		require.NoError(t, p.Publish(Message{Attrs: Attrs{"n": i}}))
	}
	assert.Equal(t, uint64(100), p.Sent())
	sum, err := p.Close()
	require.NoError(t, err)
	assert.Equal(t, Summary{Accepted: 100}, sum)
	again, err := p.Close()
	require.NoError(t, err)
	assert.Equal(t, sum, again, "Close is idempotent")
	assert.ErrorContains(t, p.Publish(Message{Attrs: Attrs{"n": 1}}), "closed Publisher")

	for i := range 100 {
		d, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(i), d.Attrs["n"], "deliveries keep publication order")
	}
}

// TestPublisherBatchesStayIntact: a publisher that runs ahead of its
// stream sends batches cut from the front of its queue, and reuses a
// batch's buffers once the broker has acknowledged it: every message
// arrives whole and in order, with payloads of varying sizes, and the
// buffers were reused.
func TestPublisherBatchesStayIntact(t *testing.T) {
	cl := line(t, 1, nil)
	c := dialAt(t, cl, 0)
	ctx := testContext(t)
	sub, err := c.Subscribe(ctx, `n >= 0`, WithFields())
	require.NoError(t, err)
	defer sub.Close()

	const n = 3 * DefaultMaxInFlight
	payload := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, i%97) }
	p, err := c.NewPublisher(ctx)
	require.NoError(t, err)
	received := make(chan error, 1)
	go func() {
		for i := range n {
			d, err := sub.Next(ctx)
			if err == nil && (len(d.Fields) != 1 || d.Fields[0].Int() != int64(i) || !bytes.Equal(d.Payload, payload(i))) {
				err = fmt.Errorf("delivery %d: fields %v, payload of %d bytes", i, d.Fields, len(d.Payload))
			}
			if err != nil {
				received <- err
				return
			}
		}
		received <- nil
	}()
	var fs Fields
	for i := range n {
		if i > 0 && i%DefaultMaxInFlight == 0 {
			// Once everything sent is acknowledged, the next message
			// goes into a batch that was sent before.
			p.mu.Lock()
			for p.queued > 0 {
				p.cond.Wait()
			}
			assert.Empty(t, p.queue, "everything was sent")
			assert.NotEmpty(t, p.spare, "acknowledged batches are kept for reuse")
			p.mu.Unlock()
		}
		fs.Reset()
		fs.Int("n", int64(i))
		require.NoError(t, p.Publish(Message{Fields: fs, Payload: payload(i)}))
	}
	sum, err := p.Close()
	require.NoError(t, err)
	assert.Equal(t, Summary{Accepted: n}, sum)
	require.NoError(t, <-received)
}

func TestPublishEncodingErrors(t *testing.T) {
	tests := []struct {
		name  string
		attrs Attrs
		want  string
	}{
		{"int32", Attrs{"a": int32(1)}, `attribute "a": value of type int32 is not supported`},
		{"uint64", Attrs{"big": uint64(1)}, `attribute "big": value of type uint64`},
		{"float32", Attrs{"f": float32(1)}, `attribute "f": value of type float32`},
		{"bytes", Attrs{"raw": []byte("x")}, `attribute "raw": value of type []uint8`},
		{"nil", Attrs{"z": nil}, `attribute "z": value is nil`},
		{"struct", Attrs{"t": time.Time{}}, `attribute "t": value of type time.Time`},
		{"empty name", Attrs{"": "x"}, "attribute with an empty name"},
		{"name not UTF-8", Attrs{"a\xff": "x"}, `attribute "a\xff": name is not valid UTF-8`},
		{"value not UTF-8", Attrs{"s": "\xc3("}, `attribute "s": string value is not valid UTF-8`},
	}
	cl := line(t, 1, nil)
	c := dialAt(t, cl, 0)
	ctx := testContext(t)
	p, err := c.NewPublisher(ctx)
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Publish(Message{Attrs: tt.attrs})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "message 0: "+tt.want)

			_, err = c.Publish(ctx, Message{Attrs: Attrs{"ok": 1}}, Message{Attrs: tt.attrs})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "message 1: "+tt.want)
		})
	}
	// An encoding error leaves the stream usable, and Client.Publish checks
	// every message before sending any.
	require.NoError(t, p.Publish(Message{Attrs: Attrs{"ok": 1}}))
	sum, err := p.Close()
	require.NoError(t, err)
	assert.Equal(t, uint64(1), sum.Accepted)
	assert.Equal(t, 1.0, testutil.ToFloat64(cl.Broker(0).PublishedCounter()))
}

func TestPublishAbortedByBroker(t *testing.T) {
	cl := line(t, 1, func(c *broker.Config) { c.Messages.MaxPayload = 4 })
	c := dialAt(t, cl, 0)
	ctx := testContext(t)
	p, err := c.NewPublisher(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Publish(Message{Attrs: Attrs{"a": 1}, Payload: []byte("ok")}))
	require.NoError(t, p.Publish(Message{Attrs: Attrs{"a": 2}, Payload: []byte("ok")}))
	bad := Message{Attrs: Attrs{"a": 3}, Payload: []byte("too long")}
	// The abort reaches the client asynchronously: keep publishing until a
	// Send notices it.
	var pubErr error
	for ctx.Err() == nil {
		if pubErr = p.Publish(bad); pubErr != nil {
			break
		}
	}
	require.Error(t, pubErr)
	assert.Equal(t, codes.InvalidArgument, status.Code(pubErr))
	assert.Contains(t, pubErr.Error(), "message 2: message payload is 8 bytes, over the limit of 4")
	assert.Equal(t, pubErr, p.Publish(Message{Attrs: Attrs{"a": 4}}), "the error is sticky")
	_, closeErr := p.Close()
	assert.Equal(t, pubErr, closeErr)
	assert.Equal(t, pubErr, p.Publish(Message{Attrs: Attrs{"a": 4}}), "also after Close")

	// Close alone reports the abort too.
	p, err = c.NewPublisher(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Publish(bad))
	_, err = p.Close()
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, err.Error(), "message 0: ")

	_, err = c.Publish(ctx, Message{Attrs: Attrs{"a": 1}}, bad)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, err.Error(), "message 1: ")
}

func TestSubscribeRejected(t *testing.T) {
	cl := line(t, 1, nil)
	c := dialAt(t, cl, 0)
	ctx := testContext(t)
	tests := []struct{ pred, want string }{
		{`a = `, "at byte 4: expected a value"},
		{`a = 1 && `, "at byte 9"},
		{``, "predicate is empty"},
		{`s = "\xff"`, `no message can satisfy s = "\xff"`},
		{`a=1||b=1||c=1||d=1||e=1`, "more than 4 filters"},
	}
	for _, tt := range tests {
		t.Run(tt.pred, func(t *testing.T) {
			sub, err := c.Subscribe(ctx, tt.pred)
			require.Error(t, err)
			assert.Nil(t, sub)
			assert.Equal(t, codes.InvalidArgument, status.Code(err))
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestUpdate(t *testing.T) {
	cl := line(t, 1, nil)
	c := dialAt(t, cl, 0)
	ctx := testContext(t)
	sub, err := c.Subscribe(ctx, `a = 1`)
	require.NoError(t, err)
	defer sub.Close()

	pub := func(a int) {
		_, err := c.Publish(ctx, Message{Attrs: Attrs{"a": a}})
		require.NoError(t, err)
	}
	next := func() int64 {
		d, err := sub.Next(ctx)
		require.NoError(t, err)
		return d.Attrs["a"].(int64)
	}
	pub(1)
	pub(2)
	require.NoError(t, sub.Update(`a=2 ||a =3`))
	assert.Equal(t, `a = 2 || a = 3`, sub.Predicate())
	pub(1)
	pub(3)
	assert.Equal(t, int64(1), next(), "matched by the old predicate")
	assert.Equal(t, int64(3), next(), "matched by the new predicate")

	// A syntax error never reaches the broker: the subscription is intact.
	err = sub.Update(`a = `)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at byte 4")
	pub(2)
	assert.Equal(t, int64(2), next())

	// A predicate the broker refuses ends the subscription, as the
	// protocol prescribes.
	err = sub.Update(`a=1||a=2||a=3||a=4||a=5`)
	require.Error(t, err)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, err.Error(), "more than 4 filters")
	_, err = sub.Next(ctx)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
}

// TestUpdateNotStuckBehindFullBuffer updates a subscription whose buffer is
// full and that nobody reads: the acknowledgement sits behind undelivered
// messages on the stream, and Update must still return.
func TestUpdateNotStuckBehindFullBuffer(t *testing.T) {
	cl := line(t, 1, nil)
	c := dialAt(t, cl, 0, WithBufferSize(1))
	ctx := testContext(t)
	sub, err := c.Subscribe(ctx, `a exists`)
	require.NoError(t, err)
	defer sub.Close()

	msgs := make([]Message, 50)
	for i := range msgs {
		msgs[i] = Message{Attrs: Attrs{"a": i}}
	}
	_, err = c.Publish(ctx, msgs...)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { done <- sub.Update(`b exists`) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(hangGuard):
		t.Fatal("Update is stuck behind the full delivery buffer")
	}
	_, err = c.Publish(ctx, Message{Attrs: Attrs{"a": 50}}, Message{Attrs: Attrs{"b": 51}})
	require.NoError(t, err)
	for i := range 50 {
		d, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(i), d.Attrs["a"], "nothing lost or reordered across the switch")
	}
	d, err := sub.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, Attrs{"b": int64(51)}, d.Attrs)
}

// TestSlowReaderLosesCounted checks the bounded-memory contract: a
// subscriber that does not read loses messages — at the broker, or at the
// client once its read-ahead is full — instead of buffering without
// bound, and every message is accounted for as delivered or lost.
func TestSlowReaderLosesCounted(t *testing.T) {
	cl := line(t, 1, func(c *broker.Config) { c.SubscriberQueue = 2 })
	// A fixed window disables gRPC's window growth, so that the stream
	// stalls after a few large messages.
	c := dialAt(t, cl, 0, WithBufferSize(1), WithReadAhead(64<<10),
		WithDialOptions(grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10)))
	ctx := testContext(t)
	sub, err := c.Subscribe(ctx, `n >= 0`)
	require.NoError(t, err)
	defer sub.Close()

	const n = 200
	payload := make([]byte, 16<<10)
	pc := dialAt(t, cl, 0)
	p, err := pc.NewPublisher(ctx)
	require.NoError(t, err)
	for i := range n {
		require.NoError(t, p.Publish(Message{Attrs: Attrs{"n": i}, Payload: payload}))
	}
	_, err = p.Close()
	require.NoError(t, err)

	delivered, lostSeen := drainCounting(t, ctx, sub, n, 0)
	assert.Equal(t, uint64(n), delivered+sub.Lost())
	assert.Greater(t, sub.Lost(), uint64(n/2), "the overload was dropped, not buffered")
	assert.Equal(t, lostSeen, sub.Lost(), "every loss stamped on a delivery or seen in Lost")
}

// drainCounting reads sub until delivered and lost add up to n, checking
// order and that each delivery's Lost adds up to its LostTotal; it
// returns what it read and the losses stamped plus those learned after
// the last delivery.
func drainCounting(t *testing.T, ctx context.Context, sub *Subscription, n, lostBefore uint64) (delivered, lostSeen uint64) {
	t.Helper()
	lostSeen = lostBefore // stamped on deliveries the caller read
	last := int64(-1)
	for delivered+sub.Lost() < n {
		// The last event may be a Lost report with no delivery after it:
		// poll so that the loop sees it.
		pollCtx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		d, err := sub.Next(pollCtx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			continue
		}
		require.NoError(t, err)
		delivered++
		lostSeen += d.Lost
		require.Greater(t, d.Attrs["n"].(int64), last, "order kept")
		last = d.Attrs["n"].(int64)
		if d.Lost > 0 {
			require.Equal(t, lostSeen, d.LostTotal)
		}
	}
	return delivered, max(lostSeen, sub.Lost())
}

// TestSlowReaderLearnsOfLossPromptly is the probe of a subscriber reading
// 10 messages a second behind a fast publisher, whose Lost events used to
// wait behind its whole backlog (broker queue, gRPC window, client
// buffer): it learns of its first loss within a few deliveries — the
// read-ahead's wait and one delivery — not after thousands, and every
// message is delivered or counted lost.
func TestSlowReaderLearnsOfLossPromptly(t *testing.T) {
	cl, ctx, sub := slowReader(t)

	const n = 5000
	published := make(chan error, 1)
	go func() {
		p, err := dialAt(t, cl, 0).NewPublisher(ctx)
		if err == nil {
			for i := 0; i < n && err == nil; i++ {
				err = p.Publish(Message{Attrs: Attrs{"n": i}, Payload: make([]byte, 200)})
			}
			if err == nil {
				_, err = p.Close()
			}
		}
		published <- err
	}()

	// 10 a second, until the first loss shows: 20 reads is two seconds,
	// where the backlog before would have taken minutes.
	reads := 0
	var (
		d   Delivery
		err error
	)
	for reads < 20 && d.Lost == 0 {
		time.Sleep(100 * time.Millisecond)
		d, err = sub.Next(ctx)
		require.NoError(t, err)
		reads++
	}
	require.Positive(t, d.Lost, "no loss reported in %d deliveries read 10 a second", reads)
	t.Logf("first loss (%d) reported with delivery %d", d.Lost, reads)
	require.NoError(t, <-published)

	delivered, lostSeen := drainCounting(t, ctx, sub, n-uint64(reads), d.Lost)
	assert.Equal(t, uint64(n), uint64(reads)+delivered+sub.Lost(), "every message delivered or counted lost")
	assert.Equal(t, lostSeen, sub.Lost())
}

// slowReader subscribes to everything on a one-broker mesh with a small
// buffer and read-ahead, so that a slow reader loses messages soon.
func slowReader(t *testing.T) (*brokertest.Cluster, context.Context, *Subscription) {
	t.Helper()
	cl := line(t, 1, nil)
	c := dialAt(t, cl, 0, WithBufferSize(4), WithReadAhead(64<<10))
	ctx := testContext(t)
	sub, err := c.Subscribe(ctx, `n >= 0`)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	return cl, ctx, sub
}

// TestLossSignalledWithoutReading: a subscriber that reads nothing hears
// of its loss through Losses, and the first delivery it then reads
// carries it.
func TestLossSignalledWithoutReading(t *testing.T) {
	cl, ctx, sub := slowReader(t)

	const n = 2000
	p, err := dialAt(t, cl, 0).NewPublisher(ctx)
	require.NoError(t, err)
	for i := range n {
		require.NoError(t, p.Publish(Message{Attrs: Attrs{"n": i}, Payload: make([]byte, 200)}))
	}
	_, err = p.Close()
	require.NoError(t, err)

	select {
	case <-sub.Losses():
	case <-time.After(hangGuard):
		t.Fatal("no loss signalled to a subscriber that reads nothing")
	}
	lost := sub.Lost()
	require.Positive(t, lost)
	d, err := sub.Next(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, d.Lost, lost, "the first delivery read carries the loss")
	assert.Equal(t, d.Lost, d.LostTotal)
}

func TestNextEnds(t *testing.T) {
	t.Run("Close", func(t *testing.T) {
		cl := line(t, 1, nil)
		c := dialAt(t, cl, 0)
		ctx := testContext(t)
		sub, err := c.Subscribe(ctx, `a = 1`)
		require.NoError(t, err)
		_, err = c.Publish(ctx, Message{Attrs: Attrs{"a": 1}})
		require.NoError(t, err)

		_, err = sub.Next(ctx)
		require.NoError(t, err)
		blocked := make(chan error, 1)
		go func() {
			_, err := sub.Next(ctx) // nothing more comes: waits for Close
			blocked <- err
		}()
		require.NoError(t, sub.Close())
		assert.ErrorIs(t, <-blocked, ErrClosed)
		_, err = sub.Next(ctx)
		assert.ErrorIs(t, err, ErrClosed)
		assert.ErrorIs(t, sub.Update(`a = 2`), ErrClosed)
		require.NoError(t, sub.Close(), "Close is idempotent")
	})
	t.Run("Next context", func(t *testing.T) {
		cl := line(t, 1, nil)
		c := dialAt(t, cl, 0)
		sub, err := c.Subscribe(testContext(t), `a = 1`)
		require.NoError(t, err)
		defer sub.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = sub.Next(ctx)
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("Subscribe context", func(t *testing.T) {
		cl := line(t, 1, nil)
		c := dialAt(t, cl, 0)
		ctx, cancel := context.WithCancel(context.Background())
		sub, err := c.Subscribe(ctx, `a = 1`)
		require.NoError(t, err)
		defer sub.Close()
		cancel()
		_, err = sub.Next(testContext(t))
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("broker ends cleanly after buffered deliveries", func(t *testing.T) {
		ctx := testContext(t)
		c := dialScripted(t, &scriptedBroker{events: []*dripv1.Delivery{published(1), published(2)}, end: true})
		sub, err := c.Subscribe(ctx, `a = 1`)
		require.NoError(t, err)
		defer sub.Close()
		for range 2 {
			_, err := sub.Next(ctx)
			require.NoError(t, err)
		}
		_, err = sub.Next(ctx)
		assert.ErrorIs(t, err, io.EOF)
	})
	t.Run("no broker within the failover wait", func(t *testing.T) {
		cl := line(t, 1, nil)
		c := dialAt(t, cl, 0, WithFailoverWait(300*time.Millisecond))
		ctx := testContext(t)
		sub, err := c.Subscribe(ctx, `a = 1`)
		require.NoError(t, err)
		defer sub.Close()
		cl.Kill(0)
		_, err = sub.Next(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no broker reachable since")
	})
}

// scriptedBroker answers Subscribe with an acknowledgement and then the
// given events, to test the client against brokers that misbehave; it is
// not a broker.
type scriptedBroker struct {
	dripv1.UnimplementedBrokerServer
	first  *dripv1.Delivery // sent instead of the acknowledgement
	events []*dripv1.Delivery
	end    bool // end the stream cleanly after the events
}

func (s *scriptedBroker) Subscribe(stream dripv1.Broker_SubscribeServer) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	first := s.first
	if first == nil {
		first = &dripv1.Delivery{Event: &dripv1.Delivery_Subscribed{Subscribed: &dripv1.Subscribed{SubscriptionId: 1, Broker: "scripted"}}}
	}
	if err := stream.Send(first); err != nil {
		return err
	}
	for _, ev := range s.events {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	if s.end {
		return nil
	}
	<-stream.Context().Done()
	return nil
}

func published(a int64) *dripv1.Delivery {
	return &dripv1.Delivery{Event: &dripv1.Delivery_Message{Message: &dripv1.Published{Message: clientapi.MessageToProto(
		content.MessageFrom(map[string]content.Value{"a": content.Int(a)}))}}}
}

func dialScripted(t *testing.T, s *scriptedBroker) *Client {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	dripv1.RegisterBrokerServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	c, err := Dial(testContext(t), "passthrough:///scripted", WithDialOptions(grpc.WithContextDialer(
		func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSubscribeProtocolViolation(t *testing.T) {
	c := dialScripted(t, &scriptedBroker{first: &dripv1.Delivery{Event: &dripv1.Delivery_Lost{Lost: &dripv1.Lost{Count: 1, Total: 1}}}})
	_, err := c.Subscribe(testContext(t), `a = 1`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "before acknowledging the predicate")
}

func TestMalformedDeliveryEndsSubscription(t *testing.T) {
	tests := []struct {
		name string
		msg  *dripv1.Message
		want string
	}{
		{"missing message", nil, "message is missing"},
		{"unset value", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a"}}}, `attribute "a" has no value`},
		{"empty name", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "", Value: &dripv1.Value{Kind: &dripv1.Value_BoolValue{}}}}}, "attribute 0 has an empty name"},
		{"duplicate", &dripv1.Message{Attributes: []*dripv1.Attribute{
			{Name: "a", Value: &dripv1.Value{Kind: &dripv1.Value_BoolValue{}}},
			{Name: "a", Value: &dripv1.Value{Kind: &dripv1.Value_BoolValue{}}},
		}}, `attribute "a" given twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialScripted(t, &scriptedBroker{events: []*dripv1.Delivery{
				{Event: &dripv1.Delivery_Message{Message: &dripv1.Published{Message: tt.msg}}}}})
			ctx := testContext(t)
			sub, err := c.Subscribe(ctx, `a = 1`)
			require.NoError(t, err)
			defer sub.Close()
			_, err = sub.Next(ctx)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "malformed delivery: "+tt.want)
		})
	}
}

// TestCloseReleasesBroker checks that Close ends the stream at the broker.
func TestCloseReleasesBroker(t *testing.T) {
	cl := line(t, 1, nil)
	c := dialAt(t, cl, 0)
	ctx := testContext(t)
	subs := make([]*Subscription, 5)
	for i := range subs {
		var err error
		subs[i], err = c.Subscribe(ctx, fmt.Sprintf("a = %d", i))
		require.NoError(t, err)
	}
	count := func() int { return cl.Broker(0).Node().Subscriptions() }
	assert.Equal(t, 5, count())
	for _, s := range subs {
		require.NoError(t, s.Close())
	}
	require.Eventually(t, func() bool { return count() == 0 }, hangGuard, time.Millisecond)
}

func TestConcurrentUse(t *testing.T) {
	cl := line(t, 1, nil)
	c := dialAt(t, cl, 0)
	ctx := testContext(t)
	sub, err := c.Subscribe(ctx, `w >= 0`)
	require.NoError(t, err)
	defer sub.Close()
	p, err := c.NewPublisher(ctx)
	require.NoError(t, err)

	const writers, each = 4, 50
	errs := make(chan error, writers+1)
	for w := range writers {
		go func() {
			for i := range each {
				if err := p.Publish(Message{Attrs: Attrs{"w": w, "i": i}}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	go func() {
		for i := range 5 {
			if err := sub.Update(fmt.Sprintf("w >= 0 || z = %d", i)); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for range writers + 1 {
		require.NoError(t, <-errs)
	}
	sum, err := p.Close()
	require.NoError(t, err)
	require.Equal(t, uint64(writers*each), sum.Accepted)
	seen := map[[2]int64]bool{}
	for range writers * each {
		d, err := sub.Next(ctx)
		require.NoError(t, err)
		k := [2]int64{d.Attrs["w"].(int64), d.Attrs["i"].(int64)}
		require.False(t, seen[k], "duplicate %v", k)
		seen[k] = true
	}
}

func TestDialErrors(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := lis.Addr().String()
		require.NoError(t, lis.Close()) // nothing listens there now
		_, err = Dial(testContext(t), addr)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "connecting to broker "+addr)
		assert.Contains(t, err.Error(), "refused")
	})
	t.Run("every address refused", func(t *testing.T) {
		_, err := Dial(testContext(t), "127.0.0.1:1, 127.0.0.1:2")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "connecting to broker 127.0.0.1:1")
		assert.Contains(t, err.Error(), "connecting to broker 127.0.0.1:2")
	})
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := Dial(ctx, "127.0.0.1:1")
		assert.ErrorIs(t, err, context.Canceled)
	})
	for _, tc := range []struct{ target, want string }{
		{"127.0.0.1", `broker address "127.0.0.1" has no port (want host:port, for example 127.0.0.1:7000)`},
		{"a:1,b", `broker address "b" has no port (want host:port, for example 127.0.0.1:7000)`},
		{"dns:///brokers", `broker address "dns:///brokers" has no port (want dns:///name:port)`},
		{" , ", `no broker address in`},
	} {
		t.Run(tc.target, func(t *testing.T) {
			_, err := Dial(testContext(t), tc.target)
			assert.EqualError(t, err, "drip client: "+tc.want+map[bool]string{true: ` " , "`}[tc.target == " , "])
		})
	}
}

func TestTLS(t *testing.T) {
	cert, pool := selfSigned(t, "drip.test")
	b, err := broker.New(brokertest.FastConfig(0))
	require.NoError(t, err)
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(append(broker.ClientServerOptions(), grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))...)
	dripv1.RegisterBrokerServer(srv, b.ClientService())
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = srv.Serve(lis) }()
	go func() { defer wg.Done(); _ = b.Run(ctx) }()
	t.Cleanup(func() { stop(); <-b.Stopped(); srv.Stop(); wg.Wait() })
	dialer := WithDialOptions(grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))

	c, err := Dial(testContext(t), "passthrough:///bufnet", dialer, WithTLS(&tls.Config{RootCAs: pool, ServerName: "drip.test"}))
	require.NoError(t, err)
	defer c.Close()
	sub, err := c.Subscribe(testContext(t), `a = 1`)
	require.NoError(t, err)
	require.NoError(t, sub.Close())

	// Untrusted: the reason reaches the caller of Dial.
	_, err = Dial(testContext(t), "passthrough:///bufnet", WithTLS(&tls.Config{ServerName: "drip.test"}), dialer)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate")

	// Plaintext against a TLS server fails too.
	_, err = Dial(testContext(t), "passthrough:///bufnet", dialer)
	require.Error(t, err)
}

func TestCancelledContextErrors(t *testing.T) {
	cl := line(t, 1, nil)
	c := dialAt(t, cl, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Subscribe(ctx, `a = 1`)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = c.NewPublisher(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = c.Publish(ctx, Message{Attrs: Attrs{"a": 1}})
	assert.ErrorIs(t, err, context.Canceled)
}

func selfSigned(t *testing.T, host string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestMessageWireRoundTrip: what the client publishes, the broker decodes
// to the same attributes, protobuf reads the same way, and the client's
// delivery decoder gives back (integers as int64).
func TestMessageWireRoundTrip(t *testing.T) {
	m := Message{Attrs: Attrs{"s": "x\x00y", "i": int64(-5), "n": 7, "f": -0.5, "b": true, "z": 0}, Payload: []byte{0xff}}
	cc := []byte{0x10, 0x2a} // a congestion header: seq 42
	entry, _, err := appendBatchEntry(nil, m, cc, nil)
	require.NoError(t, err)
	// The entry is a PublishRequest's batch field: its value is a Message.
	var req dripv1.PublishRequest
	require.NoError(t, proto.Unmarshal(entry, &req))
	require.Len(t, req.Batch, 1)
	var names []string
	for _, a := range req.Batch[0].Attributes {
		names = append(names, a.Name)
	}
	assert.Equal(t, "b f i n s z", strings.Join(names, " "), "sorted: equal messages encode equally")
	raw, err := proto.Marshal(req.Batch[0])
	require.NoError(t, err)
	cm, err := wire.DecodeMessage(raw, wire.DefaultMessageLimits())
	require.NoError(t, err)
	v, _ := cm.Get("f")
	assert.Equal(t, content.Float(-0.5), v)
	assert.Equal(t, cc, req.Batch[0].Congestion)
	back, backCC, err := messageFromWire(raw, nil)
	require.NoError(t, err)
	assert.Equal(t, Message{Attrs: Attrs{"s": "x\x00y", "i": int64(-5), "n": int64(7), "f": -0.5, "b": true, "z": int64(0)}, Payload: []byte{0xff}}, back)
	assert.Equal(t, cc, backCC)
}

// TestFieldsRoundTrip: a message of Fields encodes as the same message of
// Attrs does, sorted by name (so that brokers need not sort it), and
// decodes back to the same Fields in that order with WithFields' decoder,
// or to the Attrs map without.
func TestFieldsRoundTrip(t *testing.T) {
	var fs Fields
	fs.Str("s", "x\x00y").Int("i", -5).Float("f", -0.5).Bool("b", true).Bool("no", false).Int("z", 0).Str("e", "")
	m := Message{Fields: fs, Payload: []byte{0xff}, Deadline: time.Second}
	cc := []byte{0x10, 0x2a}
	entry, _, err := appendBatchEntry(nil, m, cc, nil)
	require.NoError(t, err)
	var req dripv1.PublishRequest
	require.NoError(t, proto.Unmarshal(entry, &req))
	require.Len(t, req.Batch, 1)
	raw, err := proto.Marshal(req.Batch[0])
	require.NoError(t, err)
	cm, err := wire.DecodeMessage(raw, wire.DefaultMessageLimits())
	require.NoError(t, err, "the broker takes it")
	assert.Equal(t, 7, cm.Len())

	var space Fields
	back, backCC, err := messageFromWire(raw, &space)
	require.NoError(t, err)
	byName := slices.Clone(fs)
	slices.SortFunc(byName, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
	assert.Equal(t, byName, back.Fields, "sorted by name")
	attrsEntry, _, err := appendBatchEntry(nil, Message{Attrs: fs.Attrs(), Payload: []byte{0xff}, Deadline: time.Second}, cc, nil)
	require.NoError(t, err)
	assert.Equal(t, attrsEntry, entry, "the bytes of the same message of Attrs")
	assert.Nil(t, back.Attrs)
	assert.Equal(t, cc, backCC)
	assert.Equal(t, []byte{0xff}, back.Payload)
	asMap, _, err := messageFromWire(raw, nil)
	require.NoError(t, err)
	assert.Equal(t, fs.Attrs(), asMap.Attrs)
	assert.Equal(t, Attrs{"s": "x\x00y", "i": int64(-5), "f": -0.5, "b": true, "no": false, "z": int64(0), "e": ""}, asMap.Attrs)

	// A second message decoded into the same space leaves the first's
	// fields as they were.
	again, _, err := messageFromWire(raw, &space)
	require.NoError(t, err)
	last := len(again.Fields) - 2 // "s"
	again.Fields[last].s = "changed"
	assert.Equal(t, "x\x00y", back.Fields[last].Str())
}

// TestFieldsRefused: what brokers would refuse, the client refuses first,
// naming the attribute, and appends nothing.
func TestFieldsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Message
		want string
	}{
		{"twice", Message{Fields: *(&Fields{}).Int("a", 1).Str("b", "x").Int("a", 2)}, `attribute "a" given twice`},
		{"empty name", Message{Fields: *(&Fields{}).Int("", 1)}, "empty name"},
		{"bad name", Message{Fields: *(&Fields{}).Int("\xff", 1)}, "name is not valid UTF-8"},
		{"bad string", Message{Fields: *(&Fields{}).Str("s", "\xff")}, `attribute "s": string value is not valid UTF-8`},
		{"unset", Message{Fields: Fields{{Name: "u"}}}, `attribute "u": value is unset`},
		{"both", Message{Attrs: Attrs{"a": 1}, Fields: *(&Fields{}).Int("b", 1)}, "both Attrs and Fields"},
		{"deadline", Message{Fields: *(&Fields{}).Int("a", 1), Deadline: 2 * time.Hour}, "deadline 2h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := appendBatchEntry([]byte{1}, tc.m, nil, nil)
			require.ErrorContains(t, err, tc.want)
			assert.Equal(t, []byte{1}, out)
		})
	}
}

// TestFieldsAccessors: each kind reads back as itself and as zero through
// the other accessors.
func TestFieldsAccessors(t *testing.T) {
	var fs Fields
	fs.Str("s", "v").Int("i", -3).Float("f", 2.5).Bool("b", true)
	s, _ := fs.Get("s")
	i, _ := fs.Get("i")
	f, _ := fs.Get("f")
	b, _ := fs.Get("b")
	assert.Equal(t, []Kind{KindString, KindInt, KindFloat, KindBool}, []Kind{s.Kind(), i.Kind(), f.Kind(), b.Kind()})
	assert.Equal(t, "v", s.Str())
	assert.Equal(t, int64(-3), i.Int())
	assert.Equal(t, 2.5, f.Float())
	assert.True(t, b.Bool())
	assert.Zero(t, s.Int())
	assert.Zero(t, i.Float())
	assert.False(t, f.Bool())
	assert.Empty(t, b.Str())
	_, ok := fs.Get("missing")
	assert.False(t, ok)
	fs.Reset()
	assert.Empty(t, fs)
	assert.Positive(t, cap(fs), "Reset keeps the space")
}

func BenchmarkMessageEncode(b *testing.B) {
	attrs := Message{Attrs: Attrs{"a00": "government", "a01": "market", "a02": "police", "a03": "president",
		"a04": "minister", "a05": "country", "a06": 3, "a07": 40, "a08": 99, "a09": 0}, Payload: make([]byte, 32)}
	var fs Fields
	fs.Str("a00", "government").Str("a01", "market").Str("a02", "police").Str("a03", "president").Str("a04", "minister").
		Str("a05", "country").Int("a06", 3).Int("a07", 40).Int("a08", 99).Int("a09", 0)
	fields := Message{Fields: fs, Payload: make([]byte, 32)}
	for _, tc := range []struct {
		name string
		m    Message
	}{{"attrs", attrs}, {"fields", fields}} {
		b.Run(tc.name, func(b *testing.B) {
			var buf []byte
			var names []string
			b.ReportAllocs()
			for b.Loop() {
				var err error
				buf, names, err = appendBatchEntry(buf[:0], tc.m, nil, names)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDeliveryDecode decodes a batch of 64 deliveries of ten
// attributes, into Attrs maps and into Fields (WithFields).
func BenchmarkDeliveryDecode(b *testing.B) {
	m := Message{Attrs: Attrs{"a00": "government", "a01": "market", "a02": "police", "a03": "president",
		"a04": "minister", "a05": "country", "a06": 3, "a07": 40, "a08": 99, "a09": 1234567}, Payload: make([]byte, 32)}
	entry, _, err := appendBatchEntry(nil, m, nil, nil)
	require.NoError(b, err)
	_, _, n := protowire.ConsumeTag(entry)
	raw, _ := protowire.ConsumeBytes(entry[n:])
	var ps []*wire.Published
	for i := range 64 {
		ps = append(ps, new(wire.NewPublished(raw, wire.PublishedHeader{Ingress: 1, PublishedAt: 1, Epoch: 1, Seq: uint64(i + 1)})))
	}
	event := wire.AppendDeliveryBatch(nil, ps)
	for _, fields := range []bool{false, true} {
		b.Run(map[bool]string{false: "attrs", true: "fields"}[fields], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ds, ok, err := deliveriesFromWire(event, nil, fields)
				if err != nil || !ok || len(ds) != 64 {
					b.Fatal(err, ok, len(ds))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/delivery")
		})
	}
}

// TestLargeMessages: a message over the broker's payload limit is refused
// in the broker's words, not gRPC's "larger than max", and one the broker
// accepts above gRPC's 4 MiB default reaches its subscriber.
func TestLargeMessages(t *testing.T) {
	cl := line(t, 1, func(c *broker.Config) { c.Messages.MaxPayload = 8 << 20 })
	c := dialAt(t, cl, 0)
	ctx := testContext(t)
	sub, err := c.Subscribe(ctx, `big exists`)
	require.NoError(t, err)
	converged(t, cl)

	_, err = c.Publish(ctx, Message{Attrs: Attrs{"big": 1}, Payload: make([]byte, 16<<20)})
	require.Error(t, err)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, err.Error(), "message payload is 16777216 bytes, over the limit of 8388608")

	payload := bytes.Repeat([]byte("x"), 6<<20)
	_, err = c.Publish(ctx, Message{Attrs: Attrs{"big": 2}, Payload: payload})
	require.NoError(t, err)
	d, err := sub.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), d.Attrs["big"])
	assert.Equal(t, payload, d.Payload)
}

// TestPublishAndReceiveFields: a message of Fields reaches a subscription
// WithFields as Fields, and one without as an Attrs map, through a real
// broker; each subscription matches on the values as typed.
func TestPublishAndReceiveFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := line(t, 1, nil)
		c := dialAt(t, cl, 0)
		ctx := testContext(t)
		typed, err := c.Subscribe(ctx, `symbol = "DRIP" && price > 10`, WithFields())
		require.NoError(t, err)
		mapped, err := c.Subscribe(ctx, `symbol = "DRIP"`)
		require.NoError(t, err)
		converged(t, cl)
		p, err := c.NewPublisher(ctx)
		require.NoError(t, err)
		var fs Fields
		for _, price := range []float64{5, 12.5} {
			fs.Reset()
			fs.Str("symbol", "DRIP").Float("price", price).Int("volume", 5000).Bool("open", true)
			require.NoError(t, p.Publish(Message{Fields: fs, Payload: []byte("p")}))
		}
		_, err = p.Close()
		require.NoError(t, err)

		d, err := typed.Next(ctx)
		require.NoError(t, err)
		assert.Nil(t, d.Attrs)
		price, _ := d.Fields.Get("price")
		assert.Equal(t, 12.5, price.Float(), "only the message over 10")
		assert.Equal(t, Attrs{"symbol": "DRIP", "price": 12.5, "volume": int64(5000), "open": true}, d.Fields.Attrs())
		assert.Equal(t, []byte("p"), d.Payload)
		for _, want := range []float64{5, 12.5} {
			d, err := mapped.Next(ctx)
			require.NoError(t, err)
			assert.Nil(t, d.Fields)
			assert.Equal(t, want, d.Attrs["price"])
		}
	})
}
