package brokertest

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bits-and-blooms/bitset"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/node"
	"github.com/dripmesh/drip/internal/sim"
	"github.com/dripmesh/drip/internal/transport"
	"github.com/dripmesh/drip/internal/wire"
	"github.com/dripmesh/drip/internal/workload"
)

var adversarySeeds = flag.Int("adversary-seeds", 12, "how many seeds TestAdversarialHarness runs")

// TestAdversarialHarness runs random meshes of 5–8 brokers in virtual
// time, signing their advertisements as --tls-peer-identity does, in which
// one broker is compromised: it holds its own key and runs the brokers'
// code, and every 50–250 ms it also sends its neighbours a frame of its
// making, drawn from every attack of issue 37 — bundles in other brokers'
// names (reverse_path), stamps with forged boot epochs and sequence
// numbers (epoch), advertisements of 100,000 filters (limit), of 2,048
// one-bit filters under each --match-all policy, others' advertisements
// signed with its own key, advertisements its neighbours signed before
// they restarted, bundles to router IDs near the largest, malformed
// bundles and, once, a malformed frame. Honest publishers publish at
// honest brokers to honest subscribers, and one honest broker restarts
// halfway. The invariant: every message published while the mesh was
// converged reaches every honest subscriber it matches exactly once,
// nothing forged is delivered, and every honest broker's memory stays
// within its budget — the advertisements' part within three quarters of
// it. A failing seed prints the command that replays it.
func TestAdversarialHarness(t *testing.T) {
	for seed := range uint64(*adversarySeeds) {
		t.Run(fmt.Sprint(seed+1), func(t *testing.T) {
			t.Parallel()
			runAdversary(t, seed+1)
		})
	}
}

func runAdversary(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xad))
	n := 5 + rng.IntN(4)
	topo := sim.RandomConnected(n, 2.6, seed)
	for i := range topo.Links {
		topo.Links[i].Delay = time.Duration(1+rng.IntN(10)) * time.Millisecond
	}
	// The compromised broker: one the others reach each other without,
	// so that every honest broker hears of it from another than itself.
	c := topo.Routers[rng.IntN(n)]
	for _, i := range rng.Perm(n) {
		if !separates(topo, topo.Routers[i]) {
			c = topo.Routers[i]
			break
		}
	}
	var honest []uint32
	for _, id := range topo.Routers {
		if id != c {
			honest = append(honest, id)
		}
	}
	policy, err := node.ParseMatchAllPolicy([]string{"allow", "refuse", "limit:20"}[rng.IntN(3)])
	require.NoError(t, err)
	wl := workload.SingleConstraint()
	wl.Seed = int64(seed)
	s, err := New(Options{Seed: seed, Topology: topo, Workload: wl, Signed: true, Compromised: []uint32{c},
		Subscribers: 3 * len(honest), Publishers: len(honest), Rate: 40, ClientBrokers: honest,
		Config: func(cfg *broker.Config) { cfg.MatchAll = policy }})
	require.NoError(t, err)
	const publishFor, attacksFrom, attacksUntil = 28 * time.Second, 6 * time.Second, 26 * time.Second
	s.publishUntil = publishFor
	s.watchConvergence(ConvergenceCheckEvery)
	a := &adversary{t: t, s: s, rng: rng, c: c, honest: honest, done: map[string]int{}}

	// An honest broker that no other needs to reach the rest restarts
	// halfway, so that what it advertised before can be replayed.
	restart := honest[rng.IntN(len(honest))]
	for _, id := range honest {
		if s.separates(s.index[restart]) {
			restart = id
		}
	}
	if !s.separates(s.index[restart]) {
		a.restarted, a.restarts = restart, true
		s.at(14*time.Second, func() { a.quiet(14*time.Second, 30*time.Second); s.apply(Fault{Kind: Kill, A: restart}) })
		s.at(15*time.Second, func() { s.apply(Fault{Kind: Restart, A: restart}) })
	}
	var attack func()
	attack = func() {
		if s.now >= attacksUntil {
			return
		}
		a.step()
		s.after(time.Duration(50+rng.IntN(200))*time.Millisecond, attack)
	}
	s.at(attacksFrom, attack)
	var memory func()
	memory = func() {
		for _, id := range honest {
			if nd := s.Node(id); nd != nil {
				b := nd.Budget()
				if b.Used() > b.Limit() || b.Tables() > b.Limit()/4*3 {
					a.memory = append(a.memory, fmt.Sprintf("at %v router %d holds %d of its %d, advertisements %d", s.now, id, b.Used(), b.Limit(), b.Tables()))
				}
			}
		}
		s.after(250*time.Millisecond, memory)
	}
	s.after(time.Second, memory)
	s.RunUntil(publishFor + 5*time.Second)

	require.Empty(t, s.Errors())
	rep := s.Check(DeliveryBound)
	replay := fmt.Sprintf("replay: go test ./internal/broker/brokertest -run 'TestAdversarialHarness/^%d$' -v", seed)
	t.Logf("%d brokers, compromised %d, match-all %s, restarted %d; attacks %v\n%s", n, c, policy.Mode, a.restarted, a.done, rep)
	require.True(t, rep.OK(), "%s\n%s", rep, replay)
	require.Positive(t, rep.Protected, replay)
	require.Empty(t, a.memory, "memory beyond the budget\n%s", replay)
	refused := s.Counters("drip_bundles_refused_total", "reason")
	// Honest bundles too may be refused while routes move (the restart,
	// the broken link), and are then counted.
	require.GreaterOrEqual(t, refused["reverse_path"]+refused["epoch"], float64(a.done["source"]+a.done["epoch"]),
		"every bundle in another's name, every forged epoch, refused\n%s", replay)
	ads := s.Counters("drip_advertisements_refused_total", "reason")
	require.Equal(t, float64(a.done["huge"]), ads["limit"], "every oversized advertisement refused\n%s", replay)
	require.Equal(t, float64(a.done["impersonate"]), ads["identity"], "every advertisement in another's name refused\n%s", replay)
}

