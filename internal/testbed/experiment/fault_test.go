package experiment

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/testbed/systems"
	"github.com/dripmesh/drip/internal/topology"
)

func TestParseFault(t *testing.T) {
	tests := []struct {
		in      string
		want    Fault
		wantErr string
	}{
		{in: "cut:s0/s1@20s+10s", want: Fault{Kind: FaultCut, Sites: []string{"s0", "s1"}, At: 20 * time.Second, For: 10 * time.Second}},
		{in: "restart:s5@0s+500ms", want: Fault{Kind: FaultRestart, Sites: []string{"s5"}, At: 0, For: 500 * time.Millisecond}},
		{in: "s0/s1@20s+10s", wantErr: "want cut:A/B@AT+FOR"},
		{in: "crash:s0@20s+10s", wantErr: `kind "crash"`},
		{in: "cut:s0/s1", wantErr: "no @AT+FOR"},
		{in: "cut:s0/s1@20s", wantErr: "no +FOR"},
		{in: "cut:s0/s1@-1s+10s", wantErr: "want a duration ≥ 0"},
		{in: "cut:s0/s1@soon+10s", wantErr: "want a duration ≥ 0"},
		{in: "cut:s0/s1@20s+0s", wantErr: "want a positive duration"},
		{in: "cut:s0@20s+10s", wantErr: "two sites"},
		{in: "cut:s0/s0@20s+10s", wantErr: "two sites"},
		{in: "cut:/s1@20s+10s", wantErr: "two sites"},
		{in: "restart:s0/s1@20s+10s", wantErr: "one site"},
		{in: "restart:@20s+10s", wantErr: "one site"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			f, err := ParseFault(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, f)
			assert.Equal(t, f, must(ParseFault(f.String())), "String reads back")
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestFaultCheck: a fault names sites of the scenario, a cut a link of it.
func TestFaultCheck(t *testing.T) {
	topo := &topology.Topology{
		Brokers: []topology.Broker{{Name: "s0"}, {Name: "s1"}, {Name: "s2"}},
		Links:   []topology.Link{{A: "s0", B: "s1"}, {A: "s1", B: "s2"}},
	}
	assert.NoError(t, Fault{Kind: FaultCut, Sites: []string{"s0", "s1"}}.check(topo))
	assert.NoError(t, Fault{Kind: FaultCut, Sites: []string{"s2", "s1"}}.check(topo))
	assert.ErrorContains(t, Fault{Kind: FaultCut, Sites: []string{"s0", "s2"}}.check(topo), "no link between s0 and s2")
	assert.ErrorContains(t, Fault{Kind: FaultCut, Sites: []string{"s0", "s9"}}.check(topo), `no site "s9"`)
	assert.ErrorContains(t, Fault{Kind: FaultRestart, Sites: []string{"nowhere"}}.check(topo), `no site "nowhere"`)
	assert.NoError(t, Fault{Kind: FaultRestart, Sites: []string{"s2"}}.check(topo))
}

// fakeMesh records what the injector does to links and brokers, in order.
type fakeMesh struct {
	mu    sync.Mutex
	calls []string
	// failHeal makes Heal fail.
	failHeal bool
}

func (m *fakeMesh) record(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, fmt.Sprintf(format, args...))
}

func (m *fakeMesh) Cut(_ context.Context, a, b string) error { m.record("cut %s %s", a, b); return nil }
func (m *fakeMesh) Heal(ctx context.Context, a, b string) error {
	m.record("heal %s %s (ctx %v)", a, b, ctx.Err())
	if m.failHeal {
		return fmt.Errorf("daemon gone")
	}
	return nil
}
func (m *fakeMesh) Kill(site string) error { m.record("kill %s", site); return nil }
func (m *fakeMesh) Restart(ctx context.Context, site string) error {
	m.record("restart %s (ctx %v)", site, ctx.Err())
	return nil
}
func (m *fakeMesh) Ready(context.Context) error { m.record("ready"); return nil }
func (m *fakeMesh) Info() systems.Info          { return systems.Info{} }
func (m *fakeMesh) Connect(context.Context, string) (bench.Endpoint, error) {
	return nil, fmt.Errorf("no clients here")
}
func (m *fakeMesh) Links() systems.LinkCounter { return nil }
func (m *fakeMesh) Close() error               { return nil }

// notRestartable is a deployment without Kill and Restart.
type notRestartable struct{ systems.Deployment }

func TestFaultInjector(t *testing.T) {
	quiet := func(string, ...any) {}
	t.Run("in order of time, each undone, then routing settles", func(t *testing.T) {
		m := &fakeMesh{}
		faults := []Fault{
			{Kind: FaultRestart, Sites: []string{"s3"}, At: 30 * time.Millisecond, For: 10 * time.Millisecond},
			{Kind: FaultCut, Sites: []string{"s0", "s1"}, At: 0, For: 10 * time.Millisecond},
		}
		t0 := time.Now()
		fi := startFaults(context.Background(), faults, m, m, t0, quiet)
		require.Eventually(t, func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			return len(m.calls) == 6
		}, 10*time.Second, time.Millisecond)
		recs := fi.wait()
		assert.Equal(t, []string{"cut s0 s1", "heal s0 s1 (ctx <nil>)", "ready", "kill s3", "restart s3 (ctx <nil>)", "ready"}, m.calls)
		require.Len(t, recs, 2)
		for i, want := range []string{"cut:s0/s1@0s+10ms", "restart:s3@30ms+10ms"} {
			r := recs[i]
			assert.Equal(t, want, r.Fault)
			assert.Empty(t, r.Error)
			assert.GreaterOrEqual(t, r.AtS, faults[1-i].At.Seconds(), "not before its time")
			assert.GreaterOrEqual(t, r.EndS-r.AtS, faults[1-i].For.Seconds(), "undone no earlier than FOR after")
			assert.False(t, r.End.IsZero())
		}
		assert.GreaterOrEqual(t, recs[1].AtS, recs[0].EndS, "one after the other")
	})
	t.Run("sending ends: the cut is healed all the same, later faults are not injected", func(t *testing.T) {
		m := &fakeMesh{}
		faults := []Fault{
			{Kind: FaultCut, Sites: []string{"s0", "s1"}, At: 0, For: time.Hour},
			{Kind: FaultRestart, Sites: []string{"s3"}, At: time.Hour, For: time.Second},
		}
		fi := startFaults(context.Background(), faults, m, m, time.Now(), quiet)
		require.Eventually(t, func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			return len(m.calls) == 1
		}, 10*time.Second, time.Millisecond)
		recs := fi.wait()
		require.Len(t, recs, 2)
		assert.Equal(t, "cut s0 s1", m.calls[0])
		assert.Equal(t, "heal s0 s1 (ctx <nil>)", m.calls[1], "healed with a live context")
		assert.Contains(t, recs[0].Error, "routing did not settle", "sending ended before it could")
		assert.Equal(t, "not injected: sending ended first", recs[1].Error)
		assert.NotContains(t, m.calls, "kill s3")
	})
	t.Run("what cannot be done is recorded, not done", func(t *testing.T) {
		m := &fakeMesh{failHeal: true}
		faults := []Fault{
			{Kind: FaultCut, Sites: []string{"s0", "s1"}, At: 0, For: time.Millisecond},
			{Kind: FaultRestart, Sites: []string{"s3"}, At: 0, For: time.Millisecond},
		}
		fi := startFaults(context.Background(), faults, nil, notRestartable{m}, time.Now(), quiet)
		require.Eventually(t, func() bool { return len(fi.peek()) == 2 }, 10*time.Second, time.Millisecond)
		recs := fi.wait()
		assert.Equal(t, "a link cut needs a lab (--lab)", recs[0].Error)
		assert.Equal(t, "this system's brokers cannot be restarted", recs[1].Error)
		assert.Empty(t, m.calls)

		fi = startFaults(context.Background(), faults[:1], m, m, time.Now(), quiet)
		require.Eventually(t, func() bool { return len(fi.peek()) == 1 }, 10*time.Second, time.Millisecond)
		assert.Equal(t, "undoing: daemon gone", fi.wait()[0].Error)
	})
}
