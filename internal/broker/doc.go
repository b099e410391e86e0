// Package broker is a running drip broker: it drives the link-state core
// (internal/linkstate) from one goroutine, keeps a link per neighbour
// (internal/transport), serves publishers and subscribers (drip.v1.Broker),
// and forwards messages with B-DRP (Carzaniga09 §2.2): exact local delivery,
// one encoded match at the ingress broker, dynamic receiver partitioning
// hop by hop, exact matching again wherever a bundle is delivered, so Bloom
// false positives are counted and never reach a client.
//
// # Concurrency
//
// The control plane runs on the core goroutine, which alone touches the
// linkstate.Node and the PREDICATES table builder; after every change it
// publishes immutable snapshots (routing table, encoded-predicate index)
// through atomic pointers. The data plane runs on the goroutines that
// receive messages — one per publishing client stream and one reader per
// peer link — and reads only those snapshots, so forwarding never waits
// for the routing protocol. Each link has one writer goroutine draining its
// transport.Queue: control first, data bounded in bytes and dropped
// (counted, per reason) when full. Each subscriber has a bounded queue: a
// slow subscriber loses messages (counted and reported to it) and slows
// nobody else.
//
// Lock order: subscriptions.mu, then linksMu; neither is held while
// sending on a channel that can block.
package broker
