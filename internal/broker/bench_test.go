package broker_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/authz"
	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/broker/brokertest"
	"github.com/dripmesh/drip/internal/rawcodec"
)

// benchBroker serves one broker on loopback for a benchmark.
func benchBroker(b *testing.B) string { return benchBrokerWith(b, nil) }

// benchBrokerWith serves one broker with an authorization policy (nil:
// none).
func benchBrokerWith(b *testing.B, policy *authz.Policy) string {
	b.Helper()
	cl, pl := listen(b), listen(b)
	srv, err := broker.NewServer(brokertest.FastConfig(0), broker.ServerConfig{ClientListener: cl, PeerListener: pl, StopTimeout: time.Second, AuthzPolicy: policy})
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	return cl.Addr().String()
}

func listen(b *testing.B) net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	return l
}

// benchMessage is a small message: three attributes, a 16-byte payload.
func benchMessage(b *testing.B) []byte {
	raw, err := proto.Marshal(&dripv1.Message{Attributes: []*dripv1.Attribute{
		{Name: "price", Value: &dripv1.Value{Kind: &dripv1.Value_FloatValue{FloatValue: 12.5}}},
		{Name: "symbol", Value: &dripv1.Value{Kind: &dripv1.Value_StringValue{StringValue: "DRIP"}}},
		{Name: "volume", Value: &dripv1.Value{Kind: &dripv1.Value_IntValue{IntValue: 5000}}},
	}, Payload: make([]byte, 16)})
	require.NoError(b, err)
	return raw
}

// BenchmarkBroker1to1 is the broker's path from one publisher to one
// subscriber: publish requests of 64 messages in their wire form go in,
// batched deliveries come out, and nothing is decoded on the client side,
// so the allocations per message are the broker's (issue 12 asks ≤ 3).
func BenchmarkBroker1to1(b *testing.B) {
	api := rawClient(b, benchBroker(b))
	runRaw(b, api, api, 0, func() {})
}

// BenchmarkBroker1to1Authorized is BenchmarkBroker1to1 under a policy
// whose rule restricts both sides (docs/design.md §13): each message is
// decoded once more and matched against the publish predicate, and the
// subscription holds the conjunction.
func BenchmarkBroker1to1Authorized(b *testing.B) {
	policy, err := authz.Parse("bench.yaml", []byte(`rules: [{name: r, client: {any: true}, publish: 'symbol = "DRIP" && price > 1', subscribe: 'symbol = "DRIP"'}]`))
	require.NoError(b, err)
	api := rawClient(b, benchBrokerWith(b, policy))
	runRaw(b, api, api, 0, func() {})
}

// countDeliveries counts the messages of a Delivery event (one, or a
// batch's).
func countDeliveries(b []byte) int {
	num, _, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0
	}
	if num != 5 { // not a DeliveryBatch
		if num == 2 {
			return 1
		}
		return 0
	}
	inner, _ := protowire.ConsumeBytes(b[n:])
	count := 0
	for len(inner) > 0 {
		_, _, n := protowire.ConsumeTag(inner)
		_, m := protowire.ConsumeBytes(inner[n:])
		inner = inner[n+m:]
		count++
	}
	return count
}

// BenchmarkClient1to1 is the same path through the public Go client, whose
// deliveries are decoded into maps: what an application sees; with
// congestion control off, as by default (the publisher listens, each
// message names it), and with the subscription asking (full headers,
// records, a Bloom filter per message at both ends: docs/design.md §12).
// fields publishes one reused client.Fields and subscribes WithFields:
// the client's allocation-free path, which the perf clients take;
// fields-4k does so with 4 KiB payloads, so that requests are cut by
// their size, not their count.
func BenchmarkClient1to1(b *testing.B) {
	for _, mode := range []struct {
		name    string
		opts    []client.Option
		fields  bool
		payload int
	}{
		{"congestion-off", []client.Option{client.WithCongestionControl(false)}, false, 16},
		{"default", nil, false, 16},
		{"asked", []client.Option{client.WithCongestionFeedback(true)}, false, 16},
		{"fields", nil, true, 16},
		{"fields-4k", nil, true, 4 << 10},
	} {
		b.Run(mode.name, func(b *testing.B) { benchClient1to1(b, mode.fields, mode.payload, mode.opts...) })
	}
}

