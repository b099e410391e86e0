// Package drp is the forwarding decision of B-DRP (Carzaniga09 §2.2–2.3,
// docs/design.md §4): given a router's unicast view (Routing) and the destination
// set of a message, it says whether to deliver locally and which bundles
// <D_i, m> to send to which neighbours. It holds no message, sends nothing
// and keeps no state between calls beyond reusable scratch space.
//
// # Dynamic receiver partitioning (§2.2)
//
// The ingress router matches a message against every router's encoded
// predicate and obtains D, the routers to reach. It partitions D∖{self} by
// next hop into disjoint sets D_1, D_2, … and sends one bundle per next hop.
// A router receiving a bundle delivers locally iff it is in D, removes
// itself, and repartitions what is left with its own unicast table. Because
// the sets stay disjoint, each destination is reached by exactly one bundle
// lineage; with consistent, tie-free routing the bundles of a message form
// the tree of shortest paths from the ingress to D, so no link carries a
// message twice.
//
// # Broadcast threshold (§2.3)
//
// When the ingress destination set is large relative to the network
// (|D∖{self}| > BroadcastFraction × (Known−1), counting only reachable
// destinations), partitioning costs a next-hop lookup per destination at
// every hop for little saving, so the message is broadcast instead: it is
// sent with the full destination set down the ingress's shortest-path tree,
// and every router forwards it to its children in the tree rooted at the
// source (reverse-path forwarding). Every router below still delivers only
// if it is in D. Like a partitioned bundle, the set a router passes on no
// longer contains the router itself, and an empty set is not passed on, so
// a broadcast stops where every destination lay on the path to it. A
// broadcast uses at most Known−1 links, which is less than
// 1/BroadcastFraction times the at least |D| links partitioning would use.
// The tree must be the same at every router (Routing.TreeChildren), and
// while link state reconverges it need not be: a destination that two
// routers each place below the other is reached by neither and counted by
// none (TestBroadcastLosesSilentlyWhereTreesDisagree). Brokers therefore
// leave broadcast off (DefaultConfig); partitioned bundles name every
// destination until it is delivered or counted.
//
// # Hop limit and drops
//
// Tables are briefly inconsistent while link state reconverges, so a
// bundle may loop. Every bundle carries HopsLeft, the number of links it may
// still cross; the ingress sets it to Config.HopLimit and each router that
// forwards passes on one less. When nothing would be left, the remaining
// destinations are dropped. Drops are counted per destination and per
// DropReason, whose String values are stable metric labels.
//
// The commonest loop is two neighbours each routing a destination through
// the other: the bundle ping-pongs between them and, loops being fast,
// exhausts its hop limit before either learns better. Consistent tables
// never route a destination back to the neighbour it came from, so Transit
// does not: it returns such destinations in Decision.Bounced, and the
// caller holds them until its routes change (or sends them back, deciding
// them again with from = r.Self()). On a ring every loop turns back
// somewhere, so holding ends all of them (TestHoldingBouncesEndsLoopsOnRings).
//
// # Destination sets on the wire
//
// A destination set is a *bitset.BitSet where bit i stands for router ID i.
// The bitset's word layout is exchanged between brokers (contract, docs/design.md
// §4); the bitset length beyond the highest set bit carries no meaning.
package drp
