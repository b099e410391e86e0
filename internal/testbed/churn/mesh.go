package churn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/topology"
)

// killWait bounds the wait for a killed process group to be reaped.
const killWait = 5 * time.Second

// Mesh is one `drip broker` process per broker of a topology file, each
// restartable on the same addresses.
type Mesh struct {
	binary, dir, topoPath string
	env                   []string
	topo                  *topology.Topology
	log                   *zap.Logger

	mu     sync.Mutex
	procs  []*proc // the current incarnation of each broker; nil before the first start
	starts []int   // incarnations started per broker
	closed bool
}

// proc is one broker process, the leader of its own process group.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed once the process has been reaped
	err  error         // how it exited, valid after done
	exit time.Time     // when it was reaped, valid after done
}

// MeshConfig says what a Mesh runs.
type MeshConfig struct {
	Binary   string             // the drip binary: `Binary broker --topology FILE --name NAME`
	Env      []string           // added to the brokers' environment
	Dir      string             // topology file and the brokers' logs (NAME.INCARNATION.log)
	Topology *topology.Topology // with every broker's addresses
	Log      *zap.Logger
}

// NewMesh writes the topology file and starts every broker. On error
// every broker started is killed.
func NewMesh(ctx context.Context, cfg MeshConfig) (*Mesh, error) {
	b, err := cfg.Topology.Marshal()
	if err != nil {
		return nil, err
	}
	m := &Mesh{
		binary: cfg.Binary, env: cfg.Env, dir: cfg.Dir, topo: cfg.Topology, log: cfg.Log,
		topoPath: filepath.Join(cfg.Dir, "topology.yaml"),
		procs:    make([]*proc, len(cfg.Topology.Brokers)),
		starts:   make([]int, len(cfg.Topology.Brokers)),
	}
	if err := os.WriteFile(m.topoPath, b, 0o644); err != nil {
		return nil, fmt.Errorf("churn: writing the topology: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	for i := range cfg.Topology.Brokers {
		if err := m.Start(i); err != nil {
			return nil, err
		}
	}
	for i, br := range cfg.Topology.Brokers {
		if err := m.waitListening(ctx, i, br.Client); err != nil {
			return nil, err
		}
	}
	ok = true
	return m, nil
}

// TopologyPath is the topology file the brokers read.
func (m *Mesh) TopologyPath() string { return m.topoPath }

// Start starts broker i, which must not be running, on its addresses.
func (m *Mesh) Start(i int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name := m.topo.Brokers[i].Name
	if m.closed {
		return fmt.Errorf("churn: starting broker %s: the mesh is closed", name)
	}
	if p := m.procs[i]; p != nil && !p.exited() {
		return fmt.Errorf("churn: starting broker %s: it is still running (pid %d)", name, p.cmd.Process.Pid)
	}
	m.starts[i]++
	logPath := filepath.Join(m.dir, fmt.Sprintf("%s.%d.log", name, m.starts[i]))
	logf, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("churn: broker %s: %w", name, err)
	}
	cmd := exec.Command(m.binary, "broker", "--topology", m.topoPath, "--name", name, "--log-format", "json")
	cmd.Stdout, cmd.Stderr, cmd.Dir = logf, logf, m.dir
	if m.env != nil {
		cmd.Env = append(os.Environ(), m.env...)
	}
	// Its own process group, so that a kill reaches anything it starts,
	// and the terminal's Ctrl-C reaches only driplab, which then kills
	// the group; the kernel kills it if driplab dies before it can.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("churn: starting broker %s (%s): %w", name, m.binary, err)
	}
	p := &proc{cmd: cmd, log: logPath, done: make(chan struct{})}
	m.procs[i] = p
	go func() {
		p.err = cmd.Wait()
		p.exit = time.Now()
		logf.Close()
		close(p.done)
	}()
	m.log.Debug("broker started", zap.String("broker", name), zap.Int("pid", cmd.Process.Pid), zap.Int("incarnation", m.starts[i]))
	return nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// current returns broker i's running process.
func (m *Mesh) current(i int) (*proc, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.procs[i]
	if p == nil || p.exited() {
		return nil, fmt.Errorf("churn: broker %s is not running", m.topo.Brokers[i].Name)
	}
	return p, nil
}

// Signal sends sig to broker i's process group.
func (m *Mesh) Signal(i int, sig syscall.Signal) error {
	p, err := m.current(i)
	if err != nil {
		return err
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("churn: signalling broker %s: %w", m.topo.Brokers[i].Name, err)
	}
	return nil
}

// WaitExit waits up to timeout for broker i's latest process to exit and
// returns when it did.
func (m *Mesh) WaitExit(ctx context.Context, i int, timeout time.Duration) (time.Time, error) {
	m.mu.Lock()
	p := m.procs[i]
	m.mu.Unlock()
	if p == nil {
		return time.Time{}, fmt.Errorf("churn: broker %s was never started", m.topo.Brokers[i].Name)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.exit, nil
	case <-t.C:
		return time.Time{}, fmt.Errorf("churn: broker %s still running %v after it was told to stop", m.topo.Brokers[i].Name, timeout)
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// Incarnation is how many times broker i has been started.
func (m *Mesh) Incarnation(i int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.starts[i]
}

// Logs lists broker i's log files, one per incarnation.
func (m *Mesh) Logs(i int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := 1; k <= m.starts[i]; k++ {
		out = append(out, filepath.Join(m.dir, fmt.Sprintf("%s.%d.log", m.topo.Brokers[i].Name, k)))
	}
	return out
}

// waitListening waits until broker i accepts connections at addr.
func (m *Mesh) waitListening(ctx context.Context, i int, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		m.mu.Lock()
		p := m.procs[i]
		m.mu.Unlock()
		if p.exited() {
			return fmt.Errorf("churn: broker %s exited at start (%v); see %s", m.topo.Brokers[i].Name, p.err, p.log)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("churn: broker %s not listening on %s: %w", m.topo.Brokers[i].Name, addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close kills every broker's process group and waits for each, at most
// killWait; it reports processes that outlived the wait. Safe to call more
// than once, and from any goroutine.
func (m *Mesh) Close() error {
	m.mu.Lock()
	m.closed = true
	procs := append([]*proc(nil), m.procs...)
	m.mu.Unlock()
	for _, p := range procs {
		if p != nil && !p.exited() {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	deadline := time.NewTimer(killWait)
	defer deadline.Stop()
	var errs []error
	expired := false
	for i, p := range procs {
		if p == nil {
			continue
		}
		if !expired {
			select {
			case <-p.done:
				continue
			case <-deadline.C:
				expired = true
			}
		}
		if !p.exited() {
			errs = append(errs, fmt.Errorf("churn: broker %s (pid %d) not reaped %v after SIGKILL", m.topo.Brokers[i].Name, p.cmd.Process.Pid, killWait))
		}
	}
	return errors.Join(errs...)
}
