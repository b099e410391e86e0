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
	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/broker/brokertest"
	"github.com/dripmesh/drip/internal/wire"
)

// benchBroker serves one broker on loopback for a benchmark.
func benchBroker(b *testing.B) string {
	b.Helper()
	cl, pl := listen(b), listen(b)
	srv, err := broker.NewServer(brokertest.FastConfig(0), broker.ServerConfig{ClientListener: cl, PeerListener: pl, StopTimeout: time.Second})
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
	addr := benchBroker(b)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(wire.Codec{})))
	require.NoError(b, err)
	defer cc.Close()
	api := dripv1.NewBrokerClient(cc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	sub, err := api.Subscribe(ctx)
	require.NoError(b, err)
	require.NoError(b, sub.Send(&dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: `symbol = "DRIP"`}, AcceptBatches: true}))
	_, err = sub.Recv() // the acknowledgement
	require.NoError(b, err)

	const perRequest = 64
	msg := benchMessage(b)
	var req []byte
	for range perRequest {
		req = protowire.AppendTag(req, 2, protowire.BytesType)
		req = protowire.AppendBytes(req, msg)
	}
	pub, err := api.PublishStream(ctx)
	require.NoError(b, err)
	go func() {
		for {
			var ack wire.Raw
			if pub.RecvMsg(&ack) != nil {
				return
			}
		}
	}()
	received := make(chan int, 1)
	go func() {
		n := 0
		for {
			var ev wire.Raw
			if err := sub.RecvMsg(&ev); err != nil {
				received <- n
				return
			}
			n += countDeliveries(ev.B)
			if n >= b.N {
				received <- n
				return
			}
		}
	}()

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; sent += perRequest {
		if err := pub.SendMsg(&wire.Raw{B: req}); err != nil {
			b.Fatal(err)
		}
	}
	if n := <-received; n < b.N {
		b.Fatalf("received %d of %d", n, b.N)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
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
// deliveries are decoded into maps: what an application sees.
func BenchmarkClient1to1(b *testing.B) {
	addr := benchBroker(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := client.Dial(ctx, addr)
	require.NoError(b, err)
	defer c.Close()
	sub, err := c.Subscribe(ctx, `symbol = "DRIP"`)
	require.NoError(b, err)
	defer sub.Close()
	p, err := c.NewPublisher(ctx)
	require.NoError(b, err)
	m := client.Message{Attrs: client.Attrs{"symbol": "DRIP", "price": 12.5, "volume": 5000}, Payload: make([]byte, 16)}
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
