package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/bench/benchtest"
	"github.com/dripmesh/drip/internal/broker/brokertest"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/workload"
)

func startMesh(t *testing.T, brokers int, fault benchtest.Fault, opts ...brokertest.ClusterOption) *benchtest.Mesh {
	t.Helper()
	return benchtest.Start(t, brokers, fault, opts...)
}

// smallConfig is a short run: with the single-constraint workload over 40
// names, 12 subscribers give a replication near 5 (Carzaniga09 §5.2.1 uses
// 200 names for 80 subscribers).
func smallConfig(brokers []string) Config {
	w := workload.SingleConstraint()
	w.Names = 40
	return Config{
		Brokers: brokers, WorkloadName: "single", Workload: w,
		Subscribers: 12, Publishers: 3, Mode: Poisson, Rate: 400,
		Duration: 500 * time.Millisecond, Drain: 5 * time.Second, FailoverWait: 500 * time.Millisecond,
	}
}

// meshConfig is smallConfig on a real mesh: sending starts once every
// subscription is known throughout the mesh.
func meshConfig(mesh *benchtest.Mesh) Config {
	c := smallConfig(mesh.Addrs())
	c.Ready = mesh.WaitConverged
	return c
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Against an ideal mesh every expected delivery arrives, exactly once, and
// every count in the report adds up.
func TestRunAgainstIdealMesh(t *testing.T) {
	for _, mode := range Modes {
		t.Run(string(mode), func(t *testing.T) {
			mesh := startMesh(t, 2, benchtest.Fault{})
			cfg := meshConfig(mesh)
			cfg.Mode, cfg.RateStart = mode, 100
			var progress bytes.Buffer
			cfg.Progress = &progress
			rep, err := Run(runCtx(t), cfg)
			require.NoError(t, err)

			tot := rep.Totals
			assert.True(t, rep.Exact())
			assert.Positive(t, tot.Sent)
			assert.Equal(t, uint64(mesh.Published()), tot.Sent)
			assert.Equal(t, tot.Sent, tot.Accepted)
			// A broker routes what an encoded predicate matches (a superset
			// of the exact matches); the oracle counts exact matches.
			assert.LessOrEqual(t, tot.BrokerUnmatched, tot.Unmatched)
			assert.Positive(t, tot.Ideal)
			assert.Equal(t, tot.Ideal, tot.Delivered)
			assert.Zero(t, tot.Undelivered)
			assert.Zero(t, tot.Lost)
			assert.Zero(t, tot.Foreign)
			assert.Equal(t, tot.Delivered, rep.Latency.Count)
			assert.Positive(t, rep.Latency.Max)
			assert.LessOrEqual(t, rep.Latency.P50, rep.Latency.P90)
			assert.LessOrEqual(t, rep.Latency.P90, rep.Latency.P99)
			assert.LessOrEqual(t, rep.Latency.P99, rep.Latency.Max)
			assert.InDelta(t, float64(tot.Ideal)/float64(tot.Sent), rep.Replication.Client, 1e-12)
			assert.LessOrEqual(t, rep.Replication.Broker, 2.0)

			var sent, delivered, ideal uint64
			for i, s := range rep.Series {
				assert.Equal(t, i, s.T)
				sent, delivered, ideal = sent+s.Sent, delivered+s.Delivered, ideal+s.Ideal
			}
			assert.Equal(t, [3]uint64{tot.Sent, tot.Delivered, tot.Ideal}, [3]uint64{sent, delivered, ideal})

			require.Len(t, rep.Subscribers, 12)
			var subIdeal uint64
			for j, s := range rep.Subscribers {
				assert.Equal(t, mesh.Addrs()[j%2], s.Broker, "Carzaniga09 §5.1.4: clients spread uniformly")
				assert.Equal(t, s.Ideal, s.Delivered)
				subIdeal += s.Ideal
			}
			assert.Equal(t, tot.Ideal, subIdeal)
			require.Eventually(t, func() bool { return mesh.Subscriptions() == 0 }, 10*time.Second, time.Millisecond, "subscriptions closed")
			// The report is JSON with the documented field names.
			b, err := json.Marshal(rep)
			require.NoError(t, err)
			for _, field := range []string{`"series":[{"t":0,"sent":`, `"false_positives":0`, `"duplicates":0`, `"undelivered":0`, `"latency_ms":{"count":`, `"p99":`} {
				assert.Contains(t, string(b), field)
			}
		})
	}
}

func TestRunDetectsFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault benchtest.Fault
		check func(t *testing.T, rep *Report, inj benchtest.Injected)
	}{
		{"drops", benchtest.Fault{DropEvery: 7}, func(t *testing.T, rep *Report, inj benchtest.Injected) {
			require.Positive(t, inj.Dropped)
			assert.Equal(t, uint64(inj.Dropped), rep.Totals.Undelivered)
			assert.Equal(t, rep.Totals.Ideal-uint64(inj.Dropped), rep.Totals.Delivered)
			assert.True(t, rep.Exact(), "losing messages is not inexact")
		}},
		{"duplicates", benchtest.Fault{DuplicateEvery: 5}, func(t *testing.T, rep *Report, inj benchtest.Injected) {
			require.Positive(t, inj.Duplicated)
			assert.Equal(t, uint64(inj.Duplicated), rep.Totals.Duplicates)
			var perSecond uint64
			for _, s := range rep.Series {
				perSecond += s.Duplicates
			}
			assert.Equal(t, rep.Totals.Duplicates, perSecond, "every duplicate falls in a second of the series")
			assert.Zero(t, rep.Totals.Undelivered)
			assert.False(t, rep.Exact())
		}},
		{"false positives", benchtest.Fault{FalsePositiveEvery: 3}, func(t *testing.T, rep *Report, inj benchtest.Injected) {
			require.Positive(t, inj.FalsePositives)
			assert.Equal(t, uint64(inj.FalsePositives), rep.Totals.FalsePositives)
			assert.Zero(t, rep.Totals.Undelivered)
			assert.False(t, rep.Exact())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mesh := startMesh(t, 1, tt.fault)
			cfg := meshConfig(mesh)
			// Drops make the drain time out; deliveries that faults add
			// can trail the last expected one on another stream, and the
			// settle time catches them.
			cfg.Drain = 300 * time.Millisecond
			if tt.fault.DropEvery == 0 {
				cfg.Drain, cfg.Settle = 5*time.Second, time.Second
			}
			rep, err := Run(runCtx(t), cfg)
			require.NoError(t, err)
			tt.check(t, rep, mesh.Injected())
		})
	}
}

