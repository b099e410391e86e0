// Package harmony runs Kim10 §4's experiments — latency under dynamic path
// delays and loss under path failures — on drip's deadline and two-path
// mechanisms (docs/design.md §11), beside a NATS cluster, in the emulated
// WAN lab (internal/testbed/lab).
//
// Kim10 compares four versions of Harmony on five nodes whose overlay
// paths are all direct (its Fig. 1): the direct path (DP), the periodic
// best path (BP), BP with reactive QoS-aware rerouting (BP+QoS) and that
// with two paths (BP+QoS+MP). drip runs the same four as broker
// configurations on one full-mesh topology of five sites: hop-count routes
// (every pair is one hop: the direct path), RTT costs checked every
// BestPathInterval, the same with subscriptions that carry the deadline
// (their budgets reroute at the next hello), and the same with two paths.
// NATS, whose cluster routes every message over the direct route between
// two servers, is the baseline a user would pick.
//
// Every Period, each link of the topology independently degrades with
// probability Probability for the whole period: its one-way delay becomes
// DegradedDelay (scenario "delay") or it drops every packet (scenario
// "failure"). The schedule is drawn once from the seed, so every variant
// meets the same degradations. Publishers send at a constant rate with
// their send time in the payload; one process holds every client, so
// latencies need no synchronised clocks. The report gives, per variant
// and subscriber-topic pair, the messages lost, the latency quantiles and
// the fractions above the deadline and above 100 ms, and the bytes every
// link carried, the price of two paths.
//
// Kim10's runs last 10 periods of 3 minutes, with a 30-second best-path
// period and 5-second probes. The defaults scale time by 1/15 — periods of
// 12 s, a 2-second best-path period, hellos every 250 ms, a failed link
// dialled again within 500 ms (drip's default backs off to 5 s) — so that a
// variant runs in about two minutes; the ratios between reaction times and
// the period stay the paper's.
package harmony
