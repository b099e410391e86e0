package client

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/broker/brokertest"
)

// triangle starts brokers b0, b1, b2, each linked to the others, so that
// any one can leave without splitting the mesh.
func triangle(t *testing.T) *brokertest.Cluster {
	t.Helper()
	cl := brokertest.NewCluster(t, 3, [][2]int{{0, 1}, {1, 2}, {0, 2}}, nil, brokertest.InMemory())
	converged(t, cl)
	return cl
}

// publishSeq publishes n messages {seq: i} through p, one every gap.
func publishSeq(t *testing.T, p *Publisher, from, n int, gap time.Duration) {
	t.Helper()
	for i := from; i < from+n; i++ {
		require.NoError(t, p.Publish(Message{Attrs: Attrs{"seq": i}}))
		time.Sleep(gap)
	}
}

// collect reads seq values from sub until it has want distinct ones, and
// fails on a repeat.
func collect(t *testing.T, ctx context.Context, sub *Subscription, want int) map[int64]bool {
	t.Helper()
	got := map[int64]bool{}
	for len(got) < want {
		d, err := sub.Next(ctx)
		require.NoError(t, err, "after %d of %d", len(got), want)
		seq := d.Attrs["seq"].(int64)
		require.False(t, got[seq], "message %d delivered twice", seq)
		got[seq] = true
	}
	return got
}

// TestSubscriptionFailsOverWhenBrokerDies: the subscription's broker is
// killed; the client subscribes again at the next broker, reports the gap,
// and receives what is published from then on, once.
func TestSubscriptionFailsOverWhenBrokerDies(t *testing.T) {
	cl := triangle(t)
	var mu sync.Mutex
	var gaps []Gap
	sc := dialAt(t, cl, 0, WithGapHandler(func(g Gap) { mu.Lock(); gaps = append(gaps, g); mu.Unlock() }))
	pc := dialAt(t, cl, 2)
	ctx := testContext(t)
	sub, err := sc.Subscribe(ctx, `seq >= 0`)
	require.NoError(t, err)
	defer sub.Close()
	converged(t, cl)
	_, err = pc.Publish(ctx, Message{Attrs: Attrs{"seq": 0}})
	require.NoError(t, err)
	collect(t, ctx, sub, 1)

	killed := time.Now()
	cl.Kill(0)
	require.Eventually(t, func() bool { return sub.Broker() == "b1" }, hangGuard, time.Millisecond)
	converged(t, cl)
	_, err = pc.Publish(ctx, Message{Attrs: Attrs{"seq": 1}})
	require.NoError(t, err)
	d, err := sub.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), d.Attrs["seq"])
	require.NotNil(t, d.Gap, "the first delivery after the gap carries it")
	assert.Equal(t, "b0", d.Gap.From)
	assert.Equal(t, "b1", d.Gap.To)
	assert.Error(t, d.Gap.Err)
	assert.Less(t, d.Gap.Duration(), 2*time.Second)
	assert.False(t, d.Gap.Start.Before(killed.Add(-time.Millisecond)))
	mu.Lock()
	assert.Equal(t, []Gap{*d.Gap}, gaps, "the handler saw it too")
	mu.Unlock()
	assert.Equal(t, []Gap{*d.Gap}, sub.Gaps())
}

// TestSubscriptionComesBackAfterRestart: with one address, the subscription
// is back within 2 s of its broker's restart.
func TestSubscriptionComesBackAfterRestart(t *testing.T) {
	cl := brokertest.NewCluster(t, 2, [][2]int{{0, 1}}, nil, brokertest.InMemory())
	converged(t, cl)
	c, err := Dial(testContext(t), cl.Addr(0), WithDialOptions(cl.DialOption()), WithReconnectBackoff(50*time.Millisecond, time.Second))
	require.NoError(t, err)
	defer c.Close()
	ctx := testContext(t)
	sub, err := c.Subscribe(ctx, `seq >= 0`)
	require.NoError(t, err)
	defer sub.Close()

	cl.Kill(0)
	time.Sleep(300 * time.Millisecond)
	restarted := time.Now()
	cl.Restart(0)
	require.Eventually(t, func() bool { return len(sub.Gaps()) == 1 }, hangGuard, time.Millisecond)
	g := sub.Gaps()[0]
	assert.Less(t, g.End.Sub(restarted), 2*time.Second, "back within 2 s of the restart")
	assert.Equal(t, "b0", g.To)

	converged(t, cl)
	pc := dialAt(t, cl, 1)
	_, err = pc.Publish(ctx, Message{Attrs: Attrs{"seq": 7}})
	require.NoError(t, err)
	collect(t, ctx, sub, 1)
}

