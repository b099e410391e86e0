package lab

import (
	"testing"
	"time"
)

// BenchmarkLinkOffer is the per-packet cost of one link's model.
func BenchmarkLinkOffer(b *testing.B) {
	l := NewLink(Params{Bandwidth: 1e9, Delay: 20 * ms, Jitter: ms, Loss: 0.01, QueueBytes: 1 << 20}, 1)
	b.ReportAllocs()
	var now time.Duration
	for b.Loop() {
		now += 2 * time.Microsecond
		l.Offer(1500, now)
	}
}

// BenchmarkNetworkTwoHops is the daemon's per-packet model cost for a
// packet crossing two links: inject, two hops, delivery.
func BenchmarkNetworkTwoHops(b *testing.B) {
	tp := line3(b, 0)
	for i := range tp.Links {
		tp.Links[i].Bandwidth = 1e9
	}
	n, err := NewNetwork[int](tp, NetworkOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var now time.Duration
	for b.Loop() {
		now += 2 * time.Microsecond
		n.Send(now, 0, 2, 1500, 0)
		n.Advance(now)
	}
}

func BenchmarkIPv4Dst(b *testing.B) {
	p := ipv4Packet("10.77.0.3", 1480)
	b.ReportAllocs()
	for b.Loop() {
		ipv4Dst(p)
	}
}

// BenchmarkShortestPaths42 is route computation for the paper's 42-site
// network (Carzaniga09 §5.2.2).
func BenchmarkShortestPaths42(b *testing.B) {
	tp, err := Generate(GenOptions{Shape: ShapeBRITE, N: 42, Diameter: 11})
	if err != nil {
		b.Fatal(err)
	}
	g, err := newGraph(tp)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		g.shortestPaths()
	}
}