func TestRunErrors(t *testing.T) {
	mesh := startMesh(t, 1, benchtest.Fault{})
	good := meshConfig(mesh)
	tests := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "no broker addresses"},
		{"empty broker", func(c *Config) { c.Brokers = []string{""} }, "broker address 0 is empty"},
		{"subscribers", func(c *Config) { c.Subscribers = 0 }, "0 subscribers"},
		{"publishers", func(c *Config) { c.Publishers = -1 }, "-1 publishers"},
		{"mode", func(c *Config) { c.Mode = "burst" }, `unknown mode "burst"`},
		{"rate", func(c *Config) { c.Rate = 0 }, "rate 0 messages/s"},
		{"negative ramp start", func(c *Config) { c.Mode, c.RateStart = Ramp, -1 }, "ramp start rate -1"},
		{"empty ramp", func(c *Config) { c.Mode, c.Rate, c.RateStart = Ramp, 0, 0 }, "from 0 to 0"},
		{"duration", func(c *Config) { c.Duration = 0 }, "duration 0s"},
		{"warmup", func(c *Config) { c.Warmup = -time.Second }, "warmup -1s"},
		{"drain", func(c *Config) { c.Drain = -time.Second }, "drain -1s"},
		{"settle", func(c *Config) { c.Settle = -time.Second }, "settle -1s"},
		{"workload", func(c *Config) { c.Workload.Names = 0 }, "workload: Names = 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.modify(&cfg)
			_, err := Run(runCtx(t), cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}

	t.Run("unreachable broker", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := lis.Addr().String()
		require.NoError(t, lis.Close())
		cfg := good
		cfg.Brokers = []string{addr}
		rep, err := Run(runCtx(t), cfg)
		require.Error(t, err)
		assert.Contains(t, err.Error(), addr)
		require.NotNil(t, rep, "a failed run still reports")
		assert.Contains(t, rep.Error, addr)

		// One broker down among live ones is no error: its clients fail
		// over to the next.
		cfg.Brokers = []string{addr, mesh.Addrs()[0]}
		rep, err = Run(runCtx(t), cfg)
		require.NoError(t, err)
		assert.Equal(t, rep.Totals.Ideal, rep.Totals.Delivered)
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cfg := good
		cfg.Warmup = time.Hour
		var out strings.Builder
		cfg.Progress = &out
		go func() {
			for mesh.Subscriptions() < cfg.Subscribers {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		_, err := Run(ctx, cfg)
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("publishers blocked", func(t *testing.T) {
		m := startMesh(t, 1, benchtest.Fault{StallPublish: true})
		cfg := meshConfig(m)
		// The broker never reads the stream: none of its 1,000 messages is
		// acknowledged.
		cfg.Publishers, cfg.Rate, cfg.Drain = 1, 2000, 200*time.Millisecond
		_, err := Run(runCtx(t), cfg)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "publishers still blocked 200ms after sending should have ended")
	})
	t.Run("broker goes away", func(t *testing.T) {
		m := startMesh(t, 1, benchtest.Fault{})
		cfg := meshConfig(m)
		cfg.Warmup = time.Hour
		go func() {
			for m.Subscriptions() < cfg.Subscribers {
				time.Sleep(time.Millisecond)
			}
			m.KillAll()
		}()
		_, err := Run(runCtx(t), cfg)
		require.Error(t, err)
		// The subscribers' streams end, and a publisher opened in the
		// meantime finds no broker: whichever comes first names itself.
		assert.Regexp(t, `bench: (subscriber|publisher) \d+ on 127\.0\.0\.1:\d+`, err.Error())
	})
}

func TestPreset(t *testing.T) {
	c, err := Preset("single")
	require.NoError(t, err)
	assert.Equal(t, workload.SingleConstraint(), c)
	c, err = Preset("default")
	require.NoError(t, err)
	assert.Equal(t, workload.Default(), c)
	c, err = Preset("ranges")
	require.NoError(t, err)
	assert.Equal(t, workload.Ranges(), c)
	_, err = Preset("x")
	assert.ErrorContains(t, err, `unknown workload "x": want single, default or ranges`)
}

// A system that stops accepting messages is a measured outcome when the
// run asks for it: the blocked publishers are cut and counted, and what
// was sent before is reported.
func TestRunCutsStuckPublishers(t *testing.T) {
	m := startMesh(t, 1, benchtest.Fault{StallPublish: true})
	cfg := meshConfig(m)
	cfg.Publishers, cfg.Rate, cfg.Drain = 1, 2000, 200*time.Millisecond
	cfg.CutStuckPublishers = true
	rep, err := Run(runCtx(t), cfg)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), rep.Totals.PublishersCut)
	assert.Positive(t, rep.Totals.Sent)
	assert.Less(t, rep.Totals.Delivered, rep.Totals.Ideal, "the stalled broker delivered nothing it did not read")
}

