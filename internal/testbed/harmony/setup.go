package harmony

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dripmesh/drip/internal/topology"
)

// Site names: Kim10's nodes 1–5.
var siteNames = []string{"n1", "n2", "n3", "n4", "n5"}

// delays are the one-way delays of the full mesh of five sites, in ms.
// Kim10's Fig. 1 gives its path delays only in the figure; these keep its
// shape: direct paths of 4–20 ms, and for every pair a two-hop detour
// under the 50 ms deadline, so that a degraded direct path can be routed
// around in time.
var delays = map[[2]int]int{
	{1, 2}: 10, {1, 3}: 15, {1, 4}: 20, {1, 5}: 12,
	{2, 3}: 8, {2, 4}: 14, {2, 5}: 8,
	{3, 4}: 6, {3, 5}: 18,
	{4, 5}: 4,
}

// Topology is the five sites, fully meshed, with the delays above and
// unlimited bandwidth (Kim10's load, 100 messages per second per topic,
// is far below any link's capacity).
func Topology() *topology.Topology {
	t := &topology.Topology{Mesh: "harmony"}
	for i, n := range siteNames {
		id := uint32(i + 1)
		t.Brokers = append(t.Brokers, topology.Broker{Name: n, ID: &id})
	}
	for a := 1; a <= 5; a++ {
		for b := a + 1; b <= 5; b++ {
			t.Links = append(t.Links, topology.Link{A: site(a), B: site(b), Weight: 1,
				Delay: topology.Duration(time.Duration(delays[[2]int{a, b}]) * time.Millisecond)})
		}
	}
	return t
}

func site(n int) string { return siteNames[n-1] }

// Pair is a subscriber-topic pair of Kim10 §4 (s_i.t_j: topic j received
// at node i).
type Pair struct {
	Subscriber string `json:"subscriber"`
	Topic      int    `json:"topic"`
}

func (p Pair) String() string { return fmt.Sprintf("s%s.t%d", p.Subscriber[1:], p.Topic) }

// Publishers: topic j is published at Kim10's node j+1.
var publishers = map[int]string{1: "n2", 2: "n3", 3: "n4"}

// Pairs are Kim10 Fig. 3's subscriber-topic pairs.
func Pairs() []Pair {
	return []Pair{{"n1", 1}, {"n1", 2}, {"n3", 3}, {"n4", 2}, {"n5", 1}, {"n5", 3}}
}

// Degradation is one link degraded for one period.
type Degradation struct {
	Period int    `json:"period"`
	A      string `json:"a"`
	B      string `json:"b"`
}

// Schedule draws, for each of periods and each link of t, whether the link
// degrades in that period, with probability p.
func Schedule(t *topology.Topology, periods int, p float64, seed uint64) []Degradation {
	rng := rand.New(rand.NewPCG(seed, 0x4a7a0))
	var out []Degradation
	for k := range periods {
		for _, l := range t.Links {
			if rng.Float64() < p {
				out = append(out, Degradation{Period: k, A: l.A, B: l.B})
			}
		}
	}
	return out
}
