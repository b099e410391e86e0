package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/topology"
)

// The tests in this file build real labs: namespaces, TUN devices and a
// daemon process (the test binary itself, see TestMain). They need root.

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, TUN devices and /run/drip-lab state")
	}
}

var labSeq atomic.Int32

// upTestLab starts a lab with a name unique to this test process and
// removes it when the test ends, checking that nothing is left.
func upTestLab(t *testing.T, tp *topology.Topology) *Lab {
	t.Helper()
	name := fmt.Sprintf("t%x-%d", os.Getpid(), labSeq.Add(1))
	t.Cleanup(func() {
		require.NoError(t, Down(context.Background(), name))
		assertNoLeftovers(t, name)
	})
	l, err := Up(context.Background(), UpOptions{
		Name: name, Topology: tp, Seed: 1,
		Executable: os.Args[0], Env: []string{testDaemonEnv + "=1"},
	})
	require.NoError(t, err)
	return l
}

func assertNoLeftovers(t *testing.T, name string) {
	t.Helper()
	nss, err := listNamespaces(namespacePrefixOf(name))
	require.NoError(t, err)
	assert.Empty(t, nss, "network namespaces of lab %s", name)
	_, err = os.Stat(StateDir(name))
	assert.True(t, errors.Is(err, os.ErrNotExist), "state directory of lab %s: %v", name, err)
}

func siteAddr(t *testing.T, l *Lab, site string, port int) string {
	t.Helper()
	s, err := l.Site(site)
	require.NoError(t, err)
	return net.JoinHostPort(s.Addr.String(), fmt.Sprint(port))
}

