package stomp

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeServer is an in-memory STOMP 1.2 broker: every SEND goes to every
// subscription of its destination on every connection, with the SEND's
// headers. A subscription whose selector is "reject" is refused with an
// ERROR, as a broker refuses a selector it cannot parse.
type fakeServer struct {
	mu     sync.Mutex
	conns  []*fakeConn
	frames []*Frame // every frame received, in order
	wg     sync.WaitGroup
	// version the CONNECTED frame announces
	version string
}

type fakeConn struct {
	nc   net.Conn
	wmu  sync.Mutex
	subs map[string]string // id → destination
}

func (s *fakeServer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	c := &fakeConn{nc: server, subs: map[string]string{}}
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.serve(c)
	}()
	return client, nil
}

func (c *fakeConn) send(f *Frame) {
	b, err := AppendFrame(nil, f)
	if err != nil {
		panic(err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, _ = c.nc.Write(b)
}

func (s *fakeServer) serve(c *fakeConn) {
	defer c.nc.Close()
	r := NewReader(c.nc, DefaultLimits())
	n := 0
	for {
		f, err := r.ReadFrame()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.frames = append(s.frames, f)
		s.mu.Unlock()
		receipt := func() {
			if id, ok := f.Get("receipt"); ok {
				c.send(&Frame{Command: CmdReceipt, Headers: []Header{{"receipt-id", id}}})
			}
		}
		switch f.Command {
		case CmdConnect:
			v := s.version
			if v == "" {
				v = "1.2"
			}
			c.send(&Frame{Command: CmdConnected, Headers: []Header{{"version", v}, {"server", "fake/1"}}})
		case CmdSubscribe:
			if sel, _ := f.Get("selector"); sel == "reject" {
				id, _ := f.Get("receipt")
				c.send(&Frame{Command: CmdError, Headers: []Header{{"message", "invalid selector"}, {"receipt-id", id}}, Body: []byte("reject: no")})
				continue
			}
			id, _ := f.Get("id")
			dest, _ := f.Get("destination")
			s.mu.Lock()
			c.subs[id] = dest
			s.mu.Unlock()
			receipt()
		case CmdUnsubscribe:
			id, _ := f.Get("id")
			s.mu.Lock()
			delete(c.subs, id)
			s.mu.Unlock()
		case CmdSend:
			dest, _ := f.Get("destination")
			n++
			s.mu.Lock()
			type target struct {
				c  *fakeConn
				id string
			}
			var targets []target
			for _, o := range s.conns {
				for id, d := range o.subs {
					if d == dest {
						targets = append(targets, target{o, id})
					}
				}
			}
			s.mu.Unlock()
			for _, tg := range targets {
				m := &Frame{Command: CmdMessage, Body: f.Body, Headers: []Header{
					{"subscription", tg.id}, {"message-id", "ID:fake:" + strconv.Itoa(n)},
				}}
				m.Headers = append(m.Headers, f.Headers...)
				tg.c.send(m)
			}
			receipt()
		case CmdDisconnect:
			receipt()
			return
		case "BOOM":
			c.send(&Frame{Command: CmdError, Headers: []Header{{"message", "boom"}}})
			return
		}
	}
}

func (s *fakeServer) received(command string) []*Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Frame
	for _, f := range s.frames {
		if f.Command == command {
			out = append(out, f)
		}
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dialFake(t *testing.T, s *fakeServer) *Conn {
	t.Helper()
	c, err := Dial(ctxT(t), "fake:61613", Options{Dial: s.dial})
	require.NoError(t, err)
	return c
}

func TestPublishSubscribe(t *testing.T) {
	srv := &fakeServer{}
	defer srv.wg.Wait()
	sub := dialFake(t, srv)
	defer sub.Close()
	assert.Equal(t, "fake/1", sub.Server())
	s1, err := sub.Subscribe(ctxT(t), "/topic/t", Header{"selector", "a = 'x:y'"})
	require.NoError(t, err)
	s2, err := sub.Subscribe(ctxT(t), "/topic/other")
	require.NoError(t, err)
	assert.NotEqual(t, s1.ID(), s2.ID())

	pub := dialFake(t, srv)
	body := []byte{0, 1, 2, 0, 255}
	headers := []Header{{"a", "x:y"}, {"weird\nname", `back\slash`}}
	for range 3 {
		require.NoError(t, pub.Send("/topic/t", headers, body))
	}
	require.NoError(t, pub.Disconnect(ctxT(t)))
	for range 3 {
		m, err := s1.Next(ctxT(t))
		require.NoError(t, err)
		assert.Equal(t, body, m.Body)
		v, _ := m.Get("a")
		assert.Equal(t, "x:y", v)
		v, _ = m.Get("weird\nname")
		assert.Equal(t, `back\slash`, v, "escaped on the wire, decoded on arrival")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = s2.Next(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "nothing was sent to /topic/other")

	subs := srv.received(CmdSubscribe)
	require.Len(t, subs, 2)
	sel, _ := subs[0].Get("selector")
	assert.Equal(t, "a = 'x:y'", sel)
	ack, _ := subs[0].Get("ack")
	assert.Equal(t, "auto", ack)
	connect := srv.received(CmdConnect)[0]
	hb, _ := connect.Get("heart-beat")
	assert.Equal(t, "0,0", hb, "heart-beats off")
	v, _ := connect.Get("accept-version")
	assert.Equal(t, "1.2", v)
	send := srv.received(CmdSend)[0]
	cl, _ := send.Get("content-length")
	assert.Equal(t, "5", cl)

	require.NoError(t, s1.Unsubscribe())
	_, err = s1.Next(ctxT(t))
	assert.ErrorIs(t, err, ErrClosed)
	require.NoError(t, sub.Disconnect(ctxT(t)))
	assert.ErrorIs(t, pub.Send("/topic/t", nil, nil), ErrClosed)
}

func TestSubscribeRejected(t *testing.T) {
	srv := &fakeServer{}
	defer srv.wg.Wait()
	c := dialFake(t, srv)
	defer c.Close()
	_, err := c.Subscribe(ctxT(t), "/topic/t", Header{"selector", "reject"})
	var se *ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "invalid selector", se.Message)
	assert.Equal(t, "stomp: server error: invalid selector: reject: no", err.Error())
	_, err = c.Subscribe(ctxT(t), "/topic/t")
	require.NoError(t, err, "an ERROR answering a receipt leaves the connection usable")
}

func TestServerErrorEndsConnection(t *testing.T) {
	srv := &fakeServer{}
	defer srv.wg.Wait()
	c := dialFake(t, srv)
	defer c.Close()
	s, err := c.Subscribe(ctxT(t), "/topic/t")
	require.NoError(t, err)
	require.NoError(t, c.write(&Frame{Command: "BOOM"}, true))
	_, err = s.Next(ctxT(t))
	var se *ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "boom", se.Message)
	assert.ErrorAs(t, c.Send("/topic/t", nil, nil), &se)
}

func TestHandshakeErrors(t *testing.T) {
	srv := &fakeServer{version: "1.0"}
	_, err := Dial(ctxT(t), "fake:1", Options{Dial: srv.dial})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `server speaks STOMP "1.0", want 1.2`)

	_, err = Dial(ctxT(t), "fake:2", Options{Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("refused")
	}})
	assert.EqualError(t, err, "stomp: dialling fake:2: refused")

	// A server that never answers: the context bounds the handshake.
	client, server := net.Pipe()
	defer server.Close()
	go func() { _, _ = server.Read(make([]byte, 1024)) }()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = NewConn(ctx, client, Options{})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	client.Close()
	srv.wg.Wait()
}

// A subscriber that stops reading makes the connection stop reading,
// which is how a broker's flow control learns to hold back.
func TestBackpressure(t *testing.T) {
	srv := &fakeServer{}
	defer srv.wg.Wait()
	c, err := Dial(ctxT(t), "fake", Options{Dial: srv.dial, Buffer: 2})
	require.NoError(t, err)
	defer c.Close()
	s, err := c.Subscribe(ctxT(t), "/topic/t")
	require.NoError(t, err)
	pub := dialFake(t, srv)
	defer pub.Close()
	const n = 50
	go func() {
		for i := range n {
			_ = pub.Send("/topic/t", []Header{{"i", strconv.Itoa(i)}}, nil)
		}
	}()
	for i := range n {
		m, err := s.Next(ctxT(t))
		require.NoError(t, err)
		v, _ := m.Get("i")
		require.Equal(t, strconv.Itoa(i), v, "in order, none lost")
	}
}
