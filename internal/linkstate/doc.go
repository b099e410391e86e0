// Package linkstate is the routing core of B-DRP: an OSPF-like link-state
// protocol with which every broker builds the UNICAST table (router → next
// hop) and the PREDICATES table (router → encoded predicate) of Carzaniga09
// §2.2. The paper leaves this to "any one of several well-known protocols";
// docs/design.md §3 fixes the one drip uses, with the measured-delay costs of Kim10
// §2.1.
//
// # Shape
//
// A Node is a pure state machine in the style of etcd's raft: no
// goroutines, clock, sockets or logging. The driver passes time in (Tick,
// every 100 ms or so, and the now of each input), reports links (LinkUp,
// LinkDown), delivers messages (Step), sets the local predicate, and after
// each input drains Ready — messages to send, whether routes changed,
// PREDICATES updates, events for logs and metrics — then calls Advance.
// The same inputs in the same order give the same outputs, which is what
// lets internal/sim test the protocol deterministically.
//
// # Protocol
//
//   - Hellos go to each neighbour every HelloInterval. A hello says whether
//     the sender hears the receiver; an adjacency is up (StateFull) once
//     each side hears that it is heard, and drops after DeadInterval of
//     silence, at LinkDown, or when the neighbour stops hearing us.
//   - Fast failure detection (suspect.go): a neighbour whose hellos
//     announce a keepalive interval, and from which nothing has arrived
//     for Config.SuspectMultiplier of them, is suspect: its link leaves
//     the LSA at once and returns, without a database exchange, once it is
//     heard again and a probe (a hello answered at once) has measured its
//     RTT (BFD's role under OSPF, RFC 5880).
//   - Each hello echoes the timestamp of the last hello received on the
//     link and how long it was held, so the receiver measures RTT = now −
//     echo − hold on its own clock. The smoothed RTT is an EWMA with weight
//     0.25 on the new sample (Kim10 §2.1). In CostRTT mode the link cost
//     is the smoothed RTT in µs, floored, and re-advertised only when it
//     moves more than CostThreshold (20%) from the advertised one, so
//     jitter neither floods LSAs nor flaps routes; Kim10 applies the
//     same threshold to path switching. In CostWeight mode it is the
//     LinkUp weight.
//   - A router originates an LSA (its adjacencies and costs) and a
//     predicate advertisement (its Bloom filters), each with its own
//     sequence number, whenever they change and every RefreshInterval.
//   - Flooding: a copy newer than ours (higher sequence number; on equal
//     ones the larger content checksum) is installed and sent to every
//     adjacent neighbour but the one it came from. An older copy is
//     answered with ours. A newer copy of our own entry means the mesh
//     remembers an earlier incarnation of us (we restarted from sequence
//     number 1): we jump past it and re-originate, as OSPF does. A router
//     given its incarnation (Config.Incarnation, its boot time) numbers its
//     advertisements from there instead, so that every copy an earlier run
//     originated — replayed by a neighbour after the whole mesh restarted,
//     say — is older than this run's first, and the table tells each
//     router's incarnation to the data plane (Table.Incarnation).
//   - Database exchange: when an adjacency comes up each side sends a
//     summary (kind, origin, seq, checksum) of its LSDB and requests what
//     the other's lists that it lacks or holds older. The link enters the
//     side's LSA only once the requested entries have arrived and the
//     neighbour's LSA it holds is not a stale one listing it (OSPF's
//     Loading→Full), so no shortest path runs through a router that does
//     not know the mesh yet, as after a restart; an exchange open for
//     DeadInterval advertises the link anyway (EventLoadTimeout). Hellos
//     carry a digest of the LSDB; if a neighbour's digest differs for
//     DigestMismatchHellos hellos in a row, the lower-ID side sends a
//     summary again and the other side requests what it lacks and sends
//     back what it holds newer or the summary lacks. Links are reliable
//     streams in production, so this only heals drops on lossy test
//     networks and lost races, without per-message acknowledgements.
//   - Aging and withdrawal: entries carry their age, so every copy of an
//     entry expires at about the same time everywhere; an entry not
//     refreshed within MaxAge is dropped. Shutdown floods withdrawn copies
//     so the mesh forgets a leaving router at once. A router that becomes
//     unreachable leaves the published PREDICATES table at once and comes
//     back when reachable again; its LSDB entries wait for MaxAge.
//   - Origin authentication (auth.go): with Config.Auth set, a router seals
//     every advertisement it originates (a signature over AppendSigned,
//     everything but the age, and the certificate that vouches for the
//     key) and checks a received copy before it installs, floods, jumps
//     past or flushes with it; a refused copy does nothing and Step
//     returns an *AuthError naming the reason. Seals travel with the
//     advertisement unchanged. The core never looks inside them: the
//     Authenticator (internal/peerauth in brokers, an HMAC stand-in in the
//     tests) does.
//
// # Deadlines and two paths (Kim10 §2.2–2.3, docs/design.md §11)
//
//   - A predicate advertisement may carry QoS classes: the filters of
//     subscribers that asked for a delivery deadline or two-path delivery
//     (qos.go), so that ingress routers know how urgent a match is.
//   - CostInterval makes measured costs change only at a periodic check
//     (Kim10's proactive best path); SetDelayBudget gives a link the delay
//     budget of the deadline flows through it, and a sample that breaks it
//     is advertised at once (budget.go).
//   - Second paths (second.go): for two-path delivery every router computes
//     the same second path from a message's source to each destination,
//     link-disjoint from the shortest path where the topology allows.
//
// # Shortest paths and tie-breaking
//
// SPF is Dijkstra with a binary heap over the links both ends advertise (a
// link A→B counts only if B's LSA lists A), run at most once per Ready and
// only when an LSA's contents changed. The table must be consistent across
// routers: DRP (Carzaniga09 §2.2) forwards hop by hop, each router choosing
// the next hop with its own table, and the bundles of a message form a
// tree — no link carries the message twice — only if every router on the
// way picks the rest of the path the ingress router would have picked.
// Among equal-cost paths that holds only if every router ranks them by the
// same order, one that does not depend on where the router stands. Many
// natural tie-breaks do depend on it: a heap that pops equal distances in
// insertion order, map iteration, per-router ECMP hashing, keeping the
// current next hop until a better one appears. With any of them the
// ingress can split destinations over two equal first hops whose paths a
// downstream router then merges, so that router receives the message over
// two links (spf_test.go shows it happening).
//
// drip makes shortest paths unique instead of relying on a careful
// tie-break. Every path has a lexicographic weight (cost, h): the sum of
// the advertised costs, then the sum over its directed links u→v of a
// 64-bit hash of (u, v) shifted right by 16 bits so that sums of up to
// 65535 links cannot overflow. The secondary weight is additive like the
// cost, so Bellman's principle holds for the pair: every subpath of a
// shortest path is a shortest path, and Dijkstra stays correct. Two
// distinct paths of equal cost have equal hash sums only by a 2^-48
// coincidence, so the shortest path between any two routers is unique:
// every router, and any correct shortest-path algorithm (the tests use
// Floyd–Warshall), finds the same one, and the suffix a downstream router
// chooses is exactly the rest of the ingress router's path. The same holds
// for the shortest-path trees of broadcast (Carzaniga09 §2.3): every router
// computes the same tree rooted at the source, so TreeChildren at all
// routers together reach each router once. The hash also spreads
// equal-cost traffic over the mesh instead of funnelling it through low
// IDs.
//
// On an exact tie of both weights Dijkstra keeps the lowest-ID parent. That
// rule is position-independent as well: a router on the ingress's path
// sees a subset of the ingress's equal-weight predecessors of each hop,
// which still contains the ingress's (lowest) choice. So even the 2^-48
// case forms trees.
//
// # Wire
//
// Messages are plain Go structs here; a protobuf mapping carries them
// between brokers. WireSize estimates their encoded size so that control
// traffic is measured in simulation. The checksum and edge-hash functions
// are part of the protocol: every router must compute the same values.
package linkstate
