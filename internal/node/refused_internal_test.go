package node

import (
	"errors"
	"testing"
	"time"

	"github.com/bits-and-blooms/bitset"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/linkstate"
)

// TestRefusedAdvertisementsAreLoggedOncePerLinkAndReason: a forger sending
// many advertisements costs one warn line per link and reason a minute;
// the counter counts every one.
func TestRefusedAdvertisementsAreLoggedOncePerLinkAndReason(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	n, err := New(DefaultConfig(1, "b1"), WithLogger(zap.New(core)), WithClock(clk))
	require.NoError(t, err)
	err = errors.New("forged")
	for range 100 {
		n.refused(&fakeLink{id: 3}, linkstate.RefusedIdentity, err)
	}
	assert.Equal(t, 1, logs.Len())
	n.refused(&fakeLink{id: 3}, linkstate.RefusedSignature, err)
	n.refused(&fakeLink{id: 4}, linkstate.RefusedIdentity, err)
	assert.Equal(t, 3, logs.Len(), "another reason, another link: logged")
	clk.Step(refusedLogInterval)
	n.refused(&fakeLink{id: 3}, linkstate.RefusedIdentity, err)
	assert.Equal(t, 4, logs.Len(), "a minute later: logged again")
	assert.Equal(t, 102.0, testutil.ToFloat64(n.AdvertisementsRefused(linkstate.RefusedIdentity)))
	assert.Equal(t, "identity", logs.All()[0].ContextMap()["reason"])
}

// TestRefusedBundlesAreLoggedWithTheirStamp: a bundle its link refuses is
// counted by the link and, a few times, logged with the message's stamp,
// its destinations and whether the link was finishing, so that a loss
// around a drain can be traced (docs/results/churn.md).
func TestRefusedBundlesAreLoggedWithTheirStamp(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	n, err := New(DefaultConfig(1, "b1"), WithLogger(zap.New(core)))
	require.NoError(t, err)
	l := &fakeLink{id: 2, refuse: true}
	n.LinkUp(l)
	f := n.NewForwarder()
	for seq := range uint64(20) {
		d := drp.Decision{Forwards: []drp.Forward{{Next: 2, Bundle: drp.Bundle{Source: 1, Dest: bitset.New(8).Set(3).Set(5), HopsLeft: 7}}}}
		f.sendPlain(d, nil, []byte{}, bundleHeader{stamp: dedup.Stamp{Origin: 1, Epoch: 9, Seq: seq + 1}})
	}
	assert.Equal(t, 20, l.pushes)
	refused := logs.FilterMessage("bundle refused by its link").All()
	require.Len(t, refused, 5, "the first five, then one per interval")
	fields := refused[0].ContextMap()
	assert.Equal(t, uint64(1), fields["seq"])
	assert.Equal(t, false, fields["finishing"])
	assert.Equal(t, []any{uint32(3), uint32(5)}, fields["routers"])
}

// TestBundleForAFinishedLinkIsDecidedAgain: a bundle decided for a link
// this broker has finished (its neighbour withdrew; the routes published
// before lead around it) is not pushed there but decided again on the
// current routes — here there are none, so its destinations are counted
// as unroutable instead of lost on the link.
func TestBundleForAFinishedLinkIsDecidedAgain(t *testing.T) {
	n, err := New(DefaultConfig(1, "b1"), WithLogger(zap.NewNop()))
	require.NoError(t, err)
	l := &fakeLink{id: 2, refuse: true, finishing: true}
	n.LinkUp(l)
	f := n.NewForwarder()
	d := drp.Decision{Forwards: []drp.Forward{{Next: 2, Bundle: drp.Bundle{Source: 1, Dest: bitset.New(8).Set(3).Set(5), HopsLeft: 7}}}}
	f.sendPlain(d, nil, []byte{}, bundleHeader{stamp: dedup.Stamp{Origin: 1, Epoch: 9, Seq: 1}})
	assert.Zero(t, l.pushes, "nothing pushed to the finished link")
	assert.Equal(t, 2.0, testutil.ToFloat64(n.m.routeDropped.WithLabelValues(drp.DropNoRoute.String())),
		"both destinations decided again, and counted")
	assert.False(t, f.rerouting)
}

