// Package client is the Go client of a drip broker mesh (docs/design.md §5): it
// publishes messages into the mesh and holds content-based subscriptions, over
// the drip.v1.Broker gRPC API. Connect to any broker of the mesh; the mesh
// routes each message to every subscriber whose predicate it satisfies
// (Carzaniga09 §2).
//
// # Messages
//
// A Message is a set of typed attributes, which predicates select on, and
// opaque payload bytes, which no predicate reads. Attribute values are
// string, int, int64, float64 or bool; the wire has one integer type, so
// delivered integers are always int64.
//
// # Brokers and failover
//
// Dial takes one broker's address, several (comma-separated), or a DNS name
// (dns:///name:port, as a Kubernetes headless Service has one address per
// broker). A client uses one broker at a time; each publisher and
// subscription moves on its own:
//
//   - When its broker fails, a subscription subscribes again with its
//     latest predicate, at the next address that answers (a round tries
//     each address at once; rounds are paced by a jittered exponential
//     backoff, WithReconnectBackoff). The time no broker held it is a Gap,
//     reported to WithGapHandler and on the next Delivery: messages
//     published meanwhile are not delivered to it.
//   - When its broker drains (a graceful stop, such as a Kubernetes rolling
//     update), a subscription subscribes at another broker first, keeps both
//     while the mesh learns where it went, then closes the old one: nothing
//     is lost, and no gap.
//   - Every message carries its ingress stamp (Delivery.Ingress,
//     IngressEpoch, Seq); a subscription passes each stamp on once, so
//     copies that reach it over two brokers while it moves are dropped
//     (Subscription.Duplicates counts them).
//   - A publisher's broker acknowledges what it accepted. When it drains,
//     its last acknowledgement is exact and the publisher resends the rest
//     to another broker: nothing lost, nothing twice. When it fails, what
//     was unacknowledged may or may not have been published; the publisher
//     moves on and counts those messages in flight (InFlightLost,
//     WithFailoverHandler) rather than risk duplicates.
//
// # Publishing
//
// A Publisher sends messages as they are given, at most WithMaxInFlight
// ahead of the broker's acknowledgements, and Close returns the Summary of
// what brokers accepted. If a broker finds a message malformed it aborts the
// stream with codes.InvalidArgument naming the message's index on that
// stream; messages before it were published, and the Publisher returns that
// error from then on. Brokers that predate acknowledgements (no
// PublishStream) are used through Publish, without resending.
//
// # Subscribing
//
// A Subscription is one bidirectional Subscribe stream (two while it moves).
// Subscribe returns once a broker has acknowledged the predicate (or with
// the broker's codes.InvalidArgument error, which names the byte offset of
// a parse error); Update replaces the predicate on the live stream, without
// losing or duplicating deliveries across the switch, and returns once the
// broker has acknowledged the new one.
//
// One goroutine per subscription receives from the stream ahead of the
// caller: into a buffer (WithBufferSize) that Next reads, and behind it a
// read-ahead bounded in bytes (WithReadAhead, 16 MiB for all the client's
// subscriptions together: each reads ahead its share). Reading ahead is
// what makes losses prompt: a broker that drops a slow subscriber's
// messages reports them in a Lost event on the same stream, behind
// whatever it sent before, and a client that read only as fast as its
// caller would hear of the loss minutes later, behind its backlog. When the
// read-ahead is full the goroutine stops reading for WithBufferWait
// (250 ms): gRPC flow control then holds the broker's sends, and a short
// pause costs nothing. If the caller is still behind after that, the
// client reads on and drops what does not fit itself, until the caller
// has caught up with half the read-ahead. Every loss — the brokers'
// reports and the client's own drops — counts in Subscription.Lost as
// soon as the client learns of it, signals Subscription.Losses, and is
// stamped on the next delivery Next returns (Delivery.Lost). The
// goroutine never blocks the stream for good: Close, or cancelling the
// Subscribe context, ends it, and while an Update waits for its
// acknowledgement or the subscription moves between brokers it keeps
// reading (setting deliveries aside, beyond the read-ahead's bound) so
// that acknowledgements cannot be stuck behind a full buffer.
//
// # Authorization
//
// A broker with an authorization policy (docs/design.md §13) knows a client
// by its TLS client certificate (in the tls.Config given to WithTLS) or by
// the bearer token of WithToken, which Dial refuses to send without TLS.
// Under a rule, a published message outside the rule's predicate ends the
// stream with codes.PermissionDenied naming the rule, and nothing of its
// batch was published; a subscription receives only what both its
// predicate and the rule's match. PermissionDenied is permanent: the
// client does not fail over on it.
//
// # Deadlines and two paths
//
// A subscription made with WithDeadline asks the mesh to deliver each
// message it matches within that time of the message's acceptance at its
// ingress broker: brokers send such messages first at every link, by their
// share of the time left, and route around a link whose measured delay
// breaks the deadline as soon as an RTT sample shows it. Each delivery
// carries the time the mesh measured along its path (Delivery.Elapsed, no
// synchronised clocks needed), and DeadlineMisses counts those later than
// the deadline; they are still delivered. WithTwoPaths sends every matching
// message over two link-disjoint paths, so that one failed link loses
// nothing; the broker passes the first copy on. A publisher may give a
// message its own deadline (Message.Deadline). See docs/design.md §11.
//
// # Congestion control
//
// A subscription made with WithCongestionFeedback(true) tells the
// publishers whose messages it loses to slow down, per filter; a publisher
// (unless WithCongestionControl(false)) slows only those flows, holding
// their messages in a bounded queue and, when that is full, blocking
// Publish. Congestion returns what either side did. See
// docs/design.md §12.
//
// All methods of Client, Publisher and Subscription are safe for concurrent
// use.
package client
