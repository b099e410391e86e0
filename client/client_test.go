package client

import (
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
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
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

func TestPublishAndSubscribe(t *testing.T) {
	f := newFakeBroker()
	c := dial(t, f.start(t), WithName("tester"))
	ctx := testContext(t)

	sub, err := c.Subscribe(ctx, `s = "x" &&  i > 2 || b = true`)
	require.NoError(t, err)
	defer sub.Close()
	assert.Equal(t, `s = "x" && i > 2 || b = true`, sub.Predicate(), "canonical text from the acknowledgement")
	assert.Equal(t, uint64(1), sub.ID())
	assert.Equal(t, "fake", sub.Broker())

	before := time.Now()
	sum, err := c.Publish(ctx,
		Message{Attrs: Attrs{"s": "x", "i": 3, "f": 2.5}, Payload: []byte("one")},
		Message{Attrs: Attrs{"s": "x", "i": int64(2)}, Payload: []byte("no")},
		Message{Attrs: Attrs{"b": true, "i": int64(-1)}, Payload: []byte("two")},
		Message{Attrs: Attrs{"b": false}},
	)
	require.NoError(t, err)
	assert.Equal(t, Summary{Accepted: 4, Unmatched: 2}, sum)

	d, err := sub.Next(ctx)
	require.NoError(t, err)
	// Integers come back as int64, whatever Go type was sent.
	assert.Equal(t, Attrs{"s": "x", "i": int64(3), "f": 2.5}, d.Attrs)
	assert.Equal(t, "one", string(d.Payload))
	assert.Equal(t, uint32(7), d.Ingress)
	assert.Equal(t, 2, d.Hops)
	assert.False(t, d.PublishedAt.Before(before.Truncate(time.Second)), "published at %v", d.PublishedAt)
	assert.Zero(t, d.Lost)

	d, err = sub.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, Attrs{"b": true, "i": int64(-1)}, d.Attrs)
	assert.Equal(t, "two", string(d.Payload))
}

func TestPublisherStream(t *testing.T) {
	f := newFakeBroker()
	c := dial(t, f.start(t))
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
	}
	f := newFakeBroker()
	c := dial(t, f.start(t))
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
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Equal(t, 1, f.published)
}

func TestPublishAbortedByBroker(t *testing.T) {
	f := newFakeBroker()
	f.msgLimits.MaxPayload = 4
	c := dial(t, f.start(t))
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
	f := newFakeBroker()
	c := dial(t, f.start(t))
	ctx := testContext(t)
	tests := []struct{ pred, want string }{
		{`a = `, "at byte 4: expected a value"},
		{`a = 1 && `, "at byte 9"},
		{``, "predicate is empty"},
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

func TestSubscribeProtocolViolation(t *testing.T) {
	f := newFakeBroker()
	f.firstEvent = &dripv1.Delivery{Event: &dripv1.Delivery_Lost{Lost: &dripv1.Lost{Count: 1, Total: 1}}}
	c := dial(t, f.start(t))
	_, err := c.Subscribe(testContext(t), `a = 1`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "before acknowledging the predicate")
}

func TestUpdate(t *testing.T) {
	f := newFakeBroker()
	c := dial(t, f.start(t))
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
	f := newFakeBroker()
	c := dial(t, f.start(t), WithBufferSize(1))
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

// TestSlowReaderLosesAtBroker checks the backpressure contract: a
// subscriber that does not read makes the broker drop (the client never
// buffers without bound), and every message is accounted for as delivered
// or lost.
func TestSlowReaderLosesAtBroker(t *testing.T) {
	f := newFakeBroker()
	f.queue = 2
	// A fixed window disables gRPC's window growth, so that the stream
	// stalls after a few large messages.
	c := dial(t, f.start(t), WithBufferSize(1), WithDialOptions(grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10)))
	ctx := testContext(t)
	sub, err := c.Subscribe(ctx, `n >= 0`)
	require.NoError(t, err)
	defer sub.Close()

	const n = 200
	payload := make([]byte, 16<<10)
	pc := dial(t, f.start(t))
	p, err := pc.NewPublisher(ctx)
	require.NoError(t, err)
	for i := range n {
		require.NoError(t, p.Publish(Message{Attrs: Attrs{"n": i}, Payload: payload}))
	}
	_, err = p.Close()
	require.NoError(t, err)

	var delivered, lostSeen uint64
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
			assert.Equal(t, lostSeen, d.LostTotal)
		}
	}
	assert.Equal(t, uint64(n), delivered+sub.Lost())
	assert.Greater(t, sub.Lost(), uint64(n/2), "the broker, not the client, absorbed the overload")
	assert.LessOrEqual(t, lostSeen, sub.Lost())
}

