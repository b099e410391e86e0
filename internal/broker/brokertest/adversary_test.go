package brokertest

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/bits-and-blooms/bitset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/clientapi"
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

// line3 is brokers 1–2–3 in a line, with clients added by the test.
func line3(t *testing.T) *Sim {
	t.Helper()
	topo := sim.Topology{Routers: []uint32{1, 2, 3}, Links: []sim.Link{
		{A: 1, B: 2, Weight: 1, Delay: 2 * time.Millisecond}, {A: 2, B: 3, Weight: 1, Delay: 2 * time.Millisecond},
	}}
	s, err := New(Options{Seed: 1, Topology: topo, Workload: workload.SingleConstraint()})
	require.NoError(t, err)
	return s
}

// order is a tenant-a order; forged ones carry Forgery.
func order(forged bool) content.Message {
	attrs := []content.Attribute{{Name: "tenant", Value: content.String("a")}, {Name: "order", Value: content.String("sell-everything")}}
	var payload []byte
	if forged {
		payload = binary.BigEndian.AppendUint64(nil, Forgery)
	}
	m, err := content.NewMessage(attrs, payload)
	if err != nil {
		panic(err)
	}
	return m
}

// TestInjectedSourceRefused: a compromised broker (3, at the end of the
// line 1–2–3) sends its neighbour a bundle in router 1's name — a
// tenant-a order, as if a tenant-a publisher at router 1 had published
// it. Router 3 is not on router 1's path to 2, so 2 refuses it
// (drip_bundles_refused_total{reason="reverse_path"}) and 2's tenant-a
// subscriber never sees it; router 1's own messages still arrive. What
// the compromised broker can still do is publish as itself: the same
// message in its own name is delivered, stamped as router 3's, where the
// ingress's authorization (at router 3) is the compromised broker's.
func TestInjectedSourceRefused(t *testing.T) {
	s := line3(t)
	sub, err := s.AddSubscriber(2, content.MustParse(`tenant = "a"`))
	require.NoError(t, err)
	s.RunUntil(5 * time.Second)
	require.True(t, s.Converged())

	forged := BundleFrame(dedup.Stamp{Origin: 1, Epoch: s.Epoch(1), Seq: 1 << 30}, []uint32{2}, order(true))
	require.NoError(t, s.Inject(3, 2, forged))
	s.RunUntil(7 * time.Second) // past any wait for the routes
	assert.Zero(t, s.ledger.subs[sub].received[Forgery], "a bundle in router 1's name from router 3 was delivered")
	assert.Equal(t, 1.0, s.Counters("drip_bundles_refused_total", "reason")["reverse_path"])

	// Marked as the second copy of a two-path message, which may come over
	// another path than the first: router 3 is not on router 1's second
	// path to 2 either.
	raw, err := proto.Marshal(clientapi.MessageToProto(order(true)))
	require.NoError(t, err)
	var dest bitset.BitSet
	dest.Set(2)
	second := wire.AppendBundleQoS(nil, drp.Bundle{Source: 1, Dest: &dest, HopsLeft: 8},
		dedup.Stamp{Origin: 1, Epoch: s.Epoch(1), Seq: 1<<30 + 1}, 1, 0, raw, wire.BundleQoS{Path: wire.PathSecond})
	frame, err := transport.AppendFrame(nil, nil, [][]byte{second})
	require.NoError(t, err)
	require.NoError(t, s.Inject(3, 2, frame))
	s.RunUntil(8 * time.Second) // past any wait for the routes
	assert.Zero(t, s.ledger.subs[sub].received[Forgery], "a second copy in router 1's name from router 3 was delivered")
	assert.Equal(t, 2.0, s.Counters("drip_bundles_refused_total", "reason")["reverse_path"])

	id, err := s.Publish(1, order(false))
	require.NoError(t, err)
	s.RunUntil(8500 * time.Millisecond)
	assert.Equal(t, 1, s.ledger.subs[sub].received[id], "router 1's own message")

	own := BundleFrame(dedup.Stamp{Origin: 3, Epoch: s.Epoch(3), Seq: 1 << 30}, []uint32{2}, marked(order(false), AsItself))
	require.NoError(t, s.Inject(3, 2, own))
	s.RunUntil(9500 * time.Millisecond)
	assert.Equal(t, 1, s.ledger.subs[sub].received[AsItself], "a compromised broker publishes as itself")
}

