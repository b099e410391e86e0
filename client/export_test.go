package client

import (
	"net"

	"google.golang.org/grpc"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

// StartFakeBroker serves an in-memory broker on a loopback port for the
// examples and returns its address and a function that stops it.
func StartFakeBroker() (addr string, stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	dripv1.RegisterBrokerServer(srv, newFakeBroker())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	return lis.Addr().String(), func() {
		srv.Stop()
		<-served
	}
}
