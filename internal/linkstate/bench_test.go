package linkstate

import (
	"fmt"
	"testing"
	"time"
)

// loadedNode returns router lsas[0].Origin, adjacent to its first
// neighbour, with every LSA of the graph installed.
func loadedNode(b *testing.B, lsas []*LSA) (*Node, uint32) {
	self := lsas[0].Origin
	peer := lsas[0].Links[0].Neighbor
	n := newNode(b, self)
	if err := n.LinkUp(peer, lsas[0].Links[0].Cost, 0); err != nil {
		b.Fatal(err)
	}
	if err := n.Step(peer, &Hello{Router: peer, Version: Version, Heard: true}, 0); err != nil {
		b.Fatal(err)
	}
	for _, a := range lsas[1:] {
		c := *a
		c.Seq = 10
		if err := n.Step(peer, &c, 0); err != nil {
			b.Fatal(err)
		}
	}
	drain(n)
	return n, peer
}

// BenchmarkLSAUpdate is what one changed LSA costs a router in a mesh of
// n routers: validation, install, flooding and the SPF of the next Ready.
func BenchmarkLSAUpdate(b *testing.B) {
	for _, n := range []int{100, 1000} {
		lsas := benchLSAs(n)
		b.Run(fmt.Sprintf("routers=%d", n), func(b *testing.B) {
			node, peer := loadedNode(b, lsas)
			victim := lsas[n/2]
			seq := uint64(10)
			b.ReportAllocs()
			for b.Loop() {
				seq++
				c := *victim
				c.Seq = seq
				c.Links = append([]Link(nil), victim.Links...)
				c.Links[0].Cost = uint32(1 + seq%7)
				if err := node.Step(peer, &c, time.Second); err != nil {
					b.Fatal(err)
				}
				for node.HasReady() {
					node.Ready()
					node.Advance()
				}
			}
		})
	}
}

// BenchmarkHello is the steady-state cost of one hello: RTT sample, digest
// comparison, nothing to send.
func BenchmarkHello(b *testing.B) {
	n := newNode(b, 1, rttMode)
	if err := n.LinkUp(2, 1, 0); err != nil {
		b.Fatal(err)
	}
	drain(n)
	now := time.Second
	b.ReportAllocs()
	for b.Loop() {
		now += time.Second
		h := &Hello{Router: 2, Version: Version, SentAt: now, Heard: true, Echoed: true, Echo: now - 20*ms, Digest: n.Digest()}
		if err := n.Step(2, h, now); err != nil {
			b.Fatal(err)
		}
		for n.HasReady() {
			n.Ready()
			n.Advance()
		}
	}
}
