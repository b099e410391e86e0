// Package client is the Go client of a drip broker mesh (docs/design.md §5): it
// publishes messages into the mesh and holds content-based subscriptions, over
// the drip.v1.Broker gRPC API. Connect to any broker of the mesh; the mesh
// routes each message to every subscriber whose predicate it satisfies (seed
// 000 §2).
//
// # Messages
//
// A Message is a set of typed attributes, which predicates select on, and
// opaque payload bytes, which no predicate reads. Attribute values are
// string, int, int64, float64 or bool; the wire has one integer type, so
// delivered integers are always int64.
//
// # Publishing
//
// A Publisher is one Publish stream: messages are sent as they are given and
// the broker answers with a Summary when the stream is closed. If the broker
// finds a message malformed it aborts the stream with codes.InvalidArgument
// naming the message's index; messages before it were published, and the
// Publisher returns that error from then on.
//
// # Subscribing
//
// A Subscription is one bidirectional Subscribe stream. Subscribe returns once
// the broker has acknowledged the predicate (or with the broker's
// codes.InvalidArgument error, which names the byte offset of a parse error);
// Update replaces the predicate on the live stream, without losing or
// duplicating deliveries across the switch, and returns once the broker has
// acknowledged the new one.
//
// One goroutine per subscription receives from the stream into a bounded
// buffer (WithBufferSize) that Next reads. When the caller reads more slowly
// than messages arrive, the buffer fills and the goroutine stops reading the
// stream; gRPC flow control then holds the broker's sends, the broker's queue
// for the subscription fills, and the broker drops matching messages and
// reports how many in a Lost event. The client reports those counts in
// Delivery.Lost and Subscription.Lost; it never drops a message itself. The
// goroutine never blocks the stream for good: Close, or cancelling the
// Subscribe context, ends it, and while an Update waits for its
// acknowledgement the goroutine keeps reading (setting deliveries aside) so
// that the acknowledgement cannot be stuck behind a full buffer.
//
// All methods of Client, Publisher and Subscription are safe for concurrent
// use.
package client