// adversary is the compromised broker's own making.
type adversary struct {
	t         *testing.T
	s         *Sim
	rng       *rand.Rand
	c         uint32
	honest    []uint32
	restarted uint32 // the honest broker that restarts, if restarts
	restarts  bool
	// quietFrom, quietUntil: while routes move (a restart, a link the
	// adversary broke) and for a while after, bundles in others' names
	// are not sent: a broker also takes a source's bundles on the routes
	// it replaced lately (node's admitSource), on which the adversary may
	// have been the source's path.
	quietFrom, quietUntil time.Duration
	malformedFrame        bool
	done                  map[string]int // attacks made, by kind
	memory                []string
	seq                   uint64
}

func (a *adversary) quiet(from, until time.Duration) {
	a.quietFrom, a.quietUntil = from, max(a.quietUntil, until)
}

// neighbour returns a random honest neighbour of the compromised broker
// that is running and whose link is up, false if none. A broker just
// killed keeps its link ends until the kill has been seen at both.
func (a *adversary) neighbour() (uint32, bool) {
	var up []uint32
	for _, l := range a.s.linksOf(a.s.index[a.c]) {
		id := a.s.nodes[l.other(a.s.index[a.c])].id
		if l.ends[0] != nil && a.s.Node(id) != nil {
			up = append(up, id)
		}
	}
	if len(up) == 0 {
		return 0, false
	}
	return up[a.rng.IntN(len(up))], true
}

func (a *adversary) inject(to uint32, frame []byte, kind string) {
	if err := a.s.Inject(a.c, to, frame); err != nil && kind != "frame" {
		a.t.Errorf("at %v, %s to %d: %v", a.s.now, kind, to, err)
		return
	}
	a.done[kind]++
}

func (a *adversary) params() encoding.Params { return a.s.nodes[a.s.index[a.c]].cfg.Encoding }

// ownSeq is a sequence number past what the compromised broker has
// advertised, in its own incarnation.
func (a *adversary) ownSeq() uint64 {
	a.seq++
	return a.s.Epoch(a.c)/uint64(linkstate.IncarnationUnit)<<linkstate.IncarnationShift + 1<<20 + a.seq
}

