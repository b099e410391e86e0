package congestion

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ramp is Fig. 7's shape scaled down: a rate the link carries, then twice
// what it carries.
func ramp(t time.Duration) float64 {
	if t < 20*time.Second {
		return 150
	}
	return 400
}

func loopScenario(controlled bool) scenario {
	return scenario{
		cfg:             DefaultConfig(),
		controlled:      controlled,
		publish:         ramp,
		rho:             1,
		link:            &bottleneck{rate: 200, limit: 20, delay: 40 * time.Millisecond},
		back:            40 * time.Millisecond,
		duration:        80 * time.Second,
		step:            time.Millisecond,
		seed:            3,
		subscriberClock: 5 * time.Second,
	}
}

// TestControlCutsLoss is Malekpour11 §IV-A (Fig. 7) in virtual time: one
// publisher and one subscriber behind a bottleneck that the publication
// rate overloads. With control the publisher sends what the path carries
// and the application is held back instead; the losses fall by an order of
// magnitude and almost as much arrives.
func TestControlCutsLoss(t *testing.T) {
	open := loopScenario(false).run()
	closed := loopScenario(true).run()
	t.Logf("open loop:   offered %d, delivered %d, dropped %d", open.offered, open.delivered, open.dropped)
	st := closed.pub.Stats()
	t.Logf("with control: offered %d, sent %d, delivered %d, dropped %d; %d held, %v on average",
		closed.offered, closed.sent, closed.delivered, closed.dropped, st.HeldMessages, st.Waited/time.Duration(max(st.HeldMessages, 1)))
	require.Greater(t, open.dropped, 1000, "the open loop must overload the link")
	assert.Less(t, closed.dropped*20, open.dropped, "control should lose at least 20× less")
	assert.Greater(t, float64(closed.delivered), 0.9*float64(open.delivered), "control should keep 90%% of the deliveries")
	// The subscriber's clock ran 5 s ahead: the round-trip estimate must
	// not see it.
	ss := closed.sub.sessions[1]
	require.True(t, ss.measured)
	assert.InDelta(t, 0.1, ss.rtt.Seconds(), 0.1, "round-trip time %v", ss.rtt)
}

// TestFiltersOfOneSubscriberShareItsRate: a subscriber whose messages
// come through five filters is five flows at the publisher, each with
// its own quota from the one allowed rate of the subscriber's path
// (Algorithm 1 shares it max-min among them). Behind the same bottleneck
// it must lose about as little and receive about as much as a subscriber
// taking the same messages through one filter. (The lab's five-filter
// subscriber of Fig. 9 seemed to lose 56% with control; its held
// messages had been aliasing the publisher's reused buffer.)
func TestFiltersOfOneSubscriberShareItsRate(t *testing.T) {
	one := loopScenario(true).run()
	sc := loopScenario(true)
	sc.split = 5
	five := sc.run()
	open := loopScenario(false).run()
	t.Logf("one filter:   sent %d, delivered %d, dropped %d", one.sent, one.delivered, one.dropped)
	t.Logf("five filters: sent %d, delivered %d, dropped %d; flows %+v", five.sent, five.delivered, five.dropped, five.pub.Flows(epoch.Add(sc.duration)))
	require.Len(t, five.sub.filters, 5)
	assert.Len(t, five.sub.sessions[1].entries, 5, "each filter is a flow of its own")
	assert.Less(t, five.dropped*20, open.dropped, "five filters should lose at least 20× less than no control")
	assert.Less(t, five.dropped, 2*one.dropped, "five filters should lose about as little as one")
	assert.Greater(t, float64(five.delivered), 0.9*float64(one.delivered), "five filters should receive about as much as one")
}