// TestForgedEpochsCannotPoisonTheDuplicateFilter: a compromised broker
// sends bundles in router 1's name with boot epochs 2^64−1…2^64−3, which
// took the duplicate filter's three epoch windows of router 1 and had
// every later message of router 1 dropped as stale until the victim
// restarted. On router 1's path (2, between 1 and 3), the epochs are later
// than router 1's incarnation in the database: refused (epoch). Off it (3,
// beyond 2): refused for their path (reverse_path). Router 1's messages
// keep arriving either way.
func TestForgedEpochsCannotPoisonTheDuplicateFilter(t *testing.T) {
	for _, tc := range []struct {
		name             string
		attacker, victim uint32
		reason           string
	}{
		{"on the source's path", 2, 3, "epoch"},
		{"off the source's path", 3, 2, "reverse_path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := line3(t)
			sub, err := s.AddSubscriber(tc.victim, content.MustParse(`tenant = "a"`))
			require.NoError(t, err)
			s.RunUntil(5 * time.Second)
			require.True(t, s.Converged())

			for i := range uint64(3) {
				forged := BundleFrame(dedup.Stamp{Origin: 1, Epoch: math.MaxUint64 - i, Seq: 1}, []uint32{tc.victim}, order(true))
				require.NoError(t, s.Inject(tc.attacker, tc.victim, forged))
			}
			s.RunUntil(7 * time.Second)
			assert.Equal(t, 3.0, s.Counters("drip_bundles_refused_total", "reason")[tc.reason])

			var ids []uint64
			for i := range 20 {
				s.RunUntil(7*time.Second + time.Duration(i)*100*time.Millisecond)
				id, err := s.Publish(1, order(false))
				require.NoError(t, err)
				ids = append(ids, id)
			}
			s.RunUntil(10 * time.Second)
			for _, id := range ids {
				assert.Equal(t, 1, s.ledger.subs[sub].received[id], "router 1's message %d", id)
			}
			assert.Zero(t, s.ledger.subs[sub].received[Forgery])
			assert.Zero(t, s.Counters("drip_duplicates_suppressed_total", "verdict")["stale"])
		})
	}
}

// TestBytesPerMessageFollowDestinations: a peer with router ID 65,534,
// below --max-router-id, subscribing to everything made every bundle
// towards it carry a destination bitset of 8 KiB: the uncompressed bytes
// per message on its neighbour's link grew 52 times. Destinations travel
// as a list when that is shorter, so a message costs about what it costs
// to router 2. A neighbour older than the list (DenseOnly) still gets the
// bitset, and the message.
func TestBytesPerMessageFollowDestinations(t *testing.T) {
	for _, tc := range []struct {
		name      string
		far       uint32
		denseOnly []uint32
		limit     float64 // bytes per message on 0's link to 1
	}{
		{"small IDs", 2, nil, 256},
		{"router 65534", 65534, nil, 256},
		{"router 65534 behind an older broker", 65534, []uint32{1}, 9 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := sim.Topology{Routers: []uint32{0, 1, tc.far}, Links: []sim.Link{
				{A: 0, B: 1, Weight: 1, Delay: time.Millisecond}, {A: 1, B: tc.far, Weight: 1, Delay: time.Millisecond},
			}}
			s, err := New(Options{Seed: 1, Topology: topo, Workload: workload.SingleConstraint(), DenseOnly: tc.denseOnly})
			require.NoError(t, err)
			sub, err := s.AddSubscriber(tc.far, content.MustParse(`tenant exists`))
			require.NoError(t, err)
			s.RunUntil(5 * time.Second)
			require.True(t, s.Converged())
			sent := func() float64 {
				return s.CountersOf(0, "drip_link_sent_uncompressed_bytes_total", "peer")["b1"]
			}
			before := sent()
			const n = 100
			for i := range n {
				id, err := s.Publish(0, order(false))
				require.NoError(t, err)
				s.RunUntil(5*time.Second + time.Duration(i+1)*10*time.Millisecond)
				require.Equal(t, 1, s.ledger.subs[sub].received[id])
			}
			perMessage := (sent() - before) / n
			t.Logf("%.0f bytes per message", perMessage)
			assert.Less(t, perMessage, tc.limit)
		})
	}
}

// TestOversizedAdvertisementRefused: a compromised broker (3) advertises
// 100,000 filters in its own name, 2.6 MB in one frame, which took every
// broker from 27 MB to 150 MB and seconds of index rebuilds. Its
// neighbour counts the filters in their wire form and refuses the
// advertisement before it decodes one (drip_advertisements_refused_total
// {reason="limit"}): nothing enters any database, nothing floods, the
// memory charged for advertisements does not move, and messages keep
// arriving. A broker whose own subscriptions encode to more than the
// bound advertises them merged to fit, and its subscribers miss nothing.
func TestOversizedAdvertisementRefused(t *testing.T) {
	s := line3(t)
	sub, err := s.AddSubscriber(1, content.MustParse(`tenant = "a"`))
	require.NoError(t, err)
	s.RunUntil(5 * time.Second)
	require.True(t, s.Converged())
	digest, tables := s.Node(1).Inspect().Digest, s.Node(2).Budget().Tables()

	params := s.Node(3).Config().Encoding
	huge := make([]encoding.Bloom, 100000)
	for i := range huge {
		huge[i].Set(i % params.M)
		huge[i].Set(params.M - 1 - i/params.M)
	}
	frame, err := ControlFrame(&linkstate.PredAd{Origin: 3, Seq: math.MaxUint64 - 1, Params: params, Filters: huge})
	require.NoError(t, err)
	require.Greater(t, len(frame), 200000)
	require.NoError(t, s.Inject(3, 2, frame))
	s.RunUntil(6 * time.Second)
	assert.Equal(t, 1.0, s.CountersOf(2, "drip_advertisements_refused_total", "reason")["limit"])
	assert.Equal(t, tables, s.Node(2).Budget().Tables(), "the advertisement was charged")
	assert.Equal(t, digest, s.Node(1).Inspect().Digest, "the advertisement flooded")

	id, err := s.Publish(3, order(false))
	require.NoError(t, err)
	s.RunUntil(7 * time.Second)
	assert.Equal(t, 1, s.ledger.subs[sub].received[id])
}