func median(xs []time.Duration) time.Duration {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// TestLabLine checks the emulation end to end on the seed's link
// parameters (Carzaniga09 §5.2.1: 1 MB/s links) over a 3-site line with
// 20 ms of one-way delay per link.
func TestLabLine(t *testing.T) {
	requireRoot(t)
	l := upTestLab(t, line3(t, 0))
	ctx := context.Background()

	t.Run("sites", func(t *testing.T) {
		sites := l.Sites()
		require.Len(t, sites, 3)
		for i, s := range sites {
			want, _ := PlanAddr(DefaultPrefix, i)
			assert.Equal(t, want, s.Addr)
			assert.Equal(t, NamespaceName(l.Name(), s.Name), s.Namespace)
		}
		// A process started in b1 sees b1's address in its routing table;
		// the host has none of the lab's.
		cmd := exec.Command("cat", "/proc/net/fib_trie")
		var out strings.Builder
		cmd.Stdout = &out
		require.NoError(t, l.Start("b1", cmd))
		require.NoError(t, cmd.Wait())
		assert.Contains(t, out.String(), sites[1].Addr.String())
		host, err := os.ReadFile("/proc/net/fib_trie")
		require.NoError(t, err)
		assert.NotContains(t, string(host), sites[1].Addr.String())
	})

	// An echo server in b2 for the round-trip and throughput probes.
	ln, err := l.Listen(ctx, "b2", "tcp", siteAddr(t, l, "b2", 5000))
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	dst := siteAddr(t, l, "b2", 5000)
	const wantRTT = 2 * 2 * 20 * time.Millisecond // two hops each way

	t.Run("rtt", func(t *testing.T) {
		var connects, pings []time.Duration
		for range 5 {
			start := time.Now()
			c, err := l.DialContext(ctx, "b0", "tcp", dst)
			require.NoError(t, err)
			connects = append(connects, time.Since(start))
			buf := []byte{1}
			for range 5 {
				start := time.Now()
				_, err := c.Write(buf)
				require.NoError(t, err)
				_, err = io.ReadFull(c, buf)
				require.NoError(t, err)
				pings = append(pings, time.Since(start))
			}
			require.NoError(t, c.Close())
		}
		connect, ping := median(connects), median(pings)
		t.Logf("TCP connect %v (ratio %.3f), ping-pong %v (ratio %.3f) for %v configured",
			connect, float64(connect)/float64(wantRTT), ping, float64(ping)/float64(wantRTT), wantRTT)
		// The emulator only adds delay, and a busy machine (tests run in
		// parallel) only adds more: the fastest sample is the emulator's
		// own, and must not beat the configured delay. How closely it
		// follows it is the link model's, checked exactly in virtual time
		// (TestLinkRateAndDelay, TestNetworkMultiHop); here the bound
		// above only tells the delay applied once from twice, which a
		// loaded machine cannot fake for the fastest of the samples
		// (1.3 was a bound on the machine's load as much as the lab's).
		for _, s := range []struct {
			name    string
			samples []time.Duration
		}{{"connect", connects}, {"ping-pong", pings}} {
			fastest := slices.Min(s.samples)
			ratio := float64(fastest) / float64(wantRTT)
			assert.GreaterOrEqual(t, ratio, 0.95, "%s: fastest %v beats the configured %v", s.name, fastest, wantRTT)
			assert.Less(t, ratio, 2.0, "%s: fastest %v of %d: the configured %v applied twice?", s.name, fastest, len(s.samples), wantRTT)
		}
	})

	t.Run("throughput", func(t *testing.T) {
		c, err := l.DialContext(ctx, "b0", "tcp", siteAddr(t, l, "b1", 5001))
		if err == nil {
			c.Close()
		}
		require.Error(t, err, "nothing listens on b1:5001")

		sink, err := l.Listen(ctx, "b2", "tcp", siteAddr(t, l, "b2", 5002))
		require.NoError(t, err)
		defer sink.Close()
		const warmup, measure = time.Second, 3 * time.Second
		var received atomic.Int64
		readerDone := make(chan struct{})
		go func() {
			defer close(readerDone)
			c, err := sink.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(warmup + measure + time.Second))
			buf := make([]byte, 64<<10)
			for {
				k, err := c.Read(buf)
				received.Add(int64(k))
				if err != nil {
					return
				}
			}
		}()
		src, err := l.DialContext(ctx, "b0", "tcp", siteAddr(t, l, "b2", 5002))
		require.NoError(t, err)
		defer src.Close()
		_ = src.SetWriteDeadline(time.Now().Add(warmup + measure + time.Second))
		go func() {
			buf := make([]byte, 64<<10)
			for {
				if _, err := src.Write(buf); err != nil {
					return
				}
			}
		}()
		type sample struct {
			bytes  int64
			at     time.Time
			status *Status
		}
		take := func() sample {
			st, err := l.Status(ctx)
			require.NoError(t, err)
			return sample{received.Load(), time.Now(), st}
		}
		time.Sleep(warmup)
		a := take()
		time.Sleep(measure)
		b := take()
		goodput := float64(b.bytes-a.bytes) / b.at.Sub(a.at).Seconds()
		ab1, _ := a.status.Link("b0", "b1")
		ab2, _ := b.status.Link("b0", "b1")
		wire := float64(ab2.Sent-ab1.Sent) / (b.status.Uptime - a.status.Uptime).Seconds()
		t.Logf("bulk TCP b0→b2: goodput %.0f B/s (ratio %.3f), b0→b1 wire rate %.0f B/s (ratio %.3f), queue drops %d",
			goodput, goodput/1e6, wire, wire/1e6, ab2.Queue)
		// The link never carries more than its rate (5%: the two status
		// reads are not taken at the instants the uptimes say). How much
		// less a userspace pacer carries depends on how often the machine
		// runs it, so below the rate the bound only tells a working link
		// from a broken one; the rate itself is the link model's, checked
		// exactly in virtual time (TestLinkRateAndDelay).
		assert.LessOrEqual(t, goodput/1e6, 1.05, "goodput above the link's rate")
		assert.LessOrEqual(t, wire/1e6, 1.05, "the link runs above its rate")
		assert.Greater(t, goodput/1e6, 0.5, "bulk TCP across the link")
		assert.Greater(t, wire/1e6, 0.5, "the link runs at a fraction of its rate")

		// Stop the transfer for good (a reset discards the send buffer)
		// and let the links drain, so later probes see only their traffic.
		require.NoError(t, src.(*net.TCPConn).SetLinger(0))
		require.NoError(t, src.Close())
		<-readerDone
		require.Eventually(t, func() bool {
			st, err := l.Status(ctx)
			return err == nil && st.InFlight == 0
		}, 3*time.Second, 20*time.Millisecond)
	})

	t.Run("loss", func(t *testing.T) {
		loss := 0.05
		require.NoError(t, l.Set(ctx, "b0", "b1", Change{Loss: &loss}))
		defer func() {
			none := 0.0
			require.NoError(t, l.Set(ctx, "b0", "b1", Change{Loss: &none}))
		}()
		before, err := l.Status(ctx)
		require.NoError(t, err)
		got := udpProbe(t, l, "b0", "b1", 1000)
		after, err := l.Status(ctx)
		require.NoError(t, err)
		l0, _ := before.Link("b0", "b1")
		l1, _ := after.Link("b0", "b1")
		lost := 1 - float64(got)/1000
		t.Logf("UDP b0→b1 at 5%% loss: %d of 1000 arrived (loss %.3f); the link counted %d losses", got, lost, l1.Loss-l0.Loss)
		// Binomial(1000, 0.05): standard deviation 0.7%.
		assert.InDelta(t, 0.05, lost, 0.03)
		assert.InDelta(t, 1000-got, l1.Loss-l0.Loss, 3, "losses are counted")
	})

	t.Run("cut and heal", func(t *testing.T) {
		require.NoError(t, l.Cut(ctx, "b1", "b2"))
		assert.Zero(t, udpProbe(t, l, "b0", "b2", 100), "traffic over a cut link stops")
		st, err := l.Status(ctx)
		require.NoError(t, err)
		bc, _ := st.Link("b1", "b2")
		assert.False(t, bc.Up)
		assert.GreaterOrEqual(t, bc.Cut, uint64(100))
		require.NoError(t, l.Heal(ctx, "b1", "b2"))
		assert.Equal(t, 100, udpProbe(t, l, "b0", "b2", 100), "and resumes when it heals")
	})

	t.Run("already up", func(t *testing.T) {
		_, err := Up(ctx, UpOptions{Name: l.Name(), Topology: line3(t, 0)})
		assert.ErrorContains(t, err, "already up")
	})
}

