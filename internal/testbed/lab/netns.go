package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netnsDir is where named network namespaces are bind-mounted (as by
// `ip netns add`), which keeps them alive without a process in them.
const netnsDir = "/run/netns"

// onThread runs fn on a fresh OS thread after enter has switched that
// thread's network namespace, then switches it back. Go schedules
// goroutines over threads, so the switch is only safe on a locked thread;
// if switching back fails the thread is left locked and so discarded when
// the goroutine ends, never reused in the wrong namespace.
func onThread(enter func() error, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("current network namespace: %w", err)
			return
		}
		defer orig.Close()
		err = enter()
		if err == nil {
			err = fn()
		}
		if rerr := netns.Set(orig); rerr != nil {
			errc <- errors.Join(err, fmt.Errorf("return to the host network namespace: %w", rerr))
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// inNamespace runs fn on a thread inside the named network namespace.
// Sockets fn creates stay in that namespace whatever thread uses them
// later; processes fn starts are born in it.
func inNamespace(name string, fn func() error) error {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", name, err)
	}
	defer ns.Close()
	return onThread(func() error { return netns.Set(ns) }, fn)
}

// listNamespaces returns the named network namespaces starting with
// prefix.
func listNamespaces(prefix string) ([]string, error) {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// namespaceProcesses returns the processes whose network namespace is one
// of the named ones (what `ip netns pids` does).
func namespaceProcesses(names []string) []int {
	type nsID struct{ dev, ino uint64 }
	ids := map[nsID]bool{}
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(netnsDir, name), &st); err == nil {
			ids[nsID{uint64(st.Dev), uint64(st.Ino)}] = true
		}
	}
	var pids []int
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name()+"/ns/net", &st) == nil && ids[nsID{uint64(st.Dev), uint64(st.Ino)}] {
			pids = append(pids, pid)
		}
	}
	return pids
}

// removeNamespaces unmounts and removes named namespaces. A namespace
// lives on while a process is in it, so end those first. A name left
// without its mount by a crash is removed too.
func removeNamespaces(names []string) error {
	var errs []error
	for _, name := range names {
		path := filepath.Join(netnsDir, name)
		if err := unix.Unmount(path, mntDetach); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount network namespace %s: %w", name, err))
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove network namespace %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// terminate sends SIGTERM to pids, then SIGKILL to those still there
// after a grace period; all at once, so the grace periods overlap.
func terminate(pids []int) {
	if len(pids) == 0 {
		return
	}
	for _, pid := range pids {
		_ = unix.Kill(pid, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if pids = alivePIDs(pids); len(pids) == 0 {
			return
		}
	}
	for _, pid := range pids {
		_ = unix.Kill(pid, syscall.SIGKILL)
	}
}

func alivePIDs(pids []int) []int {
	var out []int
	for _, pid := range pids {
		if processAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// processAlive reports whether pid runs; a zombie does not count, since
// it is gone except for its parent's wait.
func processAlive(pid int) bool {
	if pid <= 0 || unix.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may itself
	// contain spaces or parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
