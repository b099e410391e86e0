package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/dripmesh/drip/internal/topology"
)

// RunDaemon is the lab daemon of the named lab: it builds the sites that
// Up described in the lab's state directory (namespaces, TUN devices,
// addresses, routes), serves the control socket, and carries packets
// between the sites until ctx ends. It leaves the namespaces in place when
// it returns: Down removes them, after a clean exit or a crash alike.
func RunDaemon(ctx context.Context, name string, log *zap.Logger) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	dir := StateDir(name)
	var cfg daemonConfig
	if err := readJSON(filepath.Join(dir, configFile), &cfg); err != nil {
		return fmt.Errorf("lab %s: read the configuration `driplab lab up` writes: %w", name, err)
	}
	t, err := topology.Parse([]byte(cfg.Topology))
	if err != nil {
		return err
	}
	prefix, err := netip.ParsePrefix(cfg.Prefix)
	if err != nil {
		return fmt.Errorf("lab prefix: %w", err)
	}
	addrs, err := Addresses(t, prefix)
	if err != nil {
		return err
	}
	d, err := newDaemon(name, t, prefix, NetworkOptions{QueueTime: cfg.QueueTime, Seed: cfg.Seed}, log)
	if err != nil {
		return err
	}
	defer d.closeTUNs()
	for i, b := range t.Brokers {
		s := Site{Name: b.Name, Index: i, Namespace: NamespaceName(name, b.Name), Addr: addrs[i]}
		tun, err := createSite(s.Namespace, s.Addr, prefix)
		if err != nil {
			return fmt.Errorf("site %s: %w", s.Name, err)
		}
		d.addSite(s, tun)
		d.tuns = append(d.tuns, tun)
	}
	if err := writeJSON(filepath.Join(dir, sitesFile), siteTable{Name: name, Prefix: prefix.String(), Sites: d.sites}); err != nil {
		return err
	}

	sock := filepath.Join(dir, socketFile)
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	srv := &http.Server{Handler: d.handler(), ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	serve := func(ln net.Listener, what string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("serve "+what, zap.Error(err))
			}
		}()
	}
	serve(ln, "control socket")
	if cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			_ = srv.Close()
			wg.Wait()
			return fmt.Errorf("metrics address: %w", err)
		}
		serve(mln, "metrics")
	}
	for i, f := range d.tuns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.read(i, f)
		}()
	}
	log.Info("lab up", zap.String("lab", name), zap.Int("sites", len(d.sites)), zap.Int("links", len(t.Links)))
	err = d.loop(ctx)
	close(d.done)
	_ = srv.Close()
	d.closeTUNs()
	wg.Wait()
	log.Info("lab daemon stopped", zap.String("lab", name))
	return err
}

func newDaemon(name string, t *topology.Topology, prefix netip.Prefix, o NetworkOptions, log *zap.Logger) (*daemon, error) {
	model, err := NewNetwork[[]byte](t, o)
	if err != nil {
		return nil, err
	}
	return &daemon{
		name: name, log: log, start: time.Now(), net: model, prefix: prefix,
		byAddr:     map[netip.Addr]int{},
		in:         make(chan inPacket, 4096),
		ctrl:       make(chan func()),
		done:       make(chan struct{}),
		unroutable: make([]uint64, len(t.Brokers)),
	}, nil
}

func (d *daemon) addSite(s Site, w io.Writer) {
	d.sites = append(d.sites, s)
	d.byAddr[s.Addr] = s.Index
	d.out = append(d.out, w)
}

// daemon moves packets between site TUNs through the Network model. One
// goroutine (loop) owns the model and everything below it; readers and
// the control API reach it through channels.
type daemon struct {
	name   string
	log    *zap.Logger
	start  time.Time
	prefix netip.Prefix
	sites  []Site
	byAddr map[netip.Addr]int
	tuns   []*os.File
	out    []io.Writer // where packets for each site go: its TUN
	in     chan inPacket
	ctrl   chan func()
	done   chan struct{}

	// Owned by loop.
	net         *Network[[]byte]
	unroutable  []uint64 // per site: not IPv4, or not addressed to a site
	writeErrors uint64

	closeOnce sync.Once
}

type inPacket struct {
	site int
	at   time.Duration
	data []byte
}

func (d *daemon) now() time.Duration { return time.Since(d.start) }

func (d *daemon) closeTUNs() {
	d.closeOnce.Do(func() {
		for _, f := range d.tuns {
			_ = f.Close()
		}
	})
}

// read forwards the packets site writes into its TUN to the loop, stamped
// with the time they were read.
func (d *daemon) read(site int, f *os.File) {
	buf := make([]byte, maxTUNFrame)
	for {
		n, err := f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			d.log.Warn("read tun", zap.String("site", d.sites[site].Name), zap.Error(err))
			select {
			case <-d.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		pkt := make([]byte, n)
		copy(pkt, buf[:n])
		select {
		case d.in <- inPacket{site: site, at: d.now(), data: pkt}:
		case <-d.done:
			return
		}
	}
}

// loop owns the model: it injects packets, runs control requests, and
// writes packets out when the model releases them.
func (d *daemon) loop(ctx context.Context) error {
	timer, err := newHRTimer()
	if err != nil {
		return err
	}
	defer timer.Close()
	armed := time.Duration(-1) // the expiry the timer is set for; −1: none
	for {
		if at, ok := d.net.NextEvent(); ok && at != armed {
			if err := timer.Reset(at - d.now()); err != nil {
				return fmt.Errorf("timerfd: %w", err)
			}
			armed = at
		}
		select {
		case p := <-d.in:
			d.receive(p)
			// Take what else is waiting before releasing, so a burst
			// costs one pass.
			for more := true; more; {
				select {
				case p := <-d.in:
					d.receive(p)
				default:
					more = false
				}
			}
		case <-timer.C():
			armed = -1
		case f := <-d.ctrl:
			f()
		case <-ctx.Done():
			return nil
		}
		for _, out := range d.net.Advance(d.now()) {
			if _, err := d.out[out.Dst].Write(out.Payload); err != nil {
				if d.writeErrors++; d.writeErrors == 1 {
					d.log.Warn("write tun", zap.String("site", d.sites[out.Dst].Name), zap.Error(err))
				}
			}
		}
	}
}

func (d *daemon) receive(p inPacket) {
	dst, ok := ipv4Dst(p.data)
	var site int
	if ok {
		site, ok = d.byAddr[dst]
	}
	if !ok {
		d.unroutable[p.site]++
		return
	}
	d.net.Send(p.at, p.site, site, len(p.data), p.data)
}

// do runs f in the loop and waits for it.
func (d *daemon) do(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case d.ctrl <- func() { f(); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-d.done:
		return errors.New("lab daemon is stopping")
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// status snapshots the lab; it must run in the loop.
func (d *daemon) status() *Status {
	now := d.now()
	s := &Status{
		Name: d.name, Prefix: d.prefix.String(), PID: os.Getpid(), Uptime: now,
		Sites: d.sites, Links: d.net.Stats(now), InFlight: d.net.InFlight(),
		Unroutable: map[string]uint64{}, NoRoute: map[string]uint64{}, WriteErrors: d.writeErrors,
	}
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		s.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	noRoute := d.net.NoRoute()
	for i, site := range d.sites {
		if d.unroutable[i] > 0 {
			s.Unroutable[site.Name] = d.unroutable[i]
		}
		if noRoute[i] > 0 {
			s.NoRoute[site.Name] = noRoute[i]
		}
	}
	return s
}
