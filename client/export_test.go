package client

import (
	"context"
	"net"

	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/broker/brokertest"
)

// StartBroker serves a real broker on a loopback port for the examples and
// returns its address and a function that stops it.
func StartBroker() (addr string, stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	peer, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv, err := broker.NewServer(brokertest.FastConfig(0), broker.ServerConfig{ClientListener: lis, PeerListener: peer})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	return lis.Addr().String(), func() {
		cancel()
		<-done
	}
}

// ReadAheadHeld is what the client's subscriptions have read ahead of
// Next, together.
func (c *Client) ReadAheadHeld() int64 { return c.readAhead.used.Load() }

// CtxOr is ctxOr, for TestCtxOrTellsTheLastAttempt.
var CtxOr = ctxOr
