package systems

import (
	"context"
	"fmt"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// socketLinks counts a link's bytes from the kernel's TCP statistics of the
// connection that carries it, read with sock_diag (what `ss -ti` shows).
// Each link has its own listening port on its accepting side, so the
// accepted socket on that port is the link: its bytes received went
// From→To, the bytes it sent and had acknowledged went To→From. Payload
// bytes only, without TCP/IP headers, like drip's own counters. It works
// where the brokers' sockets are in this network namespace (loopback); the
// lab counts its emulated links itself.
type socketLinks struct {
	ports map[int]Direction // accepting port → the direction into it

	mu sync.Mutex
	// Counts of connections that have closed (a bridge that reconnected)
	// are kept in retired so that the totals never go back.
	last    map[uint32]sockCount // by socket inode
	retired map[Direction]uint64
}

type sockCount struct {
	dir      Direction
	in, back uint64
}

func newSocketLinks(ports map[int]Direction) *socketLinks {
	return &socketLinks{ports: ports, last: map[uint32]sockCount{}, retired: map[Direction]uint64{}}
}

func (s *socketLinks) LinkBytes(context.Context) (map[Direction]uint64, error) {
	now := map[uint32]sockCount{}
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		socks, err := netlink.SocketDiagTCPInfo(family)
		if err != nil {
			return nil, fmt.Errorf("reading TCP socket statistics (sock_diag): %w", err)
		}
		for _, sk := range socks {
			m, info := sk.InetDiagMsg, sk.TCPInfo
			if m == nil || info == nil || m.State != unix.BPF_TCP_ESTABLISHED {
				continue
			}
			dir, ok := s.ports[int(m.ID.SourcePort)]
			if !ok {
				continue
			}
			now[m.INode] = sockCount{dir: dir, in: info.Bytes_received, back: info.Bytes_acked}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ino, c := range s.last {
		if _, ok := now[ino]; !ok {
			s.retired[c.dir] += c.in
			s.retired[Direction{From: c.dir.To, To: c.dir.From}] += c.back
		}
	}
	s.last = now
	out := map[Direction]uint64{}
	for d, n := range s.retired {
		out[d] = n
	}
	for _, c := range now {
		out[c.dir] += c.in
		out[Direction{From: c.dir.To, To: c.dir.From}] += c.back
	}
	return out, nil
}
