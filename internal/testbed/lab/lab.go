package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netns"

	"github.com/dripmesh/drip/internal/topology"
)

// UpOptions describe a lab to start.
type UpOptions struct {
	// Name of the lab (default DefaultName).
	Name     string
	Topology *topology.Topology
	// Prefix numbers the sites (default DefaultPrefix).
	Prefix netip.Prefix
	// Seed drives the links' loss and jitter.
	Seed uint64
	// QueueTime sizes the link queues (default DefaultQueueTime).
	QueueTime time.Duration
	// MetricsAddr, when set, is a TCP address in the host's namespace
	// where the daemon serves Prometheus metrics besides the control
	// socket's /metrics.
	MetricsAddr string
	// Executable and Args start the daemon, with "--name", Name appended;
	// by default this executable with "lab", "daemon" (`driplab lab daemon`).
	// Tests point them at the test binary.
	Executable string
	Args       []string
	// Env is added to the daemon's environment.
	Env []string
	// Timeout bounds the wait for the lab to be ready (default 20 s).
	Timeout time.Duration
}

// Up starts a lab: it validates the topology, removes what a crashed lab
// of the same name left, starts the daemon detached (its own session, so
// it outlives the caller), and waits until every site exists and the
// control socket answers. On failure it removes whatever was created and
// returns the daemon log's tail with the error.
func Up(ctx context.Context, o UpOptions) (*Lab, error) {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if err := ValidateName(o.Name); err != nil {
		return nil, err
	}
	if o.Topology == nil {
		return nil, errors.New("lab up: no topology")
	}
	if !o.Prefix.IsValid() {
		o.Prefix = DefaultPrefix
	}
	if _, err := Addresses(o.Topology, o.Prefix); err != nil {
		return nil, err
	}
	if _, err := NewNetwork[struct{}](o.Topology, NetworkOptions{}); err != nil {
		return nil, err
	}
	if pid, ok := daemonPID(o.Name); ok {
		return nil, fmt.Errorf("lab %s is already up (daemon pid %d); run `driplab lab down %s` first", o.Name, pid, o.Name)
	}
	if err := Down(ctx, o.Name); err != nil {
		return nil, fmt.Errorf("remove the leftovers of lab %s: %w", o.Name, err)
	}
	l, err := start(ctx, o)
	if err != nil {
		if derr := Down(context.Background(), o.Name); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	return l, nil
}

func start(ctx context.Context, o UpOptions) (*Lab, error) {
	dir := StateDir(o.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	text, err := o.Topology.Marshal()
	if err != nil {
		return nil, err
	}
	cfg := daemonConfig{Topology: string(text), Prefix: o.Prefix.String(), Seed: o.Seed, QueueTime: o.QueueTime, MetricsAddr: o.MetricsAddr}
	if err := writeJSON(filepath.Join(dir, configFile), cfg); err != nil {
		return nil, err
	}
	exe, args := o.Executable, o.Args
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find the driplab executable to run the lab daemon: %w", err)
		}
		args = []string{"lab", "daemon"}
	}
	logf, err := os.OpenFile(filepath.Join(dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(exe, append(slices.Clone(args), "--name", o.Name)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), o.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the lab daemon: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	// Reap the daemon if it exits while this process lives, and learn
	// that it did.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("lab daemon exited (%v) before the lab was ready:\n%s", err, logTail(o.Name))
		case <-deadline.C:
			return nil, fmt.Errorf("lab %s not ready after %v:\n%s", o.Name, timeout, logTail(o.Name))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		l, err := Open(o.Name)
		if err != nil {
			continue
		}
		if _, err := l.Status(ctx); err == nil {
			return l, nil
		}
	}
}

// logTail is the end of a lab's daemon log, for error messages.
func logTail(name string) string {
	data, err := os.ReadFile(filepath.Join(StateDir(name), logFile))
	if err != nil {
		return "(no daemon log)"
	}
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(bytes.TrimSpace(data))
}

// daemonPID returns the pid of the named lab's daemon if it runs.
func daemonPID(name string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(StateDir(name), pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !processAlive(pid) || !isDaemonOf(pid, name) {
		return 0, false
	}
	return pid, true
}

// isDaemonOf checks pid's command line, so a pid file outliving its
// daemon never gets a recycled pid killed.
func isDaemonOf(pid int, name string) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	i := slices.Index(args, "--name")
	return i >= 0 && i+1 < len(args) && args[i+1] == name
}

// Down removes the named lab: it ends the processes in the lab's
// namespaces and the daemon (SIGTERM, then SIGKILL after a grace period),
// deletes the namespaces (and with them the devices in them) and the state
// directory. It finds namespaces by name prefix, so it also cleans up
// after a daemon that was killed, and does nothing for a lab that does
// not exist.
func Down(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	var errs []error
	nss, err := listNamespaces(namespacePrefixOf(name))
	if err != nil {
		errs = append(errs, err)
	}
	// The sites' processes go first, while the network still carries
	// their goodbyes.
	terminate(namespaceProcesses(nss))
	if pid, ok := daemonPID(name); ok {
		if err := stopProcess(ctx, pid); err != nil {
			errs = append(errs, fmt.Errorf("stop lab daemon %d: %w", pid, err))
		}
	}
	if err := removeNamespaces(nss); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(StateDir(name)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// DownAll removes every lab, running or left over.
func DownAll(ctx context.Context) error {
	names := map[string]bool{}
	if entries, err := os.ReadDir(RunDir); err == nil {
		for _, e := range entries {
			names[e.Name()] = true
		}
	}
	nss, err := listNamespaces(NamespacePrefix)
	if err != nil {
		return err
	}
	var (
		errs  []error
		stray []string
	)
	for _, ns := range nss {
		lab, _, ok := strings.Cut(strings.TrimPrefix(ns, NamespacePrefix), ".")
		if ok && ValidateName(lab) == nil {
			names[lab] = true
		} else {
			stray = append(stray, ns)
		}
	}
	for name := range names {
		if ValidateName(name) != nil {
			errs = append(errs, fmt.Errorf("%s: not a lab name; left alone", filepath.Join(RunDir, name)))
			continue
		}
		if err := Down(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	terminate(namespaceProcesses(stray))
	if err := removeNamespaces(stray); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Labs lists the labs that have state: running or left over.
func Labs() []string {
	entries, _ := os.ReadDir(RunDir)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

func stopProcess(ctx context.Context, pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	for _, step := range []struct {
		wait time.Duration
		then syscall.Signal
	}{{3 * time.Second, syscall.SIGKILL}, {2 * time.Second, 0}} {
		deadline := time.Now().Add(step.wait)
		for processAlive(pid) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		if !processAlive(pid) {
			return nil
		}
		if step.then != 0 {
			_ = syscall.Kill(pid, step.then)
		}
	}
	return fmt.Errorf("process %d still runs after SIGKILL", pid)
}

// Lab is a handle on a running lab.
type Lab struct {
	name   string
	prefix netip.Prefix
	sites  []Site
	ctl    *controlClient
}

// Open returns a handle on the named running lab.
func Open(name string) (*Lab, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	dir := StateDir(name)
	var t siteTable
	if err := readJSON(filepath.Join(dir, sitesFile), &t); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("lab %s is not up (no %s; start it with `driplab lab up`)", name, filepath.Join(dir, sitesFile))
		}
		return nil, err
	}
	prefix, err := netip.ParsePrefix(t.Prefix)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, sitesFile), err)
	}
	return &Lab{name: name, prefix: prefix, sites: t.Sites, ctl: newControlClient(filepath.Join(dir, socketFile))}, nil
}

// Name is the lab's name.
func (l *Lab) Name() string { return l.name }

// Prefix is the range the sites are numbered from.
func (l *Lab) Prefix() netip.Prefix { return l.prefix }

// Sites returns the sites in topology order.
func (l *Lab) Sites() []Site { return slices.Clone(l.sites) }

// Site returns the named site.
func (l *Lab) Site(name string) (Site, error) {
	for _, s := range l.sites {
		if s.Name == name {
			return s, nil
		}
	}
	return Site{}, fmt.Errorf("lab %s has no site %q", l.name, name)
}

// Status asks the daemon for counters and link state.
func (l *Lab) Status(ctx context.Context) (*Status, error) {
	var s Status
	if err := l.ctl.call(ctx, "GET", pathStatus, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Set changes both directions of the link between sites a and b.
func (l *Lab) Set(ctx context.Context, a, b string, c Change) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("link %s–%s: %w", a, b, err)
	}
	return l.ctl.call(ctx, "POST", linkPath(a, b, "set"), c, nil)
}

// Cut takes the link between a and b down in both directions.
func (l *Lab) Cut(ctx context.Context, a, b string) error {
	return l.ctl.call(ctx, "POST", linkPath(a, b, "cut"), nil, nil)
}

// Heal brings the link between a and b back up.
func (l *Lab) Heal(ctx context.Context, a, b string) error {
	return l.ctl.call(ctx, "POST", linkPath(a, b, "heal"), nil, nil)
}

// Down removes the lab; see Down.
func (l *Lab) Down(ctx context.Context) error { return Down(ctx, l.name) }

// Start starts cmd inside site's namespace (the child is forked from a
// thread switched into it). Wait for it as usual. Processes still in a
// site when the lab goes down are terminated.
func (l *Lab) Start(site string, cmd *exec.Cmd) error {
	s, err := l.Site(site)
	if err != nil {
		return err
	}
	return inNamespace(s.Namespace, cmd.Start)
}

// DialContext opens a connection from inside site's namespace, for
// example to a broker of another site (use it as a gRPC context dialer).
// Use IP addresses: a host name would be resolved outside the site.
func (l *Lab) DialContext(ctx context.Context, site, network, addr string) (net.Conn, error) {
	s, err := l.Site(site)
	if err != nil {
		return nil, err
	}
	var c net.Conn
	err = inNamespace(s.Namespace, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens on a stream address inside site's namespace.
func (l *Lab) Listen(ctx context.Context, site, network, addr string) (net.Listener, error) {
	s, err := l.Site(site)
	if err != nil {
		return nil, err
	}
	var ln net.Listener
	err = inNamespace(s.Namespace, func() error {
		var lc net.ListenConfig
		var err error
		ln, err = lc.Listen(ctx, network, addr)
		return err
	})
	return ln, err
}

// ListenPacket opens a datagram socket inside site's namespace.
func (l *Lab) ListenPacket(ctx context.Context, site, network, addr string) (net.PacketConn, error) {
	s, err := l.Site(site)
	if err != nil {
		return nil, err
	}
	var pc net.PacketConn
	err = inNamespace(s.Namespace, func() error {
		var lc net.ListenConfig
		var err error
		pc, err = lc.ListenPacket(ctx, network, addr)
		return err
	})
	return pc, err
}

// Exec replaces the calling process with argv run inside site's
// namespace, as `ip netns exec` does. It returns only on failure.
func (l *Lab) Exec(site string, argv []string) error {
	s, err := l.Site(site)
	if err != nil {
		return err
	}
	if len(argv) == 0 {
		return errors.New("no command to run")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	ns, err := netns.GetFromName(s.Namespace)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", s.Namespace, err)
	}
	defer ns.Close()
	// execve keeps the calling thread's namespace, so the thread must stay
	// in the site's until then.
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace %s: %w", s.Namespace, err)
	}
	err = syscall.Exec(path, argv, os.Environ())
	if rerr := netns.Set(orig); rerr == nil {
		runtime.UnlockOSThread()
	}
	return fmt.Errorf("exec %s: %w", path, err)
}