// udpProbe sends n datagrams of 100 bytes from one site to another, one
// per millisecond, and returns how many arrived.
func udpProbe(t *testing.T, l *Lab, from, to string, n int) int {
	t.Helper()
	ctx := context.Background()
	before, err := l.Status(ctx)
	require.NoError(t, err)
	addr := siteAddr(t, l, to, 6000)
	rx, err := l.ListenPacket(ctx, to, "udp", addr)
	require.NoError(t, err)
	defer rx.Close()
	// Room for every datagram in the socket: the default buffer holds
	// about 270 of these, and a receiver that a loaded machine did not
	// run for a few hundred milliseconds lost the rest there, outside
	// the lab (1000 sent, 37 lost on the link, 286 more in the socket).
	// SO_RCVBUFFORCE passes rmem_max; the test runs as root.
	raw, err := rx.(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	var sockErr error
	require.NoError(t, raw.Control(func(fd uintptr) {
		sockErr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 8<<20)
	}))
	require.NoError(t, sockErr)
	tx, err := l.DialContext(ctx, from, "udp", addr)
	require.NoError(t, err)
	defer tx.Close()
	got := make(chan int)
	settled := make(chan struct{})
	go func() {
		buf := make([]byte, 2048)
		count := 0
		for {
			_ = rx.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if _, _, err := rx.ReadFrom(buf); err != nil {
				select {
				case <-settled:
					got <- count
					return
				default:
					continue
				}
			}
			count++
		}
	}()
	msg := make([]byte, 100)
	for i := range n {
		_, err := tx.Write(msg)
		require.NoError(t, err, "datagram %d", i)
		time.Sleep(time.Millisecond)
	}
	// Count until the daemon has taken every datagram from the site and
	// nothing is left on the links: then whatever arrives has arrived. (A
	// spell of 300 ms without a datagram stood for that, and a loaded
	// machine that held the daemon up longer cut the count short: 430 of
	// 1000 counted, 26 lost on the link.)
	require.Eventually(t, func() bool {
		st, err := l.Status(ctx)
		return err == nil && offered(st, from)-offered(before, from) >= uint64(n) && st.InFlight == 0
	}, time.Minute, 10*time.Millisecond, "the lab took the %d datagrams from %s off its links", n, from)
	close(settled)
	return <-got
}

// offered counts the packets the links leaving site from were offered:
// each was accepted or dropped, for one reason.
func offered(st *Status, from string) uint64 {
	var n uint64
	for _, ls := range st.Links {
		if ls.From == from {
			n += ls.Packets + ls.Loss + ls.Queue + ls.Cut
		}
	}
	return n
}

// TestLabCrashCleanup kills a lab's daemon with SIGKILL and checks that
// Down still removes everything, including a process left in a site, while
// another lab with the same addresses keeps running.
func TestLabCrashCleanup(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	two, err := Generate(GenOptions{Shape: ShapeLine, N: 2})
	require.NoError(t, err)
	crash := upTestLab(t, two)
	other := upTestLab(t, two)
	assert.Equal(t, crash.Sites()[1].Addr, other.Sites()[1].Addr, "labs are isolated, so they can share addresses")

	sleeper := exec.Command("sleep", "30")
	require.NoError(t, crash.Start("b1", sleeper))
	waited := make(chan error, 1)
	go func() { waited <- sleeper.Wait() }()

	st, err := crash.Status(ctx)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(st.PID, syscall.SIGKILL))
	require.Eventually(t, func() bool { return !processAlive(st.PID) }, 5*time.Second, 10*time.Millisecond)
	_, err = crash.Status(ctx)
	require.Error(t, err, "the daemon is gone")
	nss, err := listNamespaces(namespacePrefixOf(crash.Name()))
	require.NoError(t, err)
	require.Len(t, nss, 2, "its namespaces are left over")

	require.NoError(t, Down(ctx, crash.Name()))
	assertNoLeftovers(t, crash.Name())
	select {
	case err := <-waited:
		assert.Error(t, err, "the process in the site was ended")
	case <-time.After(5 * time.Second):
		t.Fatal("the process in the site survived Down")
	}
	require.NoError(t, Down(ctx, crash.Name()), "Down is idempotent")

	// The other lab is untouched and still carries traffic.
	_, err = other.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, 20, udpProbe(t, other, "b0", "b1", 20))
}
