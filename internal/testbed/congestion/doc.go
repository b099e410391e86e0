// Package congestion runs the experiments of content-aware congestion
// control (Malekpour11 §IV, docs/design.md §12) in the emulated WAN lab
// (internal/testbed/lab): drip without control, drip with control
// (subscriptions ask for feedback, publishers listen) and, for Figs. 7 and
// 8, a NATS cluster and a network of ActiveMQ brokers, on the same
// bottleneck. A peer whose publisher fails under the overload (NATS's has
// returned "connection closed") is recorded so (PublisherResult.Error) and
// the run goes on; a drip publisher's error fails the run.
//
// Each scenario is a topology with one bottleneck link whose bandwidth
// follows a schedule (the lab changes it live), publishers that follow a
// rate schedule, and subscribers that each take a known share of some
// publishers' messages: publisher p's message n carries pub = p and
// k = n mod 100, and a subscriber takes k in [KFrom, KTo). Every message
// carries its publisher, number and send time in its payload, so each
// subscriber knows exactly what it should have received and when each
// delivery was sent; all clients live in this process. The report gives,
// per variant and subscriber group, time series (sent, received and lost
// by send time, arrivals) in bins of 250 ms, the bottleneck's bytes from
// the lab's counter, and Findings: the paper's quantities read against
// issue 13's targets by the pure functions of measure.go (loss reduction,
// adaptation time, max-min shares, Jain's index).
//
// Where drip loses. A drip broker's default answer to a full link queue is
// to make the publishers wait (docs/design.md §12: loss, not delay), and
// congestion control reacts to loss. The runs configure the brokers as the
// paper's routers: a link queue of 32 KiB that drops when full
// (Config.DropAtLinks). Below that queue, gRPC and TCP buffer too; on a
// 500 kbit/s link the socket buffer that autotuning grows holds seconds,
// which delays both the losses and the feedback. The brokers bound it on
// their peer connections themselves (Config.PeerNotSentLowat, their
// default of 16 KiB); the runs also bound it with TCP_NOTSENT_LOWAT
// (Config.NotSentLowat, 8 KiB) on every connection the brokers and clients
// make, the brokers' own bound applied over it on peer links, and scale the paper's bandwidths by 8 with
// messages of 1 KB (Config.BandwidthScale), so that gRPC's own 64 KiB
// per stream is a tenth of a second of the bottleneck rather than a
// second; rates scale with the bandwidth, so every link is loaded as in
// the paper.
//
// Time: the paper's runs are minutes long; Config.Scale 1 keeps Fig. 7's
// ramp at 10 + 20 + 20 s, Fig. 8's period at 20 s (the paper's 40 s, still
// ten times the 2 s it adapts in), Fig. 9's phases at 25 s and Fig. 10's
// run at 45 s, so that all five scenarios take about 22 minutes on two
// cores (5 of them the peers' runs of Figs. 7 and 8).
package congestion
