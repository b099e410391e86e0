package congestion

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"

	"github.com/dripmesh/drip/internal/testbed/systems"
)

// padding fills payloads with bytes no compressor can shrink.
type padding struct{ rng *rand.Rand }

func newPadding(seed uint64, stream int) padding {
	return padding{rand.New(rand.NewPCG(seed, uint64(stream)))}
}

func (p padding) fill(b []byte) {
	for i := 0; i < len(b); i += 8 {
		v := p.rng.Uint64()
		for j := i; j < min(i+8, len(b)); j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
}

// tcpFlow is Fig. 10's competing TCP flow: a bulk transfer from one site
// to another, as fast as TCP lets it, whose receiver counts the bytes.
type tcpFlow struct {
	bytes   atomic.Uint64
	mu      sync.Mutex
	cancel  context.CancelFunc
	closers []io.Closer
	wg      sync.WaitGroup
}

func (f *tcpFlow) started() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancel != nil
}

func (f *tcpFlow) received() uint64 { return f.bytes.Load() }

// start listens at site to, dials it from site from and sends until stop.
func (f *tcpFlow) start(ctx context.Context, place systems.Placement, from, to string) error {
	if place == nil {
		place = systems.Loopback{}
	}
	ln, err := place.Listen(ctx, to, "tcp", net.JoinHostPort(place.Host(to), "0"))
	if err != nil {
		return err
	}
	conn, err := place.DialContext(ctx, from, "tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		return err
	}
	in, err := ln.Accept()
	ln.Close()
	if err != nil {
		conn.Close()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	f.mu.Lock()
	f.cancel, f.closers = cancel, []io.Closer{conn, in}
	f.mu.Unlock()
	f.wg.Add(2)
	go func() {
		defer f.wg.Done()
		buf := make([]byte, 32<<10)
		newPadding(0, 0).fill(buf)
		for ctx.Err() == nil {
			if _, err := conn.Write(buf); err != nil {
				return
			}
		}
	}()
	go func() {
		defer f.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, err := in.Read(buf)
			f.bytes.Add(uint64(n))
			if err != nil {
				return
			}
		}
	}()
	context.AfterFunc(ctx, func() {
		for _, c := range f.closers {
			_ = c.Close()
		}
	})
	return nil
}

// stop ends the transfer and waits for its goroutines; stopping a flow
// that never started does nothing.
func (f *tcpFlow) stop() {
	f.mu.Lock()
	cancel := f.cancel
	f.mu.Unlock()
	if cancel != nil {
		cancel()
		f.wg.Wait()
	}
}