func benchClient1to1(b *testing.B, fields bool, payload int, opts ...client.Option) {
	addr := benchBroker(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := client.Dial(ctx, addr, opts...)
	require.NoError(b, err)
	defer c.Close()
	var subOpts []client.SubscribeOption
	m := client.Message{Attrs: client.Attrs{"symbol": "DRIP", "price": 12.5, "volume": 5000}, Payload: make([]byte, payload)}
	if fields {
		subOpts = append(subOpts, client.WithFields())
		var fs client.Fields
		fs.Str("symbol", "DRIP").Float("price", 12.5).Int("volume", 5000)
		m = client.Message{Fields: fs, Payload: m.Payload}
	}
	sub, err := c.Subscribe(ctx, `symbol = "DRIP"`, subOpts...)
	require.NoError(b, err)
	defer sub.Close()
	p, err := c.NewPublisher(ctx)
	require.NoError(b, err)
	done := make(chan error, 1)
	go func() {
		for range b.N {
			if _, err := sub.Next(ctx); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := p.Publish(m); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, <-done)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	_, err = p.Close()
	require.NoError(b, err)
}

// BenchmarkBroker2 is the path through two brokers: published at b0,
// carried in a bundle over the peer link, delivered at b1; with and without
// link compression (on by default, for WAN links), and with a subscription
// that has a deadline, so that every message takes the deadline path
// (class lookup, urgency, budget) on a plain link.
func BenchmarkBroker2(b *testing.B) {
	for _, tc := range []struct {
		name     string
		compress bool
		deadline time.Duration
	}{{"plain", false, 0}, {"deflate", true, 0}, {"deadline", false, time.Second}} {
		compress := tc.compress
		b.Run(tc.name, func(b *testing.B) {
			c0, p0, c1, p1 := listen(b), listen(b), listen(b), listen(b)
			start := func(id int, cl, pl net.Listener, peers []broker.Peer) {
				cfg := brokertest.FastConfig(uint32(id))
				cfg.PeerCompression, cfg.Peers = compress, peers
				srv, err := broker.NewServer(cfg, broker.ServerConfig{ClientListener: cl, PeerListener: pl, StopTimeout: time.Second})
				require.NoError(b, err)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- srv.Serve(ctx) }()
				b.Cleanup(func() { cancel(); <-done })
			}
			start(0, c0, p0, []broker.Peer{{ID: 1, Addr: p1.Addr().String(), Weight: 1}})
			start(1, c1, p1, nil)
			pubAPI, subAPI := rawClient(b, c0.Addr().String()), rawClient(b, c1.Addr().String())
			runRaw(b, pubAPI, subAPI, tc.deadline, func() {
				// The subscription must be known at b0 before publishing.
				time.Sleep(300 * time.Millisecond)
			})
		})
	}
}

func rawClient(b *testing.B, addr string) dripv1.BrokerClient {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawcodec.Codec{})))
	require.NoError(b, err)
	b.Cleanup(func() { cc.Close() })
	return dripv1.NewBrokerClient(cc)
}

// runRaw publishes b.N messages in requests of 64 through pub and counts
// their deliveries through sub, whose subscription (with the deadline, if
// not 0) is made first; settle runs between the two.
func runRaw(b *testing.B, pub, subAPI dripv1.BrokerClient, deadline time.Duration, settle func()) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := subAPI.Subscribe(ctx)
	require.NoError(b, err)
	require.NoError(b, sub.Send(&dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: `symbol = "DRIP"`}, AcceptBatches: true,
		DeadlineNs: int64(deadline)}))
	_, err = sub.Recv()
	require.NoError(b, err)
	settle()
	const perRequest = 64
	msg := benchMessage(b)
	var req []byte
	for range perRequest {
		req = protowire.AppendTag(req, 2, protowire.BytesType)
		req = protowire.AppendBytes(req, msg)
	}
	ps, err := pub.PublishStream(ctx)
	require.NoError(b, err)
	go func() {
		for {
			var ack rawcodec.Raw
			if ps.RecvMsg(&ack) != nil {
				return
			}
		}
	}()
	received := make(chan int, 1)
	go func() {
		n := 0
		for {
			var ev rawcodec.Raw
			if err := sub.RecvMsg(&ev); err != nil {
				received <- n
				return
			}
			if n += countDeliveries(ev.B); n >= b.N {
				received <- n
				return
			}
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; sent += perRequest {
		if err := ps.SendMsg(&rawcodec.Raw{B: req}); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case n := <-received:
		if n < b.N {
			b.Fatalf("received %d of %d", n, b.N)
		}
	case <-time.After(time.Minute):
		b.Fatalf("deliveries stopped")
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkBroker1to20 is one publisher's messages delivered to 20
// subscribers of one broker: b.N counts deliveries.
func BenchmarkBroker1to20(b *testing.B) {
	addr := benchBroker(b)
	api := rawClient(b, addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const subs = 20
	counts := make(chan int, subs)
	msgs := b.N/subs + 1
	for range subs {
		sub, err := api.Subscribe(ctx)
		require.NoError(b, err)
		require.NoError(b, sub.Send(&dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: `symbol = "DRIP"`}, AcceptBatches: true}))
		_, err = sub.Recv()
		require.NoError(b, err)
		go func() {
			n := 0
			for n < msgs {
				var ev rawcodec.Raw
				if sub.RecvMsg(&ev) != nil {
					break
				}
				n += countDeliveries(ev.B)
			}
			counts <- n
		}()
	}
	const perRequest = 64
	msg := benchMessage(b)
	var req []byte
	for range perRequest {
		req = protowire.AppendTag(req, 2, protowire.BytesType)
		req = protowire.AppendBytes(req, msg)
	}
	ps, err := api.PublishStream(ctx)
	require.NoError(b, err)
	go func() {
		for {
			var ack rawcodec.Raw
			if ps.RecvMsg(&ack) != nil {
				return
			}
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < msgs; sent += perRequest {
		if err := ps.SendMsg(&rawcodec.Raw{B: req}); err != nil {
			b.Fatal(err)
		}
	}
	for range subs {
		if n := <-counts; n < msgs {
			b.Fatalf("a subscriber received %d of %d", n, msgs)
		}
	}
	b.ReportMetric(float64(msgs*subs)/time.Since(start).Seconds(), "deliveries/s")
}
