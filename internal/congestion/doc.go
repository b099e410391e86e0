// Package congestion is content-aware end-to-end congestion control
// (Malekpour11 §III, docs/design.md §12): TFMCC-style, equation-based rate
// control per content-based flow, the messages of one publisher that match
// one subscriber filter. It is pure: inputs in, decisions out; no
// goroutines, clocks or I/O. Times are passed in, rates are messages per
// second.
//
// # Publisher
//
// A Publisher stamps every message it sends with a Header (Malekpour11 Fig.
// 2): a sequence number, the publication record (the Bloom filters of the
// last k messages sent), its clock, its publish rate and, for the flows the
// message belongs to, which subscriber limits them. It keeps one Request per
// (subscriber, filter) that asked for a rate (Fig. 4) and a token bucket for
// each. A message that matches no limited flow leaves at once, so flows that
// do not cross a congested path are never slowed; a message of a limited flow
// waits, in a bounded queue, until every flow it matches has a token.
//
// Algorithm 2 of Malekpour11 keeps a flow table in which a request covered
// by a flow of lower quota is dropped, and a flow covered by a request of
// lower quota is removed. That loses a constraint when the covering flow's
// limiting subscriber later raises its quota, until the other subscriber's
// next feedback. The Publisher keeps every request instead and computes the
// same reduced table from them: a request is active unless another request
// covers its filter with a lower quota (ties broken by subscriber and filter
// ID, so that domination is acyclic). For every message the least quota
// among the active requests it matches is then exactly the least quota among
// all requests it matches, whatever the order in which feedback arrived
// (TestTableLimitMatchesEveryRequest). The active requests are the flows;
// their subscribers are the current limiting receivers (CLRs). A request
// not refreshed within FlowTimeout is forgotten (Malekpour11 §III-B-6).
//
// A subscriber may also give its predicate (Listen): the publisher then
// stamps every message the predicate takes with the subscriber's count of
// them (Stamp), so that the subscriber detects its losses exactly, where a
// publication record shows a message only as its Bloom filter. This departs
// from the paper, whose publisher knows subscribers by their Bloom filters
// alone (docs/design.md §12, "Exact loss detection").
//
// # Subscriber
//
// A Subscriber keeps a session per publisher (Fig. 3). It detects losses
// from the publication records (§III-B-3, §III-C), or from its stamps once
// the publisher stamps its messages, keeps TFRC's average
// loss interval (RFC 5348 §5.4) and estimates the round-trip time from an
// echo at session start, then from the publisher's one-way feedback delay
// added to its own one-way data delay (§III-B-4). Once per round-trip time
// (or MinInterval, whichever is longer) it runs Algorithm 1: the TCP
// response function (eq. 1) gives the allowed rate; above it the quotas are
// shared max-min among the filters, below it the filters it limits may grow
// by at most α of their reception rate; and it tells the publisher.
//
// # Bounds
//
// Every table is bounded: requests (MaxRequests), pending echoes
// (MaxEchoes), held messages (MaxQueue), header tags (MaxTags), subscriber
// sessions (MaxSessions), listeners (MaxListeners, MaxListenConstraints)
// and stamps per header (MaxStamps). A subscriber may slow a flow to
// MinRate and no lower: congestion control lets every receiver of a flow
// slow it (as in TFMCC), and the floor keeps a hostile one from stopping it.
package congestion
