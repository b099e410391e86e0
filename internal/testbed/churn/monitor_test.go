package churn

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func round(at time.Time, samples ...Sample) Round { return Round{At: at, Brokers: samples} }

func up(routers, digest float64) Sample {
	return Sample{Up: true, Routers: routers, Digest: digest}
}

func TestAgree(t *testing.T) {
	now := time.Now()
	parts := [][]int{{0, 1}, {3}}
	assert.True(t, Agree(round(now, up(2, 7), up(2, 7), Sample{}, up(1, 9)), parts), "each part on its own digest")
	assert.False(t, Agree(round(now, up(2, 7), up(2, 8), Sample{}, up(1, 9)), parts), "digests differ within a part")
	assert.False(t, Agree(round(now, up(4, 7), up(4, 7), Sample{}, up(1, 9)), parts), "a part still counts the routers it lost")
	assert.False(t, Agree(round(now, up(2, 7), Sample{}, Sample{}, up(1, 9)), parts), "a broker of a part is down")
	pending := up(2, 7)
	pending.Pending = 1
	assert.False(t, Agree(round(now, up(2, 7), pending, Sample{}, up(1, 9)), parts), "an advertisement is pending")
}

func TestFirstAgreement(t *testing.T) {
	t0 := time.Now()
	all := [][]int{{0, 1}}
	rounds := []Round{
		round(t0, up(2, 1), up(2, 1)),
		round(t0.Add(100*time.Millisecond), up(1, 1), Sample{}),
		round(t0.Add(200*time.Millisecond), up(2, 1), up(2, 2)),
		round(t0.Add(300*time.Millisecond), up(2, 3), up(2, 3)),
	}
	at, ok := FirstAgreement(rounds, t0.Add(50*time.Millisecond), all)
	require.True(t, ok)
	assert.Equal(t, t0.Add(300*time.Millisecond), at, "agreement before since does not count")
	_, ok = FirstAgreement(rounds, t0.Add(300*time.Millisecond), all)
	assert.False(t, ok)
}

// The monitor scrapes real /metrics text, sums counters by their reason
// over peers and over a broker's incarnations, and reports a broker whose
// scrape fails as down.
func TestMonitor(t *testing.T) {
	var inc atomic.Int32
	inc.Store(1)
	var down atomic.Bool
	metrics := func(dropped int) string {
		return fmt.Sprintf(`# TYPE drip_lsdb_digest gauge
drip_lsdb_digest 42
# TYPE drip_routers_known gauge
drip_routers_known 2
# TYPE drip_advertisement_pending gauge
drip_advertisement_pending 0
# TYPE drip_link_dropped_bundles_total counter
drip_link_dropped_bundles_total{peer="b1",reason="link_down"} %d
drip_link_dropped_bundles_total{peer="b2",reason="link_down"} 1
drip_link_dropped_bundles_total{peer="b2",reason="queue_full"} 0
# TYPE drip_subscriber_dropped_total counter
drip_subscriber_dropped_total 3
`, dropped)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if down.Load() {
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, metrics(int(inc.Load())*10))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	m := NewMonitor([]string{addr, addr}, func(int) int { return int(inc.Load()) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	r, err := m.WaitFor(ctx, 2, func(r Round) bool { return Agree(r, [][]int{{0, 1}}) })
	require.NoError(t, err)
	assert.Equal(t, 42.0, r.Brokers[1].Digest)

	inc.Store(2) // both "restarted": their counters start again
	_, err = m.WaitFor(ctx, 1, func(r Round) bool { return r.Brokers[0].Incarnation == 2 && r.Brokers[0].Up })
	require.NoError(t, err)
	down.Store(true)
	_, err = m.WaitFor(ctx, 1, func(r Round) bool { return !r.Brokers[0].Up && !r.Brokers[1].Up })
	require.NoError(t, err)
	cancel()
	<-done

	c := m.Counters()
	// Per broker: incarnation 1 had 10+1 link_down, incarnation 2 had 20+1.
	assert.Equal(t, 2*(11.0+21.0), c[`drip_link_dropped_bundles_total{reason="link_down"}`])
	assert.Equal(t, 0.0, c[`drip_link_dropped_bundles_total{reason="queue_full"}`])
	assert.Equal(t, 2*2*3.0, c["drip_subscriber_dropped_total"])
	by := m.DropsByBroker()
	assert.Equal(t, map[string]float64{
		`drip_link_dropped_bundles_total{peer="b1",reason="link_down"}`: 20,
		`drip_link_dropped_bundles_total{peer="b2",reason="link_down"}`: 1,
		"drip_subscriber_dropped_total":                                 3,
	}, by["b1/2"], "by link; zeros left out")
	assert.Len(t, by, 4, "two brokers, two incarnations each")

	short, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	_, err = m.WaitFor(short, 1, func(Round) bool { return false })
	assert.ErrorContains(t, err, "last scrape: b0:down b1:down")
}
