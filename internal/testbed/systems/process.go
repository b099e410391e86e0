package systems

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is a broker process started at a site.
type process struct {
	site, name string
	cmd        *exec.Cmd
	logPath    string
	done       chan struct{} // closed when the process has exited
	err        error         // how it exited; valid after done
}

// startProcess runs argv at site with output to logPath.
func startProcess(p Placement, site, name, logPath string, argv []string, env []string) (*process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = filepath.Dir(logPath)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	// The kernel kills a broker whose parent (this process) dies, so a
	// crashed experiment leaves nothing running. Each broker leads its own
	// process group, so that stop reaches anything it started too, and a
	// Ctrl-C at the terminal reaches only driplab, which then stops the
	// brokers in order instead of racing them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := p.Start(site, cmd); err != nil {
		logf.Close()
		return nil, fmt.Errorf("site %s: starting %s: %w", site, name, err)
	}
	pr := &process{site: site, name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		logf.Close()
		close(pr.done)
	}()
	return pr, nil
}

// alive returns an error naming the process and the end of its log if it
// has exited.
func (pr *process) alive() error {
	select {
	case <-pr.done:
		return fmt.Errorf("%s at site %s exited (%v); end of %s:\n%s", pr.name, pr.site, pr.err, pr.logPath, pr.tail(2000))
	default:
		return nil
	}
}

// tail returns the last n bytes of the log.
func (pr *process) tail(n int) string {
	b, err := os.ReadFile(pr.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// stop asks the process group to terminate and kills it if the process
// has not exited within grace.
func (pr *process) stop(grace time.Duration) {
	pgid := pr.cmd.Process.Pid
	select {
	case <-pr.done:
		// Anything the broker left in its group goes with it.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return
	default:
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-pr.done:
	case <-time.After(grace):
		_ = pr.cmd.Process.Kill()
		<-pr.done
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// stopAll stops processes in parallel.
func stopAll(procs []*process, grace time.Duration) {
	for _, pr := range procs {
		if pr != nil {
			go pr.stop(grace)
		}
	}
	for _, pr := range procs {
		if pr != nil {
			pr.stop(grace) // waits for the one started above
		}
	}
}
