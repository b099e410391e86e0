package transport

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(id uint32) *dripv1.Open {
	return &dripv1.Open{ProtocolVersion: ProtocolVersion, RouterId: id, RouterName: "b" + string(rune('0'+id)), Mesh: "test", BloomBits: 256, BloomHashes: 7}
}

func TestCompatible(t *testing.T) {
	mod := func(f func(o *dripv1.Open)) *dripv1.Open { o := open(2); f(o); return o }
	tests := []struct {
		name   string
		remote *dripv1.Open
		reason string
	}{
		{"ok", open(2), ""},
		{"no open", nil, "open"},
		{"version", mod(func(o *dripv1.Open) { o.ProtocolVersion = 9 }), "version"},
		{"mesh", mod(func(o *dripv1.Open) { o.Mesh = "other" }), "mesh"},
		{"bloom bits", mod(func(o *dripv1.Open) { o.BloomBits = 128 }), "bloom"},
		{"bloom hashes", mod(func(o *dripv1.Open) { o.BloomHashes = 3 }), "bloom"},
		{"bloom scheme", mod(func(o *dripv1.Open) { o.BloomScheme = "cat-v2" }), "bloom"},
		{"self", open(1), "self"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Compatible(open(1), tt.remote)
			if tt.reason == "" {
				require.NoError(t, err)
				return
			}
			reason, ok := IsIncompatible(err)
			require.True(t, ok, "%v", err)
			assert.Equal(t, tt.reason, reason)
		})
	}
}

// bundle is a bundle in its wire form, of n bytes.
func bundle(n int) []byte { return make([]byte, n) }

func TestQueueControlFirstAndBounded(t *testing.T) {
	q := NewQueue(250)
	b1, b2, b3 := bundle(90), bundle(90), bundle(90)
	require.True(t, q.PushBundle(b1))
	require.True(t, q.PushBundle(b2))
	assert.False(t, q.PushBundle(b3), "third bundle exceeds 250 bytes")
	q.PushControl(&dripv1.Control{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{Router: 1}}})

	f, ok := q.Next(nil, 100)
	require.True(t, ok)
	assert.Len(t, f.Control, 1, "control leaves with the first frame")
	assert.Len(t, f.Bundles, 1, "frame limit of 100 bytes fits one bundle")
	assert.Equal(t, len(b2), q.Bytes())

	f, ok = q.Next(nil, 1000)
	require.True(t, ok)
	assert.Empty(t, f.Control)
	assert.Len(t, f.Bundles, 1)
	assert.Zero(t, q.Bytes())
	assert.True(t, q.PushBundle(b3), "room again after draining")
}

// TestQueueSupersedesAdvertisements: a newer advertisement from an origin
// replaces a queued older one of the same kind and origin in place; other
// origins, other kinds, older versions and hellos queue as usual.
func TestQueueSupersedesAdvertisements(t *testing.T) {
	pred := func(origin uint32, seq uint64) *dripv1.Control {
		return &dripv1.Control{Msg: &dripv1.Control_PredicateAd{PredicateAd: &dripv1.PredicateAd{Origin: origin, Seq: seq}}}
	}
	lsa := func(origin uint32, seq uint64) *dripv1.Control {
		return &dripv1.Control{Msg: &dripv1.Control_Lsa{Lsa: &dripv1.Lsa{Origin: origin, Seq: seq}}}
	}
	hello := &dripv1.Control{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{Router: 1}}}
	q := NewQueue(1000)
	for _, c := range []*dripv1.Control{
		pred(1, 1), lsa(1, 1), hello, pred(2, 5),
		pred(1, 2), // replaces pred(1, 1) in place
		lsa(1, 3),  // replaces lsa(1, 1)
		pred(2, 4), // older than the queued pred(2, 5): queued, the receiver drops it
		hello,
		pred(1, 3),
	} {
		q.PushControl(c)
	}
	f, ok := q.Next(nil, 1000)
	require.True(t, ok)
	type key struct {
		kind   string
		origin uint32
		seq    uint64
	}
	var got []key
	for _, c := range f.Control {
		switch {
		case c.GetPredicateAd() != nil:
			got = append(got, key{"pred", c.GetPredicateAd().GetOrigin(), c.GetPredicateAd().GetSeq()})
		case c.GetLsa() != nil:
			got = append(got, key{"lsa", c.GetLsa().GetOrigin(), c.GetLsa().GetSeq()})
		default:
			got = append(got, key{"hello", 0, 0})
		}
	}
	assert.Equal(t, []key{{"pred", 1, 3}, {"lsa", 1, 3}, {"hello", 0, 0}, {"pred", 2, 5}, {"pred", 2, 4}, {"hello", 0, 0}}, got)
}