// TestGracefulStopLosesNothing: the broker a subscriber and a publisher use
// is stopped gracefully while messages flow. The subscription moves before
// the broker leaves (no gap), the publisher resends exactly what the broker
// did not publish, and every message reaches both subscribers once.
func TestGracefulStopLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := triangle(t)
		var failovers []Failover
		var mu sync.Mutex
		c0 := dialAt(t, cl, 0, WithFailoverHandler(func(f Failover) { mu.Lock(); failovers = append(failovers, f); mu.Unlock() }))
		c2 := dialAt(t, cl, 2)
		ctx := testContext(t)
		sub0, err := c0.Subscribe(ctx, `seq >= 0`)
		require.NoError(t, err)
		defer sub0.Close()
		sub2, err := c2.Subscribe(ctx, `seq >= 0`)
		require.NoError(t, err)
		defer sub2.Close()
		converged(t, cl)

		p, err := c0.NewPublisher(ctx)
		require.NoError(t, err)
		const n = 1500
		stopped := make(chan struct{})
		go func() {
			time.Sleep(300 * time.Millisecond)
			cl.Stop(0)
			close(stopped)
		}()
		publishSeq(t, p, 0, n, time.Millisecond)
		sum, err := p.Close()
		require.NoError(t, err)
		<-stopped
		assert.Equal(t, uint64(n), sum.Accepted, "every message published exactly once, over two brokers")
		assert.Zero(t, p.InFlightLost())

		got0 := collect(t, ctx, sub0, n)
		got2 := collect(t, ctx, sub2, n)
		assert.Len(t, got0, n)
		assert.Len(t, got2, n)
		assert.Empty(t, sub0.Gaps(), "the subscription moved before its broker left")
		assert.NotEqual(t, "b0", sub0.Broker())
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, failovers, "the publisher moved")
		assert.Zero(t, failovers[0].InFlight)
		assert.Equal(t, cl.Addr(0), failovers[0].From)
		t.Logf("publisher moved %s → %s resending %d; subscriber dropped %d copies during the overlap", failovers[0].From, failovers[0].To, failovers[0].Resent, sub0.Duplicates())
	})
}

// TestPublisherFailsOverWhenBrokerDies: the publisher's broker is killed
// mid-stream; the publisher moves on, reports what was in flight, and what
// it publishes afterwards arrives.
func TestPublisherFailsOverWhenBrokerDies(t *testing.T) {
	cl := triangle(t)
	var mu sync.Mutex
	var failovers []Failover
	pc := dialAt(t, cl, 0, WithFailoverHandler(func(f Failover) { mu.Lock(); failovers = append(failovers, f); mu.Unlock() }))
	sc := dialAt(t, cl, 2)
	ctx := testContext(t)
	sub, err := sc.Subscribe(ctx, `seq >= 0`)
	require.NoError(t, err)
	defer sub.Close()
	converged(t, cl)
	p, err := pc.NewPublisher(ctx)
	require.NoError(t, err)
	publishSeq(t, p, 0, 100, 0)
	// Acknowledged messages still queued at the broker die with it (they
	// are in flight at the dead broker): let these arrive first.
	collect(t, ctx, sub, 100)
	cl.Kill(0)
	publishSeq(t, p, 100, 100, 0)
	_, err = p.Close()
	require.NoError(t, err)
	mu.Lock()
	require.Len(t, failovers, 1)
	f := failovers[0]
	mu.Unlock()
	assert.Equal(t, cl.Addr(0), f.From)
	assert.Error(t, f.Err)
	assert.Equal(t, f.InFlight, p.InFlightLost())
	assert.Equal(t, uint64(200)-f.InFlight, p.Sent())

	// Everything sent after the failover arrives; of what was in flight,
	// some may have.
	got := map[int64]bool{}
	for i := range int64(100) {
		got[i] = true
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		d, err := sub.Next(rctx)
		cancel()
		if err != nil {
			break
		}
		seq := d.Attrs["seq"].(int64)
		require.False(t, got[seq], "message %d delivered twice", seq)
		got[seq] = true
	}
	missing := 0
	for i := range int64(200) {
		if !got[i] {
			missing++
		}
	}
	assert.LessOrEqual(t, uint64(missing), f.InFlight, "only messages in flight at the kill may be missing")
}