// TestOwnAdvertisementCoarsenedToFit: subscriptions at router 1 that
// encode to more filters than an advertisement may carry (a bound of 8
// here) are advertised merged into 8, which every broker takes; every
// message published at router 2 that a subscription matches still reaches
// it, and no other.
func TestOwnAdvertisementCoarsenedToFit(t *testing.T) {
	topo := sim.Topology{Routers: []uint32{1, 2}, Links: []sim.Link{{A: 1, B: 2, Weight: 1, Delay: time.Millisecond}}}
	wl := workload.SingleConstraint()
	wl.Seed = 3
	s, err := New(Options{Seed: 3, Topology: topo, Workload: wl, Publishers: 2, Rate: 200,
		ClientBrokers: []uint32{2}, Config: func(c *broker.Config) { c.LinkState.MaxFilters = 8 }})
	require.NoError(t, err)
	gen, err := workload.New(wl)
	require.NoError(t, err)
	for range 40 {
		_, err := s.AddSubscriber(1, gen.Predicate())
		require.NoError(t, err)
	}
	s.publishUntil = 10 * time.Second
	s.watchConvergence(ConvergenceCheckEvery)
	s.RunUntil(14 * time.Second)
	in := s.Node(2).Inspect()
	assert.LessOrEqual(t, in.Predicates[1], 8, "router 1's advertisement as router 2 holds it")
	assert.Zero(t, s.Counters("drip_advertisements_refused_total", "reason")["limit"])
	rep := s.Check(DeliveryBound)
	require.True(t, rep.OK(), "%s", rep)
	require.Positive(t, rep.Protected)
}

// TestDenseFiltersAreMatchAll: a compromised broker (3) advertises 2,048
// one-bit filters, none of them empty, which together match every
// message: under --match-all refuse it received all the traffic, the
// match-all gauge did not move and nothing was logged. Judged by their
// density they are match-all filters: the ingress counts them
// (drip_match_all_filters), routes nothing to router 3 through them, and
// counts what it leaves out (drip_route_dropped_destinations_total
// {reason="match_all"}); router 1's subscriber is served as usual.
func TestDenseFiltersAreMatchAll(t *testing.T) {
	topo := sim.Topology{Routers: []uint32{1, 2, 3}, Links: []sim.Link{
		{A: 1, B: 2, Weight: 1, Delay: 2 * time.Millisecond}, {A: 2, B: 3, Weight: 1, Delay: 2 * time.Millisecond},
	}}
	refuse := func(c *broker.Config) { c.MatchAll = node.MatchAllPolicy{Mode: node.MatchAllRefuse} }
	s, err := New(Options{Seed: 1, Topology: topo, Workload: workload.SingleConstraint(), Compromised: []uint32{3}, Config: refuse})
	require.NoError(t, err)
	sub, err := s.AddSubscriber(1, content.MustParse(`tenant = "a"`))
	require.NoError(t, err)
	s.RunUntil(5 * time.Second)
	require.True(t, s.Converged())

	params := s.Node(3).Config().Encoding
	dense := make([]encoding.Bloom, params.M)
	for i := range dense {
		dense[i].Set(i)
	}
	seq := s.Epoch(3)/uint64(linkstate.IncarnationUnit)<<linkstate.IncarnationShift + 1000
	frame, err := ControlFrame(&linkstate.PredAd{Origin: 3, Seq: seq, Params: params, Filters: dense})
	require.NoError(t, err)
	require.NoError(t, s.Inject(3, 2, frame))
	s.RunUntil(6 * time.Second)
	assert.Equal(t, float64(params.M-2), s.CountersOf(2, "drip_match_all_filters", "")[""], "router 2 counts them")

	received := func() float64 { return s.CountersOf(3, "drip_link_received_bundles_total", "peer")["b2"] }
	before := received()
	const n = 50
	for i := range n {
		id, err := s.Publish(2, order(false))
		require.NoError(t, err)
		s.RunUntil(6*time.Second + time.Duration(i+1)*10*time.Millisecond)
		require.Equal(t, 1, s.ledger.subs[sub].received[id])
	}
	assert.Zero(t, received()-before, "bundles router 3 drew through its filters")
	assert.Equal(t, float64(n), s.CountersOf(2, "drip_route_dropped_destinations_total", "reason")["match_all"])
}