// TestQueueKeepsDeltaChains: a predicate advertisement sent as a delta
// needs the one before it, so a delta supersedes nothing; a whole one
// supersedes the chain, taking the place of its last link.
func TestQueueKeepsDeltaChains(t *testing.T) {
	pred := func(origin uint32, seq, base uint64) *dripv1.Control {
		return &dripv1.Control{Msg: &dripv1.Control_PredicateAd{PredicateAd: &dripv1.PredicateAd{Origin: origin, Seq: seq, DeltaBase: base}}}
	}
	hello := &dripv1.Control{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{Router: 1}}}
	type key struct {
		origin    uint32
		seq, base uint64
	}
	for _, tc := range []struct {
		name string
		push []*dripv1.Control
		want []key
	}{
		{"deltas queue behind their bases",
			[]*dripv1.Control{pred(1, 1, 0), pred(1, 2, 1), hello, pred(1, 3, 2)},
			[]key{{1, 1, 0}, {1, 2, 1}, {}, {1, 3, 2}}},
		{"a whole one replaces the chain where it ended",
			[]*dripv1.Control{pred(1, 1, 0), pred(2, 7, 0), pred(1, 2, 1), hello, pred(1, 3, 2), hello, pred(1, 4, 0)},
			[]key{{2, 7, 0}, {}, {1, 4, 0}, {}}},
		{"nothing goes behind a newer one",
			[]*dripv1.Control{pred(1, 5, 0), pred(1, 6, 5), pred(1, 1, 0)},
			[]key{{1, 5, 0}, {1, 6, 5}, {1, 1, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue(1000)
			for _, c := range tc.push {
				q.PushControl(c)
			}
			f, ok := q.Next(nil, 1000)
			require.True(t, ok)
			var got []key
			for _, c := range f.Control {
				p := c.GetPredicateAd()
				got = append(got, key{p.GetOrigin(), p.GetSeq(), p.GetDeltaBase()})
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestQueueOversizedBundleFitsEmptyQueue(t *testing.T) {
	q := NewQueue(10)
	b := bundle(100)
	assert.True(t, q.PushBundle(b))
	assert.False(t, q.PushBundle(b))
}

func TestQueueCloseDrainsThenStops(t *testing.T) {
	q := NewQueue(1000)
	b := bundle(10)
	require.True(t, q.PushBundle(b))
	assert.Equal(t, 1, q.Close())
	assert.False(t, q.PushBundle(b))
	_, ok := q.Next(nil, 1000)
	assert.True(t, ok)
	_, ok = q.Next(nil, 1000)
	assert.False(t, ok)
}

func TestQueueNextWakesAndStops(t *testing.T) {
	q := NewQueue(1000)
	got := make(chan Batch)
	go func() {
		f, _ := q.Next(nil, 1000)
		got <- f
	}()
	q.PushControl(&dripv1.Control{})
	select {
	case f := <-got:
		assert.Len(t, f.Control, 1)
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not wake on push")
	}
	done := make(chan struct{})
	close(done)
	_, ok := q.Next(done, 1000)
	assert.False(t, ok)
}

// exerciseLink checks a dialled link both ways and its closing.
func exerciseLink(t *testing.T, dial func() (Conn, error), accepted <-chan Conn) {
	t.Helper()
	c, err := dial()
	require.NoError(t, err)
	assert.Equal(t, uint32(2), c.Remote().RouterId)
	var s Conn
	select {
	case s = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no accepted link")
	}
	assert.Equal(t, uint32(1), s.Remote().RouterId)

	frame := func(control []*dripv1.Control, bundles ...[]byte) []byte {
		b, err := AppendFrame(nil, control, bundles)
		require.NoError(t, err)
		return b
	}
	sent := frame(nil, []byte{1, 2, 3})
	require.NoError(t, c.Send(sent))
	got, err := s.Recv()
	require.NoError(t, err)
	assert.Equal(t, sent, got, "a frame arrives byte for byte")
	sent = frame([]*dripv1.Control{{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{Router: 2}}}})
	require.NoError(t, s.Send(sent))
	got, err = c.Recv()
	require.NoError(t, err)
	assert.Equal(t, sent, got)

	c.Close(nil)
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("closing one end did not end the other")
	}
	_, err = s.Recv()
	assert.Error(t, err)
}

func TestMemNetwork(t *testing.T) {
	n := NewMemNetwork()
	accepted := make(chan Conn, 1)
	n.Listen("b2", open(2), func(c Conn) { accepted <- c; <-c.Done() })
	exerciseLink(t, func() (Conn, error) { return n.Dialer().Dial(context.Background(), "b2", open(1)) }, accepted)

	_, err := n.Dialer().Dial(context.Background(), "nowhere", open(1))
	assert.ErrorContains(t, err, "refused")
	bad := open(1)
	bad.Mesh = "other"
	_, err = n.Dialer().Dial(context.Background(), "b2", bad)
	reason, ok := IsIncompatible(err)
	assert.True(t, ok)
	assert.Equal(t, "refused", reason)
}

func TestMemNetworkCut(t *testing.T) {
	n := NewMemNetwork()
	n.Listen("b2", open(2), func(c Conn) { <-c.Done() })
	c, err := n.Dialer().Dial(context.Background(), "b2", open(1))
	require.NoError(t, err)
	n.Cut("b2")
	<-c.Done()
	assert.ErrorIs(t, c.Err(), ErrClosed)
}

func startGRPC(t *testing.T, local *dripv1.Open, handle Handler) (GRPCDialer, *PeerServer) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(PeerServerOptions()...)
	ps := NewPeerServer(local, handle)
	dripv1.RegisterPeerServer(srv, ps)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return GRPCDialer{Options: []grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}}, ps
}

func TestGRPCLink(t *testing.T) {
	accepted := make(chan Conn, 1)
	d, _ := startGRPC(t, open(2), func(c Conn) { accepted <- c; <-c.Done() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	exerciseLink(t, func() (Conn, error) { return d.Dial(ctx, "passthrough:///bufnet", open(1)) }, accepted)
}

func TestGRPCHandshakeRefused(t *testing.T) {
	rejected := make(chan error, 1)
	d, ps := startGRPC(t, open(2), func(c Conn) { t.Error("incompatible link accepted") })
	ps.Rejected = func(_ *dripv1.Open, err error) { rejected <- err }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o := open(1)
	o.ProtocolVersion = 99
	_, err := d.Dial(ctx, "passthrough:///bufnet", o)
	reason, ok := IsIncompatible(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "refused", reason)
	assert.ErrorContains(t, err, "protocol version 99")
	select {
	case err := <-rejected:
		r, _ := IsIncompatible(err)
		assert.Equal(t, "version", r)
	case <-time.After(5 * time.Second):
		t.Fatal("server did not report the rejection")
	}
}

// checkHalfClose: every frame sent before CloseSend arrives, then io.EOF.
func checkHalfClose(t *testing.T, c Conn, accepted <-chan Conn) {
	t.Helper()
	var s Conn
	select {
	case s = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no accepted link")
	}
	const n = 500
	go func() {
		for i := range n {
			b := make([]byte, 1024)
			binary.BigEndian.PutUint32(b, uint32(i))
			if c.Send(b) != nil {
				return
			}
		}
		_ = c.CloseSend()
	}()
	for i := range n {
		b, err := s.Recv()
		require.NoError(t, err, "frame %d", i)
		require.Len(t, b, 1024)
		require.Equal(t, uint32(i), binary.BigEndian.Uint32(b))
	}
	_, err := s.Recv()
	require.ErrorIs(t, err, io.EOF)
	s.Close(nil)
	c.Close(nil)
}

func TestMemHalfClose(t *testing.T) {
	n := NewMemNetwork()
	accepted := make(chan Conn, 1)
	n.Listen("b2", open(2), func(c Conn) { accepted <- c; <-c.Done() })
	c, err := n.Dialer().Dial(context.Background(), "b2", open(1))
	require.NoError(t, err)
	checkHalfClose(t, c, accepted)
}

func TestGRPCHalfClose(t *testing.T) {
	accepted := make(chan Conn, 1)
	d, _ := startGRPC(t, open(2), func(c Conn) { accepted <- c; <-c.Done() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.Dial(ctx, "passthrough:///bufnet", open(1))
	require.NoError(t, err)
	checkHalfClose(t, c, accepted)
}

// The server side half-closes too: the dialler reads everything, then EOF.
func TestGRPCServerHalfClose(t *testing.T) {
	accepted := make(chan Conn, 1)
	d, _ := startGRPC(t, open(2), func(c Conn) { accepted <- c; <-c.Done() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.Dial(ctx, "passthrough:///bufnet", open(1))
	require.NoError(t, err)
	var s Conn
	select {
	case s = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no accepted link")
	}
	// Swap roles: the accepted side sends and half-closes.
	back := make(chan Conn, 1)
	back <- c
	checkHalfClose(t, s, back)
}