// TestDNSTargetFailsOver: a dns:/// target's addresses are looked up, and
// the client fails over among them.
func TestDNSTargetFailsOver(t *testing.T) {
	cl := triangle(t)
	lookups := 0
	// The looked-up names b1 and b2 stand for the brokers' ports.
	names := WithDialOptions(grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		var i int
		if _, err := fmt.Sscanf(addr, "b%d:7000", &i); err != nil {
			return nil, err
		}
		return cl.DialContext(ctx, cl.Addr(i))
	}))
	c, err := Dial(testContext(t), "dns:///brokers.test:7000", names,
		WithLookupHost(func(_ context.Context, host string) ([]string, error) {
			assert.Equal(t, "brokers.test", host)
			lookups++
			return []string{"b1", "b2"}, nil
		}))
	require.NoError(t, err)
	defer c.Close()
	ctx := testContext(t)
	sub, err := c.Subscribe(ctx, `seq >= 0`)
	require.NoError(t, err)
	defer sub.Close()
	assert.Equal(t, "b1", sub.Broker())
	cl.Kill(1)
	require.Eventually(t, func() bool { return sub.Broker() == "b2" }, hangGuard, time.Millisecond)
	assert.GreaterOrEqual(t, lookups, 1)
}

// TestMoveSkipsABrokerThatHangs: the address after the draining broker's
// accepts connections and never answers (in Kubernetes: the pod replaced
// just before in a rolling update, which cluster DNS still maps to the old
// pod's IP). The subscription moves past it to the next broker before the
// drain ends, with no gap and nothing lost.
func TestMoveSkipsABrokerThatHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := brokertest.NewCluster(t, 3, [][2]int{{0, 1}, {1, 2}, {0, 2}}, func(c *broker.Config) { c.DrainTimeout = 6 * time.Second }, brokertest.InMemory())
		converged(t, cl)
		// An address that takes connections and never answers: HTTP/2 never
		// starts, and gRPC waits for it until its connect timeout.
		target := strings.Join([]string{cl.Addr(0), brokertest.HangingAddr, cl.Addr(1), cl.Addr(2)}, ",")
		sc, err := Dial(testContext(t), target, WithDialOptions(cl.DialOption()), WithReconnectBackoff(10*time.Millisecond, 100*time.Millisecond))
		require.NoError(t, err)
		defer sc.Close()
		pc := dialAt(t, cl, 2)
		ctx := testContext(t)
		sub, err := sc.Subscribe(ctx, `seq >= 0`)
		require.NoError(t, err)
		defer sub.Close()
		converged(t, cl)
		p, err := pc.NewPublisher(ctx)
		require.NoError(t, err)

		// Publishing outlasts the drain's 3 s for subscribers to move.
		const n = 2000
		stopped := make(chan time.Duration, 1)
		go func() {
			time.Sleep(200 * time.Millisecond)
			start := time.Now()
			cl.Stop(0)
			stopped <- time.Since(start)
		}()
		publishSeq(t, p, 0, n, 2*time.Millisecond)
		_, err = p.Close()
		require.NoError(t, err)
		took := <-stopped
		got := collect(t, ctx, sub, n)
		assert.Len(t, got, n)
		assert.Empty(t, sub.Gaps(), "the subscription moved past the hanging address before its broker left")
		assert.Equal(t, "b1", sub.Broker())
		t.Logf("broker stopped in %v; subscriber dropped %d copies during the overlap", took.Round(time.Millisecond), sub.Duplicates())
	})
}