// closeTimes is an Endpoint whose publishers record when they close (after
// send start) and whose subscribers receive nothing.
type closeTimes struct {
	start  func() time.Duration
	mu     sync.Mutex
	closed []time.Duration
}

func (c *closeTimes) Subscribe(context.Context, content.Predicate) (Subscriber, error) {
	return silentSub{}, nil
}
func (c *closeTimes) NewPublisher(context.Context) (Publisher, error) { return closeTimesPub{c}, nil }
func (c *closeTimes) Close() error                                    { return nil }

type silentSub struct{}

func (silentSub) Next(ctx context.Context) ([]byte, error) { <-ctx.Done(); return nil, ctx.Err() }
func (silentSub) Lost() uint64                             { return 0 }
func (silentSub) Close() error                             { return nil }

type closeTimesPub struct{ c *closeTimes }

func (closeTimesPub) Publish(content.Message, []byte) error { return nil }
func (p closeTimesPub) Close() (client.Summary, error) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	p.c.closed = append(p.c.closed, p.c.start())
	return client.Summary{}, nil
}

// TestPublishersCloseWhenSendingEnds: a publisher whose schedule ends early
// (here the three send every 0.5 s from 0, 1/6 and 1/3 s of a 1.2-s run, so
// their last messages go at 1.0, 1.17 and 0.83 s) keeps its stream open
// until sending ends for all, so that the mesh's subscriptions (its
// congestion feedback) do not change while the others still send.
func TestPublishersCloseWhenSendingEnds(t *testing.T) {
	var sendStart time.Time
	ep := &closeTimes{start: func() time.Duration { return time.Since(sendStart) }}
	cfg := smallConfig([]string{"fake"})
	cfg.Subscribers, cfg.Publishers, cfg.Mode, cfg.Rate = 1, 3, Constant, 6
	cfg.Duration, cfg.Drain = 1200*time.Millisecond, 50*time.Millisecond
	cfg.Connect = func(context.Context, string) (Endpoint, error) { return ep, nil }
	cfg.OnSendStart = func() { sendStart = time.Now() }
	rep, err := Run(runCtx(t), cfg)
	require.NoError(t, err)
	assert.Equal(t, uint64(8), rep.Totals.Sent, "3, 3 and 2 messages")
	require.Len(t, ep.closed, 3)
	for i, at := range ep.closed {
		assert.GreaterOrEqual(t, at, cfg.Duration, "publisher %d closed before sending ended", i)
	}
}

