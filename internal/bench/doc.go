// Package bench drives the experimental program of Carzaniga09 §5.1.4 against
// a running drip mesh and measures it the way §5.1.5 and §5.2 report it:
//
//  1. S subscribers set predicates drawn from the workload generator
//     (internal/workload), spread round-robin over the given brokers ("clients
//     are distributed uniformly onto the entire network");
//  2. P publishers open, also round-robin (a drip publisher subscribes to its
//     congestion feedback), and a pause lets the forwarding state propagate;
//  3. the publishers send generated messages for a set time, each as a
//     Poisson process (or evenly spaced) at a constant rate or at a linearly
//     growing one ("clients act as Poisson processes");
//  4. deliveries are collected until every expected one has arrived or a
//     drain timeout passes.
//
// # Exactness oracle
//
// Before a message is sent, the bench evaluates it against every
// subscriber's predicate with content.Predicate.Matches, so it knows exactly
// which subscribers must receive it. Each delivery is then classified as
// expected (the first copy to a subscriber the oracle names), a false
// positive (to a subscriber whose predicate the message does not satisfy: a
// Bloom false positive that leaked past exact local matching, Carzaniga09 §3),
// or a duplicate. What the oracle expects and never arrives is undelivered.
// The ideal output throughput of §5.2.2 is the oracle's count: input rate
// times the client replication factor.
//
// # Latency
//
// The bench embeds its own send time in each payload (a monotonic clock
// reading relative to the run's start) and takes the receive time from the
// same clock, so end-to-end latency needs no synchronised clocks and no
// broker timestamps.
//
// # Other systems
//
// The bench reaches the system under test through Connector, Endpoint,
// Subscriber and Publisher; by default they are drip's client package.
// internal/testbed/systems implements them for ActiveMQ (STOMP with JMS selectors)
// and NATS (one subject, filtering at the subscriber), so one oracle judges
// all three the same way.
package bench
