package congestion

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/testbed/systems"
	"github.com/dripmesh/drip/internal/transport"
)

func TestRunOnLoopback(t *testing.T) {
	// A smoke run without the lab: Fig. 7's schedule, shortened and slowed
	// to what loopback carries without loss, on drip without and with
	// control; every message is accounted for, the findings are read and
	// the plot renders.
	if testing.Short() {
		t.Skip("-short: deploys two real brokers per variant on loopback, about 10 s (make test runs it)")
	}
	cfg := DefaultConfig()
	cfg.Scale, cfg.BandwidthScale, cfg.Warmup, cfg.Drain = 0.06, 0.2, 200*time.Millisecond, time.Second
	cfg.Dir = t.TempDir()
	s := Scenarios(cfg.Scale, cfg.BandwidthScale, cfg.PayloadSize)[Fig7]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Run(ctx, cfg, s, Variants(s)[:2])
	require.NoError(t, err)
	require.Len(t, r.Variants, 2)
	for _, v := range r.Variants {
		name := v.Variant.Name
		require.Len(t, v.Groups, 1, name)
		g, p := v.Groups[0], v.Publishers[0]
		assert.Positive(t, p.Sent, name)
		assert.Equal(t, p.Offered, p.Sent+p.Skipped, name)
		assert.Equal(t, p.Sent, g.Expected, "%s: the subscriber takes every message", name)
		assert.Zero(t, g.Lost, "%s lost messages on loopback", name)
		assert.Zero(t, g.Extra, name)
		assert.Equal(t, g.Expected, g.Delivered, name)
		sum := 0.0
		for _, x := range g.Received {
			sum += x * cfg.Bin.Seconds()
		}
		assert.InDelta(t, float64(g.Delivered), sum, 0.5, "%s: the series add up to the totals", name)
	}
	assert.Zero(t, r.Variants[1].Groups[0].LossEvents, "nothing lost, nothing seen lost")
	assert.Empty(t, r.Variants[0].Groups[0].RTTms, "no control, nothing measured")
	rtt := r.Variants[1].Groups[0].RTTms
	require.Len(t, rtt, len(r.Variants[1].Groups[0].Received), "one sample a bin")
	assert.Positive(t, slices.Max(rtt), "the subscription measured its round trip")
	assert.Zero(t, slices.Max(r.Variants[1].Groups[0].Allowed), "no loss: eq. 1 allows any rate, recorded as 0")
	require.NotEmpty(t, r.Findings)
	assert.Equal(t, "losses without control / with control", r.Findings[len(r.Findings)-2].Name)
	// Loopback loses nothing, so control holds nothing back: no message
	// waits for tokens, and each variant delivers what it sent (above).
	// How much each sent is not compared: a publisher that a loaded
	// machine does not run for a tenth of a second skips what its
	// schedule moved past, in either variant, and the deliveries' ratio
	// then says how busy the machine was, not what control did.
	on := r.Variants[1].Publishers[0]
	assert.Zero(t, on.Held, "control held messages back on a lossless path")
	assert.Zero(t, on.WaitedMs)
	assert.Equal(t, "deliveries with control / without", r.Findings[len(r.Findings)-1].Name)
	require.NoError(t, Plot(r, t.TempDir()+"/fig7.png"))
}

func TestShallowBoundsUnsentBytes(t *testing.T) {
	place := shallow{systems.Loopback{}, 8 << 10}
	ctx := context.Background()
	l, err := place.Listen(ctx, "a", "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	c, err := place.DialContext(ctx, "b", "tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	in, err := l.Accept()
	require.NoError(t, err)
	defer in.Close()
	for _, conn := range []net.Conn{c, in} {
		got, err := transport.NotSentLowat(conn)
		require.NoError(t, err)
		assert.Equal(t, 8<<10, got)
	}
}
