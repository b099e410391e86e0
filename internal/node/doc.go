// Package node is one drip broker's logic with no goroutine, socket or
// timer of its own: B-DRP routing (Carzaniga09 §2.2) — exact local
// delivery, one encoded match at the ingress broker, dynamic receiver
// partitioning hop by hop, exact matching again wherever a bundle is
// delivered, so Bloom false positives are counted and never reach a client
// — with the link-state core (internal/linkstate), the PREDICATES table,
// the local subscriptions and their memory budget, deadlines and two paths
// (Kim10), the match-all policy, the duplicate filter that delivers each
// message once however the mesh changes (docs/design.md §10), and the
// phases of leaving the mesh gracefully.
//
// It imports neither gRPC nor the generated protocol code (a test holds it
// to that): bundles and deliveries leave it as wire bytes built by
// internal/wire, control messages as linkstate.Messages its Links encode,
// and its errors are its own (ErrStopped, ErrDraining, *LimitError,
// *InvalidError), which the client service maps to the API's codes.
//
// # Driving a node
//
// A driver feeds a Node link events (LinkUp, LinkDown), the control
// messages its links decoded (Control), clock ticks (Tick) and the index
// builds it ran (InstallIndex), all from one goroutine; every time is read
// from the injected clock (WithClock). The node sends through the Link
// interface, the whole of what it asks of a link. broker.Broker drives it
// in production; internal/broker/brokertest drives whole meshes of nodes in
// virtual time, deterministically by seed. Both run the same drain: Stop
// starts it, and the node's own ticks move it through its Phases.
//
// # Concurrency
//
// The control plane runs on the driver's one goroutine, which alone
// touches the linkstate.Node, the PREDICATES table builder and the link
// set; after every change it publishes immutable snapshots (routing table,
// encoded-predicate index, links) through atomic pointers. It only plans
// the encoded-predicate index, which the driver's IndexBuilder runs and
// hands back: a build can take longer than the dead interval on a starved
// machine, and hellos must not wait for it. The data plane runs on the
// driver's goroutines that receive messages — one per publishing client
// stream and one reader per peer link, each with a Forwarder of its own —
// and reads only those snapshots, so forwarding never waits for the
// routing protocol. Each subscriber has a bounded queue: a slow subscriber
// loses messages (counted and reported to it) and slows nobody else. One
// memory budget bounds all the queues together, counted with an atomic add
// per delivery; a delivery that would exceed it sheds the subscriber
// holding the most (Budget, docs/design.md §14). When the routing protocol
// suspects a silent link, the bundles the link took last are decided again
// around it (replay.go), and the reverse-path check takes in bundles that
// left their source's tree around a failure (source.go).
//
// Lock order: the subscriptions' mutex, then a subscription queue's mutex;
// none is held while sending on a channel that can block.
package node