func TestNextEnds(t *testing.T) {
	t.Run("Close", func(t *testing.T) {
		f := newFakeBroker()
		c := dial(t, f.start(t))
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
		f := newFakeBroker()
		c := dial(t, f.start(t))
		sub, err := c.Subscribe(testContext(t), `a = 1`)
		require.NoError(t, err)
		defer sub.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = sub.Next(ctx)
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("Subscribe context", func(t *testing.T) {
		f := newFakeBroker()
		c := dial(t, f.start(t))
		ctx, cancel := context.WithCancel(context.Background())
		sub, err := c.Subscribe(ctx, `a = 1`)
		require.NoError(t, err)
		defer sub.Close()
		cancel()
		_, err = sub.Next(testContext(t))
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("broker ends cleanly after buffered deliveries", func(t *testing.T) {
		f := newFakeBroker()
		c := dial(t, f.start(t))
		ctx := testContext(t)
		sub, err := c.Subscribe(ctx, `a = 1`)
		require.NoError(t, err)
		defer sub.Close()
		_, err = c.Publish(ctx, Message{Attrs: Attrs{"a": 1}}, Message{Attrs: Attrs{"a": 1}})
		require.NoError(t, err)
		f.end(nil)
		for range 2 {
			_, err := sub.Next(ctx)
			require.NoError(t, err)
		}
		_, err = sub.Next(ctx)
		assert.ErrorIs(t, err, io.EOF)
	})
	t.Run("broker error", func(t *testing.T) {
		f := newFakeBroker()
		c := dial(t, f.start(t))
		ctx := testContext(t)
		sub, err := c.Subscribe(ctx, `a = 1`)
		require.NoError(t, err)
		defer sub.Close()
		f.end(status.Error(codes.Unavailable, "broker shutting down"))
		_, err = sub.Next(ctx)
		assert.Equal(t, codes.Unavailable, status.Code(err))
		assert.Contains(t, err.Error(), "subscription 1 ended")
		assert.Contains(t, err.Error(), "broker shutting down")
	})
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
			f := newFakeBroker()
			c := dial(t, f.start(t))
			ctx := testContext(t)
			sub, err := c.Subscribe(ctx, `a = 1`)
			require.NoError(t, err)
			defer sub.Close()
			f.inject(&dripv1.Delivery{Event: &dripv1.Delivery_Message{Message: &dripv1.Published{Message: tt.msg}}})
			_, err = sub.Next(ctx)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "malformed delivery: "+tt.want)
		})
	}
}

// TestCloseReleasesBroker checks that Close ends the stream at the broker.
func TestCloseReleasesBroker(t *testing.T) {
	f := newFakeBroker()
	c := dial(t, f.start(t))
	ctx := testContext(t)
	subs := make([]*Subscription, 5)
	for i := range subs {
		var err error
		subs[i], err = c.Subscribe(ctx, fmt.Sprintf("a = %d", i))
		require.NoError(t, err)
	}
	assert.Equal(t, 5, f.subscriptions())
	for _, s := range subs {
		require.NoError(t, s.Close())
	}
	require.Eventually(t, func() bool { return f.subscriptions() == 0 }, hangGuard, time.Millisecond)
}

func TestConcurrentUse(t *testing.T) {
	f := newFakeBroker()
	c := dial(t, f.start(t))
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
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := Dial(ctx, "127.0.0.1:1")
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("bad target", func(t *testing.T) {
		_, err := Dial(testContext(t), "unknown-scheme://x/y")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "connecting to broker unknown-scheme://x/y")
		assert.Contains(t, err.Error(), "zero addresses")
	})
}

func TestTLS(t *testing.T) {
	cert, pool := selfSigned(t, "drip.test")
	f := newFakeBroker()
	dialOpts := f.start(t, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))

	c := dial(t, dialOpts, WithTLS(&tls.Config{RootCAs: pool, ServerName: "drip.test"}))
	sub, err := c.Subscribe(testContext(t), `a = 1`)
	require.NoError(t, err)
	require.NoError(t, sub.Close())

	// Untrusted: the reason reaches the caller of Dial.
	_, err = Dial(testContext(t), "passthrough:///bufnet", WithTLS(&tls.Config{ServerName: "drip.test"}), WithDialOptions(dialOpts...))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate")

	// Plaintext against a TLS server fails too.
	_, err = Dial(testContext(t), "passthrough:///bufnet", WithDialOptions(dialOpts...))
	require.Error(t, err)
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

func TestMessageConversionRoundTrip(t *testing.T) {
	m := Message{Attrs: Attrs{"s": "x\x00y", "i": int64(-5), "n": 7, "f": -0.5, "b": true}, Payload: []byte{0xff}}
	pm, err := m.toProto()
	require.NoError(t, err)
	// Sorted names give equal encodings to equal messages.
	var names []string
	for _, a := range pm.Attributes {
		names = append(names, a.Name)
	}
	assert.Equal(t, "b f i n s", strings.Join(names, " "))
	back, err := messageFromProto(pm)
	require.NoError(t, err)
	assert.Equal(t, Message{Attrs: Attrs{"s": "x\x00y", "i": int64(-5), "n": int64(7), "f": -0.5, "b": true}, Payload: []byte{0xff}}, back)
	// The broker's conversion accepts what the client sends.
	cm, err := wire.MessageFromProto(pm, wire.DefaultMessageLimits())
	require.NoError(t, err)
	v, _ := cm.Get("f")
	assert.Equal(t, content.Float(-0.5), v)
}

func BenchmarkMessageToProto(b *testing.B) {
	m := Message{Attrs: Attrs{"a00": "government", "a01": "market", "a02": "police", "a03": "president",
		"a04": "minister", "a05": "country", "a06": 3, "a07": 40, "a08": 99, "a09": 0}, Payload: make([]byte, 32)}
	b.ReportAllocs()
	for b.Loop() {
		_ = must(m.toProto())
	}
}

func TestCancelledContextErrors(t *testing.T) {
	f := newFakeBroker()
	c := dial(t, f.start(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Subscribe(ctx, `a = 1`)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = c.NewPublisher(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = c.Publish(ctx, Message{Attrs: Attrs{"a": 1}})
	assert.ErrorIs(t, err, context.Canceled)
}