// The bench runs through brokers failing and draining: clients fail over,
// the report counts gaps and failovers, and a graceful stop loses nothing.
// The mesh and the bench run in virtual time (synctest), so the drain's
// timers measure the mesh's work, not the machine's load.
func TestRunThroughChurn(t *testing.T) {
	for _, graceful := range []bool{false, true} {
		t.Run(map[bool]string{false: "kill and restart", true: "graceful stop"}[graceful], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runThroughChurn(t, graceful) })
		})
	}
}

func runThroughChurn(t *testing.T, graceful bool) {
	mesh := startMesh(t, 3, benchtest.Fault{}, brokertest.InMemory())
	cfg := meshConfig(mesh)
	cfg.ClientOptions = append(cfg.ClientOptions, client.WithDialOptions(mesh.DialOption()))
	cfg.Duration, cfg.Rate, cfg.FailoverWait = 2*time.Second, 300, 5*time.Second
	cfg.OnSendStart = func() {
		go func() {
			time.Sleep(600 * time.Millisecond)
			if graceful {
				mesh.Stop(1)
				return
			}
			mesh.Kill(1)
			time.Sleep(400 * time.Millisecond)
			mesh.Restart(1)
		}()
	}
	rep, err := Run(runCtx(t), cfg)
	require.NoError(t, err)
	tot := rep.Totals
	assert.True(t, rep.Exact(), "no duplicate and no false positive through the churn")
	assert.Positive(t, tot.Failovers, "the publisher at broker 1 moved")
	require.Len(t, rep.FailoverEvents, int(tot.Failovers), "each failover is listed")
	for _, f := range rep.FailoverEvents {
		assert.InDelta(t, 0.6, f.AtS, 1.5, "failover %+v after the fault at 0.6 s", f)
		assert.NotEqual(t, f.From, f.To)
	}
	if graceful {
		assert.Zero(t, tot.Undelivered, "a graceful stop loses nothing")
		assert.Zero(t, tot.Gaps, "subscriptions moved before their broker left")
		assert.Zero(t, tot.InFlightLost)
	} else {
		// In virtual time a subscription moves in no time at all, so a gap
		// may last 0 ms: counted and listed all the same.
		assert.Positive(t, tot.Gaps, "subscribers at broker 1 subscribed again")
		var gaps uint64
		for _, s := range rep.Series {
			gaps += s.Gaps
		}
		assert.Equal(t, tot.Gaps, gaps, "every gap falls in a second of the series")
		require.Len(t, rep.GapEvents, int(tot.Gaps), "each gap is listed")
		for _, g := range rep.GapEvents {
			assert.GreaterOrEqual(t, g.StartS, 0.5, "gap %+v starts at the kill (0.6 s)", g)
			assert.GreaterOrEqual(t, g.EndS, g.StartS)
			assert.LessOrEqual(t, (g.EndS-g.StartS)*1000, tot.MaxGapMs+0.001)
			assert.NotEqual(t, g.From, g.To, "the subscription moved to another broker")
		}
	}
	t.Logf("undelivered %d of %d, gaps %d (longest %.0f ms), failovers %d, resent %d, in flight %d, client-suppressed copies %d",
		tot.Undelivered, tot.Ideal, tot.Gaps, tot.MaxGapMs, tot.Failovers, tot.Resent, tot.InFlightLost, tot.ClientSuppressed)
}

// TestSeriesCoversALateDrain: a delivery at any time the run can still
// take one — sending stretched to the watchdog's Duration + Drain, then a
// whole Drain and Settle — has its own second in the series, rather than
// piling into the last one inside the sending time.
func TestSeriesCoversALateDrain(t *testing.T) {
	cfg := smallConfig([]string{"a"})
	cfg.Duration, cfg.Drain, cfg.Settle = 60*time.Second, 20*time.Second, 2*time.Second
	r := newRunner(cfg, nil)
	latest := cfg.Duration + 2*cfg.Drain + cfg.Settle - time.Millisecond
	assert.Equal(t, int(latest/time.Second), r.second(latest))
	assert.Equal(t, 61, r.second(61*time.Second), "after Duration, inside the series")
}
