package perf

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/testbed/systems"
)

// Content routing's subscribers run in a child process (`driplab perf
// subscribers`), so that their CPU time — for NATS, the client-side
// filtering that stands in for the broker's matching — is a process's
// own, counted apart from the publisher's. Both systems' subscribers run
// there, so that the comparison counts the same work on both sides.
//
// The child speaks JSON lines: it writes {"ready":true} once every
// subscription is installed (or {"error":...}), then answers each "snap"
// line on its standard input with its counters (subCounts), and exits at
// "stop" or at the end of its input (the harness died).

// SubscribersSpec is what a subscriber process runs.
type SubscribersSpec struct {
	System     string   // drip or nats
	Addr       string   // the broker's client address
	Predicates []string // one subscriber, on its own connection, per predicate
	Run        uint32   // the run whose messages count
}

type childReady struct {
	Ready bool   `json:"ready"`
	Error string `json:"error,omitempty"`
}

// RunSubscribers is the child's side: it subscribes as spec says, reports
// on out, and takes commands from in until "stop", the end of in, or ctx.
func RunSubscribers(ctx context.Context, spec SubscribersSpec, in io.Reader, out io.Writer) error {
	enc := json.NewEncoder(out)
	subs, err := openSubscribers(ctx, spec)
	if err != nil {
		_ = enc.Encode(childReady{Error: err.Error()})
		return err
	}
	defer subs.close()
	if err := enc.Encode(childReady{Ready: true}); err != nil {
		return err
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok || line == "stop" {
				return nil
			}
			if line != "snap" {
				return fmt.Errorf("subscribers: unknown command %q (want snap or stop)", line)
			}
			c, _ := subs.counts(ctx)
			if err := enc.Encode(c); err != nil {
				return err
			}
		}
	}
}

// openSubscribers installs spec's subscribers, a few at a time.
func openSubscribers(ctx context.Context, spec SubscribersSpec) (localSubs, error) {
	preds := make([]content.Predicate, len(spec.Predicates))
	for i, text := range spec.Predicates {
		p, err := content.Parse(text)
		if err != nil {
			return nil, fmt.Errorf("predicate %d %q: %w", i+1, text, err)
		}
		preds[i] = p
	}
	subs := make(localSubs, len(preds))
	err := parallel(ctx, len(preds), 16, func(ctx context.Context, i int) error {
		var err error
		switch spec.System {
		case sysDrip:
			subs[i], err = dripSubscribe(ctx, spec.Addr, spec.Predicates[i], Clock{run: spec.Run}, nil, true)
		case sysNATS:
			subs[i], err = natsFilteringSubscribe(spec.Addr, preds[i], spec.Run)
		default:
			err = fmt.Errorf("subscribers: no system %q (want drip or nats)", spec.System)
		}
		return err
	})
	if err != nil {
		var open localSubs
		for _, s := range subs {
			if s != nil {
				open = append(open, s)
			}
		}
		_ = open.close()
		return nil, err
	}
	return subs, nil
}

// natsFilteringSubscribe is a NATS subscriber as the lab experiments
// deploy it (systems.NATSFilter): every message of the one subject
// arrives, is decoded, and is kept if the predicate matches it.
func natsFilteringSubscribe(addr string, p content.Predicate, run uint32) (*sub, error) {
	sb := &sub{clk: Clock{run: run}}
	nc, err := natsConnect(addr, func(err error) { sb.fail(fmt.Errorf("nats subscriber at %s: %w", addr, err)) })
	if err != nil {
		return nil, err
	}
	f := systems.NewNATSFilter(p) // the handler runs on one goroutine per subscription
	s, err := nc.Subscribe(systems.NATSSubject, func(m *nats.Msg) {
		payload, ok, err := f.Match(m.Data)
		switch {
		case err != nil:
			sb.fail(err)
		case ok:
			sb.receive(payload)
		default:
			sb.filtered.Add(1)
		}
	})
	if err == nil {
		err = nc.FlushTimeout(10 * time.Second)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: subscribing at %s: %w", addr, err)
	}
	sb.lost = func() uint64 {
		n, _ := s.Dropped()
		return uint64(max(n, 0))
	}
	sb.stop = func() error {
		nc.Close()
		return nil
	}
	return sb, nil
}