// TestBundleForAReplacedLinkTakesItsSuccessor: a bundle decided on links
// loaded before a link was replaced (a neighbour redialled, or both ends
// dialled at once) goes on the new link, not into the old one's refusal:
// in a rolling update that refusal lost messages published at a restarted
// broker as its neighbour began to drain.
func TestBundleForAReplacedLinkTakesItsSuccessor(t *testing.T) {
	n, err := New(DefaultConfig(1, "b1"), WithLogger(zap.NewNop()))
	require.NoError(t, err)
	next := &fakeLink{id: 2}
	old := &fakeLink{id: 2, refuse: true}
	// By the time a forwarder that loaded the links before the
	// replacement asks, the core has published the successor (the driver
	// drains a replaced link only after that).
	old.down = func() bool {
		n.current[2] = next
		n.publishLinks()
		return true
	}
	n.LinkUp(old)
	f := n.NewForwarder()
	d := drp.Decision{Forwards: []drp.Forward{{Next: 2, Bundle: drp.Bundle{Source: 1, Dest: bitset.New(8).Set(3), HopsLeft: 7}}}}
	f.sendPlain(d, nil, []byte{}, bundleHeader{stamp: dedup.Stamp{Origin: 1, Epoch: 9, Seq: 1}})
	assert.Zero(t, old.pushes, "nothing pushed to the replaced link")
	assert.Equal(t, 1, next.pushes, "the bundle went on its successor")
}

// TestBundleForAnEndedLinkWaitsForTheRoutes: a bundle whose next hop's link
// has ended, with no successor, while the routes it was decided on still
// lead there (the core has not yet heard of the end) is held, not pushed
// into the link's refusal: in a rolling update that refusal lost messages
// sent as a neighbour left. It is decided again once the routes change or
// its hold time is up, and held no longer than that.
func TestBundleForAnEndedLinkWaitsForTheRoutes(t *testing.T) {
	setup := func(t *testing.T) (*Node, *fakeLink, *Forwarder, *clocktesting.FakeClock) {
		clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
		n, err := New(DefaultConfig(1, "b1"), WithLogger(zap.NewNop()), WithClock(clk))
		require.NoError(t, err)
		l := &fakeLink{id: 2, refuse: true, down: func() bool { return true }}
		n.LinkUp(l)
		return n, l, n.NewForwarder(), clk
	}
	send := func(f *Forwarder, routes *linkstate.Table) {
		d := drp.Decision{Forwards: []drp.Forward{{Next: 2, Bundle: drp.Bundle{Source: 1, Dest: bitset.New(8).Set(3).Set(5), HopsLeft: 7}}}}
		f.sendPlain(d, routes, []byte{1}, bundleHeader{stamp: dedup.Stamp{Origin: 1, Epoch: 9, Seq: 1}})
	}
	noRoute := func(n *Node) float64 {
		return testutil.ToFloat64(n.m.routeDropped.WithLabelValues(drp.DropNoRoute.String()))
	}

	t.Run("held until its time is up, then decided again", func(t *testing.T) {
		n, l, f, clk := setup(t)
		send(f, n.routes.Load())
		assert.Zero(t, l.pushes, "nothing pushed to the ended link")
		assert.EqualValues(t, 1, n.bounces.count.Load())
		assert.Equal(t, 1.0, testutil.ToFloat64(n.m.heldForLink))

		clk.Step(bounceHoldFor / 2)
		f.ReleaseHeld(false)
		assert.EqualValues(t, 1, n.bounces.count.Load(), "same routes, time left: still held")

		clk.Step(bounceHoldFor / 2)
		f.ReleaseHeld(false)
		assert.Zero(t, n.bounces.count.Load(), "time up: decided again")
		assert.Equal(t, 2.0, noRoute(n), "the routes have none: both destinations counted")
		assert.Zero(t, l.pushes)
		assert.True(t, f.linkHeldUntil.IsZero())
	})
	t.Run("decided on older routes: decided again at once", func(t *testing.T) {
		n, l, f, _ := setup(t)
		send(f, &linkstate.Table{})
		assert.Zero(t, n.bounces.count.Load(), "not held")
		assert.Equal(t, 2.0, noRoute(n))
		assert.Zero(t, l.pushes)
	})
	t.Run("the broker stopping releases it", func(t *testing.T) {
		n, l, f, _ := setup(t)
		send(f, n.routes.Load())
		f.ReleaseHeld(true)
		assert.Zero(t, n.bounces.count.Load())
		assert.Equal(t, 1.0, testutil.ToFloat64(n.m.heldForLink), "not held again")
		assert.Equal(t, 2.0, noRoute(n))
		assert.Zero(t, l.pushes)
	})
	t.Run("a full hold: refused by the link and counted there", func(t *testing.T) {
		n, l, f, _ := setup(t)
		for range maxHeldBundles {
			require.True(t, n.bounces.add(heldBundle{msg: []byte{1}}))
		}
		send(f, n.routes.Load())
		assert.Equal(t, 1, l.pushes)
		assert.Zero(t, testutil.ToFloat64(n.m.heldForLink))
	})
}
