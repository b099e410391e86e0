// Package dedup passes each message on once. It is how drip delivers
// exactly once while the mesh changes (docs/design.md §10).
//
// B-DRP forwards a message along the ingress broker's tree, each hop
// choosing the rest of the path with its own routing table (Carzaniga09
// §2.2). While link state floods after a failure, a restart or a new link,
// tables disagree and one broker can receive the same message twice, over
// two paths; two-path redundancy (Kim10 §2.3) does it on purpose. The
// ingress broker therefore stamps every message with (origin, epoch, seq):
// its router ID, its boot time and a counter. A broker that delivers, and
// a client that has subscribed on several brokers in turn, admits each
// stamp once.
//
// # Memory
//
// A Filter remembers, per origin, the last Window sequence numbers of at
// most Epochs boot epochs, as a ring of bits: Window/8 bytes per (origin,
// epoch), allocated when the first stamp of that pair arrives. Origins are
// router IDs, so the state is bounded by the mesh's size and MaxOrigins;
// an origin silent for IdleTimeout is forgotten (no copy of its messages
// can still be in flight by then).
//
// # What cannot be told apart
//
// A stamp more than Window sequence numbers behind the newest of its
// (origin, epoch), or of an epoch older than every one kept when Epochs
// are kept already, is Stale: it may be a first copy that was overtaken by
// Window later messages, or a duplicate whose record has been overwritten.
// Exactly-once takes the safe side: stale stamps are dropped and counted.
// With the default window a message would have to be overtaken by 16,384
// later messages from its ingress broker, which takes a route change on a
// saturated link.
//
// A Filter is safe for concurrent use. Time is passed in.
package dedup
