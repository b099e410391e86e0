package lab

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// startFakeDaemon runs a daemon's loop and control API without namespaces
// or TUNs, serving on a unix socket in a temporary directory.
func startFakeDaemon(t *testing.T) (*daemon, *Lab, []chan []byte) {
	t.Helper()
	tp := line3(t, 0)
	d, err := newDaemon("fake", tp, DefaultPrefix, NetworkOptions{}, zap.NewNop())
	require.NoError(t, err)
	addrs, err := Addresses(tp, DefaultPrefix)
	require.NoError(t, err)
	var delivered []chan []byte
	for i, b := range tp.Brokers {
		ch := make(chan []byte, 10)
		delivered = append(delivered, ch)
		d.addSite(Site{Name: b.Name, Index: i, Namespace: NamespaceName("fake", b.Name), Addr: addrs[i]}, chanWriter(ch))
	}
	sock := filepath.Join(t.TempDir(), socketFile)
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := &http.Server{Handler: d.handler(), ReadHeaderTimeout: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() {
		assert.NoError(t, d.loop(ctx))
		close(d.done)
		close(loopDone)
	}()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		cancel()
		<-loopDone
		_ = srv.Close()
	})
	return d, &Lab{name: "fake", prefix: DefaultPrefix, sites: d.sites, ctl: newControlClient(sock)}, delivered
}

type chanWriter chan []byte

func (c chanWriter) Write(p []byte) (int, error) {
	c <- p
	return len(p), nil
}

func TestControlAPI(t *testing.T) {
	d, l, delivered := startFakeDaemon(t)
	ctx := context.Background()

	// Packets from the sites' TUNs: one to b2, one outside the lab, one
	// that is not IPv4.
	sent := ipv4Packet("10.77.0.3", 10)
	d.in <- inPacket{site: 0, at: d.now(), data: sent}
	d.in <- inPacket{site: 0, data: ipv4Packet("10.99.0.1", 10)}
	d.in <- inPacket{site: 1, data: make([]byte, 40)}

	var s *Status
	require.Eventually(t, func() bool {
		var err error
		s, err = l.Status(ctx)
		require.NoError(t, err)
		return s.Unroutable["b1"] == 1
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "fake", s.Name)
	assert.Equal(t, "10.77.0.0/16", s.Prefix)
	assert.Len(t, s.Sites, 3)
	assert.Equal(t, map[string]uint64{"b0": 1, "b1": 1}, s.Unroutable)
	ab, ok := s.Link("b0", "b1")
	require.True(t, ok)
	assert.Equal(t, uint64(30), ab.Bytes, "the packet to b2 entered b0→b1")
	assert.Equal(t, 20*time.Millisecond, ab.Params.Delay)
	_, ok = s.Link("b0", "b2")
	assert.False(t, ok)
	select {
	case got := <-delivered[2]:
		assert.Equal(t, sent, got, "b2 receives the packet")
	case <-time.After(5 * time.Second):
		t.Fatal("the packet to b2 never arrived")
	}

	delay, loss := 50*time.Millisecond, 0.25
	require.NoError(t, l.Set(ctx, "b1", "b2", Change{Delay: &delay, Loss: &loss}))
	require.NoError(t, l.Cut(ctx, "b0", "b1"))
	s, err := l.Status(ctx)
	require.NoError(t, err)
	bc, _ := s.Link("b2", "b1")
	assert.Equal(t, delay, bc.Params.Delay)
	assert.InDelta(t, loss, bc.Params.Loss, 1e-12)
	ab, _ = s.Link("b1", "b0")
	assert.False(t, ab.Up)
	require.NoError(t, l.Heal(ctx, "b0", "b1"))
	s, err = l.Status(ctx)
	require.NoError(t, err)
	ab, _ = s.Link("b1", "b0")
	assert.True(t, ab.Up)

	assert.ErrorContains(t, l.Cut(ctx, "b0", "b2"), "no link between b0 and b2")
	assert.ErrorContains(t, l.Heal(ctx, "b0", "nowhere"), `no site "nowhere"`)
	bad := 1.5
	assert.ErrorContains(t, l.Set(ctx, "b0", "b1", Change{Loss: &bad}), "not in [0, 1]", "checked by the client")
	assert.ErrorContains(t, l.ctl.call(ctx, "POST", linkPath("b0", "b1", "set"), Change{Loss: &bad}, nil), "not in [0, 1]", "and by the daemon")
	assert.ErrorContains(t, l.ctl.call(ctx, "POST", pathLinks+"b0/b1/set", "not json", nil), "link change")
}

func TestMetrics(t *testing.T) {
	d, l, _ := startFakeDaemon(t)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(newCollector(d)))
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)

	require.NoError(t, l.Cut(context.Background(), "b1", "b2"))
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP drip_lab_link_up 1 while the link direction from → to carries packets, 0 while it is cut.
# TYPE drip_lab_link_up gauge
drip_lab_link_up{from="b0",lab="fake",to="b1"} 1
drip_lab_link_up{from="b1",lab="fake",to="b0"} 1
drip_lab_link_up{from="b1",lab="fake",to="b2"} 0
drip_lab_link_up{from="b2",lab="fake",to="b1"} 0
`), "drip_lab_link_up")
	assert.NoError(t, err)

	// The control socket serves the same metrics.
	req, err := http.NewRequest("GET", "http://lab"+pathMetrics, nil)
	require.NoError(t, err)
	resp, err := l.ctl.http.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