// parallel runs f(0..n-1) with at most width at a time, and returns the
// first error; the others stop starting once one failed.
func parallel(ctx context.Context, n, width int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

// childSubs is the harness's side of a subscriber process.
type childSubs struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan []byte
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error

	mu sync.Mutex // one command at a time
}

// childReplyTimeout bounds the wait for the child's answer to a command.
const childReplyTimeout = 30 * time.Second

// startChild runs argv (this binary's `perf subscribers`) with spec,
// writing the predicates and the child's log under dir, and returns once
// its subscribers are installed.
func startChild(ctx context.Context, argv, env []string, dir string, spec SubscribersSpec) (*childSubs, error) {
	f, err := os.CreateTemp(dir, "predicates-*.txt")
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(strings.Join(spec.Predicates, "\n") + "\n")
	if err = errors.Join(err, f.Close()); err != nil {
		return nil, err
	}
	logPath := strings.TrimSuffix(f.Name(), ".txt") + "-" + spec.System + ".log"
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, argv[1:]...), "--system", spec.System, "--addr", spec.Addr, "--predicates", f.Name(),
		"--run", strconv.FormatUint(uint64(spec.Run), 10))
	cmd := exec.Command(argv[0], args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logf
	// Its own process group, killed with us (Pdeathsig) or by close.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	// A pipe of our own rather than StdoutPipe, which Wait closes under
	// a reader that has not finished.
	stdout, w, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		logf.Close()
		stdout.Close()
		return nil, fmt.Errorf("starting the subscriber process %s: %w", argv[0], err)
	}
	c := &childSubs{cmd: cmd, stdin: stdin, lines: make(chan []byte, 1), logPath: logPath, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.lines <- bytes.Clone(sc.Bytes())
		}
		stdout.Close()
		close(c.lines)
	}()
	go func() {
		c.waitErr = cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	var ready childReady
	if err := c.reply(ctx, &ready); err != nil {
		c.close()
		return nil, err
	}
	if !ready.Ready {
		c.close()
		return nil, fmt.Errorf("subscriber process: %s", ready.Error)
	}
	return c, nil
}

// reply reads the child's next line into v.
func (c *childSubs) reply(ctx context.Context, v any) error {
	select {
	case line, ok := <-c.lines:
		if !ok {
			<-c.done
			return fmt.Errorf("subscriber process exited (%v); end of %s:\n%s", c.waitErr, c.logPath, tail(c.logPath, 2000))
		}
		if err := json.Unmarshal(line, v); err != nil {
			return fmt.Errorf("subscriber process said %q: %w", line, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(childReplyTimeout):
		return fmt.Errorf("subscriber process did not answer within %v", childReplyTimeout)
	}
}

func (c *childSubs) counts(ctx context.Context) (subCounts, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sc subCounts
	if _, err := io.WriteString(c.stdin, "snap\n"); err != nil {
		return sc, fmt.Errorf("subscriber process: %w", err)
	}
	err := c.reply(ctx, &sc)
	return sc, err
}

func (c *childSubs) cpu() (time.Duration, bool, error) {
	d, err := ProcessCPU(c.cmd.Process.Pid)
	return d, true, err
}

// close asks the child to stop, and kills its group if it has not exited
// within 10 s.
func (c *childSubs) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = io.WriteString(c.stdin, "stop\n")
	c.stdin.Close()
	pgid := c.cmd.Process.Pid
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-c.done
		return fmt.Errorf("subscriber process did not stop within 10 s; killed")
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // anything it left behind
	for range c.lines {
		// let the reader goroutine finish
	}
	if c.waitErr != nil {
		return fmt.Errorf("subscriber process: %v; end of %s:\n%s", c.waitErr, c.logPath, tail(c.logPath, 2000))
	}
	return nil
}

// tail returns about the last n bytes of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
