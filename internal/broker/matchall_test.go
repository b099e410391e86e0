package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/node"
)

// TestMatchAllPolicy: a router whose subscriber asks for 'k exists' (a
// filter that matches every message, and covers the router's others) gets
// every message an ingress with policy allow publishes, none under refuse,
// and the burst and about the rate under limit; what is left out is
// counted at the ingress, and other routers are served as usual.
func TestMatchAllPolicy(t *testing.T) {
	const n = 60
	for _, tc := range []struct {
		policy         string
		minGot, maxGot int
	}{
		{"allow", n, n},
		{"refuse", 0, 0},
		{"limit:1", 1, 10}, // a burst of 1, then about 1/s
	} {
		t.Run(tc.policy, func(t *testing.T) {
			p, err := node.ParseMatchAllPolicy(tc.policy)
			require.NoError(t, err)
			m := startMesh(t, 3, [][2]int{{0, 1}, {0, 2}}, func(c *broker.Config) { c.MatchAll = p })
			all := m.subscribe(1, content.MustParse("k exists"))
			other := m.subscribe(2, content.MustParse("x = 1"))
			require.Eventually(t, func() bool {
				ins, err := m.nodes[0].srv.Broker().Inspect(t.Context())
				// The gauge follows the advertisement at once; the data
				// plane's table once no rebuild is pending.
				return err == nil && len(ins.Routers) == 3 && ins.Predicates[2] == 1 && !ins.Pending &&
					(p.Mode != node.MatchAllAllow || ins.Predicates[1] == 1) &&
					metric(t, m.nodes[0].srv.Registry(), "drip_match_all_filters", "") == 1
			}, 5*time.Second, 10*time.Millisecond, "b0 learns both routers' predicates")

			msgs := make([]content.Message, n)
			for i := range msgs {
				msgs[i] = content.MessageFrom(map[string]content.Value{"k": content.Int(int64(i)), "x": content.Int(1)})
			}
			m.publish(0, 0, msgs)
			require.Eventually(t, func() bool { return other.received() == n }, 5*time.Second, 10*time.Millisecond,
				"other routers are served as usual")
			// The ingress counts what it leaves out as it publishes; b1
			// gets the rest.
			dropped := int(metric(t, m.nodes[0].srv.Registry(), "drip_route_dropped_destinations_total", "match_all"))
			require.Eventually(t, func() bool { return all.received() == n-dropped }, 5*time.Second, 10*time.Millisecond,
				"every message left out is counted (%d), b1 gets the others", dropped)
			assert.GreaterOrEqual(t, n-dropped, tc.minGot)
			assert.LessOrEqual(t, n-dropped, tc.maxGot)
		})
	}
}

// TestParseMatchAllPolicy: the flag's values, and errors that say what is
// wrong.
func TestParseMatchAllPolicy(t *testing.T) {
	for in, want := range map[string]node.MatchAllPolicy{
		"allow":     {Mode: "allow"},
		"refuse":    {Mode: "refuse"},
		"limit:100": {Mode: "limit", Rate: 100},
		"limit:0.5": {Mode: "limit", Rate: 0.5},
	} {
		got, err := node.ParseMatchAllPolicy(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for in, want := range map[string]string{
		"":          `match-all policy "": want allow, limit or refuse`,
		"deny":      `match-all policy "deny": want allow, limit or refuse`,
		"limit":     `give the rate, as limit:<messages per second>`,
		"limit:x":   `rate "x" is not a number`,
		"limit:0":   `want a positive rate`,
		"limit:-1":  `want a positive rate`,
		"limit:NaN": `want a positive rate`,
	} {
		_, err := node.ParseMatchAllPolicy(in)
		assert.ErrorContains(t, err, want, in)
	}
	cfg := broker.DefaultConfig(1, "b1")
	cfg.MatchAll = node.MatchAllPolicy{Mode: "limit"}
	assert.ErrorContains(t, cfg.Validate(), "want a positive rate")
}

// metric reads name from reg: the series whose reason label is reason,
// or with reason empty the metric's only series; a counter or a gauge.
func metric(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := reason == "" && len(mf.GetMetric()) == 1
			for _, l := range m.GetLabel() {
				match = match || l.GetName() == "reason" && l.GetValue() == reason
			}
			if !match {
				continue
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	require.Fail(t, fmt.Sprintf("no %s{reason=%q}", name, reason))
	return 0
}
