// Package broker runs a drip broker: it drives a node.Node (the broker's
// logic, internal/node) with goroutines, sockets and timers, and puts the
// gRPC API in front of it.
//
//   - Broker drives the node in production: one core goroutine owns its
//     control plane, a transport.Link per neighbour runs a writer and a
//     reader goroutine (the reader forwards the bundles it receives), a
//     dial loop per configured neighbour keeps links up, a goroutine runs
//     each PREDICATES index build beside the core, and Run leaves the mesh
//     as the node's drain says.
//   - The client service (service.go) serves drip.v1.Broker over the node:
//     publish streams, subscriptions, authorization, and the node's errors
//     mapped to gRPC codes.
//   - Server puts listeners, TLS, health, readiness and metrics around it.
//
// Lock order: Broker.linksMu, then what the node holds; none is held while
// sending on a channel that can block.
package broker
