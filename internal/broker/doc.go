// Package broker is a running drip broker. It forwards messages with B-DRP
// (Carzaniga09 §2.2): exact local delivery, one encoded match at the
// ingress broker, dynamic receiver partitioning hop by hop, exact matching
// again wherever a bundle is delivered, so Bloom false positives are counted
// and never reach a client; and it delivers each message once however the
// mesh changes (docs/design.md §10).
//
// # Layers
//
//   - Node is the broker's logic with no goroutine, socket or timer of its
//     own: the link-state core (internal/linkstate), the PREDICATES table,
//     the local subscriptions, forwarding (Forwarder) and the duplicate
//     filter (internal/dedup). Time comes from an injected clock. It sends
//     through the Link interface and receives what its driver hands it.
//   - Broker drives a Node in production: one core goroutine owns the
//     control plane, a transport.Link per neighbour runs a writer and a
//     reader goroutine, a dial loop per configured neighbour keeps links up,
//     and Run leaves the mesh gracefully.
//   - The client service (service.go) and Server (listeners, TLS, health,
//     metrics) put the gRPC API in front.
//
// internal/broker/brokertest drives Nodes in virtual time instead, with
// transport.Links moved frame by frame, so whole meshes run
// deterministically by seed.
//
// # Concurrency
//
// The control plane runs on one goroutine, which alone touches the
// linkstate.Node, the PREDICATES table builder and the link set; after every
// change it publishes immutable snapshots (routing table, encoded-predicate
// index, links) through atomic pointers. It only plans the encoded-predicate
// index, which a goroutine of its own builds, one at a time, and hands back
// to be published (IndexBuilder): a build can take longer than the dead
// interval on a starved machine, and hellos must not wait for it. The data plane runs on the
// goroutines that receive messages — one per publishing client stream and
// one reader per peer link, each with its own Forwarder — and reads only
// those snapshots, so forwarding never waits for the routing protocol. Each
// link's queue sends control first and bounds data in bytes, dropping
// (counted, per reason) when full. Each subscriber has a bounded queue: a
// slow subscriber loses messages (counted and reported to it) and slows
// nobody else. One memory budget bounds all the queues together, counted
// with an atomic add per delivery; a delivery that would exceed it sheds
// the subscriber holding the most (budget.go, docs/design.md §14).
//
// Lock order: the subscriptions' mutex, then a subscription queue's mutex
// or Broker.linksMu; none is held while sending on a channel that can
// block.
package broker
