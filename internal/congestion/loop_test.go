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