// TestRollingRestartLosesNothing is a Kubernetes rolling update on real
// brokers and clients: each broker in turn, highest first, stops
// gracefully, starts again and joins, while a publisher and a subscriber
// on every broker keep going. Every subscriber takes everything; every
// message must reach each of them exactly once, and no publisher may lose
// a message in flight (every move is a drain, whose acknowledgement is
// exact).
func TestRollingRestartLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		// Production-like margins: a 2 s dead interval, and drain phases
		// that end when their work is done, not at a deadline (the test's
		// brokers otherwise give up after a second).
		cl := brokertest.NewCluster(t, n, [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 0}, {0, 2}}, func(c *broker.Config) {
			c.LinkState.DeadInterval = 2 * time.Second
			c.DrainTimeout, c.RerouteGrace = 20*time.Second, 5*time.Second
		}, brokertest.InMemory())
		converged(t, cl)
		// Longer than hangGuard: four drains.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		begin := time.Now()
		since := func() string { return fmt.Sprintf("%.3fs", time.Since(begin).Seconds()) }
		clients := make([]*Client, n)
		subs := make([]*Subscription, n)
		for i := range n {
			clients[i] = dialAt(t, cl, i, WithFailoverHandler(func(f Failover) {
				t.Logf("%s client %d: publisher moved %s → %s, resent %d, in flight %d (%v)", since(), i, f.From, f.To, f.Resent, f.InFlight, f.Err)
			}))
			var err error
			subs[i], err = clients[i].Subscribe(ctx, `seq >= 0`)
			require.NoError(t, err)
			defer subs[i].Close()
		}
		converged(t, cl)

		stop := make(chan struct{})
		sent := make([]int, n)
		sums := make([]Summary, n)
		lost := make([]uint64, n)
		var wg sync.WaitGroup
		for k := range n {
			p, err := clients[k].NewPublisher(ctx)
			require.NoError(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						sum, err := p.Close()
						assert.NoError(t, err, "publisher %d", k)
						sums[k] = sum
						lost[k] = p.InFlightLost()
						return
					case <-time.After(2 * time.Millisecond):
					}
					if !assert.NoError(t, p.Publish(Message{Attrs: Attrs{"pub": k, "seq": i}})) {
						return
					}
					sent[k] = i + 1
				}
			}()
		}
		for i := n - 1; i >= 0; i-- {
			time.Sleep(300 * time.Millisecond)
			reg := cl.Registry(i)
			t.Logf("%s stopping b%d", since(), i)
			cl.Stop(i)
			t.Logf("%s b%d stopped; it counted %s", since(), i, dropCounters(t, reg))
			cl.Restart(i)
			select {
			case <-cl.Broker(i).Joined():
				t.Logf("%s b%d joined", since(), i)
			case <-ctx.Done():
				t.Fatalf("broker %d did not join again", i)
			}
		}
		time.Sleep(300 * time.Millisecond)
		close(stop)
		wg.Wait()

		for i := range n {
			t.Logf("b%d counted %s", i, dropCounters(t, cl.Registry(i)))
		}
		total := 0
		for k := range n {
			assert.Equal(t, uint64(sent[k]), sums[k].Accepted, "publisher %d: every message published exactly once", k)
			assert.Zero(t, lost[k], "publisher %d: nothing in flight to a broker that failed", k)
			total += sent[k]
		}
		for j, sub := range subs {
			got := map[[2]int64]bool{}
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			for len(got) < total {
				d, err := sub.Next(rctx)
				if err != nil {
					break
				}
				key := [2]int64{d.Attrs["pub"].(int64), d.Attrs["seq"].(int64)}
				require.False(t, got[key], "subscriber %d: message %v delivered twice", j, key)
				got[key] = true
			}
			rcancel()
			var missing [][2]int64
			for k := range n {
				for i := range sent[k] {
					if key := [2]int64{int64(k), int64(i)}; !got[key] {
						missing = append(missing, key)
					}
				}
			}
			assert.Empty(t, missing, "subscriber %d (at %s, %d reported lost) never received these (publisher, seq) of %v sent", j, sub.Broker(), sub.Lost(), sent)
			assert.Empty(t, sub.Gaps(), "subscriber %d moved make-before-break", j)
		}
	})
}

// dropCounters lists a broker's nonzero counters of what it did not
// deliver.
func dropCounters(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var out []string
	for _, mf := range mfs {
		name := mf.GetName()
		// ("shed_", not "shed": published_messages_total is no drop.)
		if !strings.Contains(name, "dropped") && !strings.Contains(name, "false_positives") &&
			!strings.Contains(name, "suppressed") && !strings.Contains(name, "shed_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, l.GetValue())
				}
				out = append(out, fmt.Sprintf("%s%v=%.0f", strings.TrimPrefix(name, "drip_"), labels, v))
			}
		}
	}
	return strings.Join(out, " ")
}