func (a *adversary) step() {
	v, ok := a.neighbour()
	if !ok {
		return
	}
	s, rng := a.s, a.rng
	msg := s.pubs[0].gen.Message()
	switch k := rng.IntN(10); {
	case k < 2 && (s.now < a.quietFrom || s.now >= a.quietUntil):
		// A bundle in the name of a source whose path to v does not run
		// through the compromised broker.
		var sources []uint32
		for _, src := range a.honest {
			if rp, ok := s.Node(v).Routes().ReversePath(src); ok && rp != a.c && src != v && s.Node(src) != nil {
				sources = append(sources, src)
			}
		}
		if len(sources) == 0 {
			return
		}
		src := sources[rng.IntN(len(sources))]
		st := dedup.Stamp{Origin: src, Epoch: s.Epoch(src), Seq: 1 + rng.Uint64N(1<<40)}
		a.inject(v, BundleFrame(st, []uint32{v}, marked(msg, Forgery)), "source")
	case k < 4:
		// A stamp of an honest source with a boot epoch it has not booted
		// with, on its path or not. Not to the broker about to restart:
		// one that waits for the routes to confirm its path would be lost
		// with it, neither taken in nor counted as refused.
		src := a.honest[rng.IntN(len(a.honest))]
		if s.Node(src) == nil || a.restarts && v == a.restarted && s.now < 15*time.Second {
			return
		}
		st := dedup.Stamp{Origin: src, Epoch: s.Epoch(src) + 1 + rng.Uint64N(math.MaxUint64-s.Epoch(src)-1), Seq: 1 + rng.Uint64N(1<<62)}
		a.inject(v, BundleFrame(st, []uint32{v}, marked(msg, Forgery)), "epoch")
	case k < 5:
		// Its own advertisement of 100,000 filters.
		huge := make([]encoding.Bloom, 100000)
		for i := range huge {
			huge[i].Set(rng.IntN(a.params().M))
			huge[i].Set(rng.IntN(a.params().M))
		}
		a.control(v, SimKeys{}.Seal(a.c, &linkstate.PredAd{Origin: a.c, Seq: a.ownSeq(), Params: a.params(), Filters: huge}), "huge")
	case k < 6:
		// Its own advertisement of one-bit filters that match everything.
		dense := make([]encoding.Bloom, a.params().M)
		for i := range dense {
			dense[i].Set(i)
		}
		a.control(v, SimKeys{}.Seal(a.c, &linkstate.PredAd{Origin: a.c, Seq: a.ownSeq(), Params: a.params(), Filters: dense}), "dense")
	case k < 7:
		// An honest broker's advertisement, signed with its own key.
		victim := a.honest[rng.IntN(len(a.honest))]
		var m linkstate.Message = &linkstate.PredAd{Origin: victim, Seq: math.MaxUint64 - 1, Params: a.params()}
		if rng.IntN(2) == 0 {
			m = &linkstate.LSA{Origin: victim, Seq: math.MaxUint64 - 1, Links: []linkstate.Link{{Neighbor: a.c, Cost: 1}}}
		}
		a.control(v, SimKeys{}.Seal(a.c, m), "impersonate")
	case k < 8:
		// What the restarted broker signed before it restarted.
		if !a.restarts || s.Node(a.restarted) == nil {
			return
		}
		inc := s.Epoch(a.restarted) / uint64(linkstate.IncarnationUnit)
		for _, kind := range []linkstate.Kind{linkstate.KindRouter, linkstate.KindPredicate} {
			for _, m := range s.Heard(linkstate.Key{Kind: kind, Origin: a.restarted}) {
				if seqOf(m) < inc<<linkstate.IncarnationShift {
					a.control(v, m, "replay")
					break
				}
			}
		}
	case k < 9:
		// A bundle of its own for routers near the largest ID, and a
		// malformed one.
		st := dedup.Stamp{Origin: a.c, Epoch: s.Epoch(a.c), Seq: 1 << 50}
		a.inject(v, BundleFrame(st, []uint32{v, 65534, 65535}, marked(msg, AsItself)), "far")
		bad := wire.AppendBundle(nil, drp.Bundle{Source: a.c, Dest: bitset.New(8).Set(uint(v)), HopsLeft: 4}, st, 0, 0, []byte{0xff, 0xff})
		frame, err := transport.AppendFrame(nil, nil, [][]byte{bad[:len(bad)-1]})
		require.NoError(a.t, err)
		a.inject(v, frame, "malformed")
	default:
		// Once, a frame that does not parse: the link ends, and is
		// dialled again; what was in flight on it may be lost.
		if a.malformedFrame {
			return
		}
		a.malformedFrame = true
		a.quiet(s.now, s.now+15*time.Second)
		s.disrupted()
		a.inject(v, []byte{0x12, 0x05, 0x01, 0x02}, "frame")
	}
}

// control sends link-state messages whole.
func (a *adversary) control(to uint32, m linkstate.Message, kind string) {
	frame, err := ControlFrame(m)
	require.NoError(a.t, err)
	a.inject(to, frame, kind)
}

func seqOf(m linkstate.Message) uint64 {
	switch m := m.(type) {
	case *linkstate.LSA:
		return m.Seq
	case *linkstate.PredAd:
		return m.Seq
	}
	return 0
}

// marked is m with the payload that says what it is to the ledger.
func marked(m content.Message, id uint64) content.Message {
	out, err := content.NewMessage(m.Attributes(), binary.BigEndian.AppendUint64(nil, id))
	if err != nil {
		panic(err)
	}
	return out
}

// separates says whether the routers of topo other than id could not all
// reach each other without it.
func separates(topo sim.Topology, id uint32) bool {
	var start uint32
	for _, r := range topo.Routers {
		if r != id {
			start = r
			break
		}
	}
	seen := map[uint32]bool{start: true}
	stack := []uint32{start}
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, l := range topo.Links {
			for _, e := range [][2]uint32{{l.A, l.B}, {l.B, l.A}} {
				if e[0] == r && e[1] != id && !seen[e[1]] {
					seen[e[1]] = true
					stack = append(stack, e[1])
				}
			}
		}
	}
	return len(seen) < len(topo.Routers)-1
}
