// Command pause is the sandbox container of every pod on a hack/k8s-local
// node: it holds the pod's namespaces open and waits to be stopped. As PID 1
// of a pod that shares its process namespace it also reaps orphans, which is
// all the upstream pause image does besides.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "pause: takes no arguments; it waits for SIGTERM or SIGINT")
		os.Exit(2)
	}
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		reap()
	}
}

// reap collects every exited child without blocking: signals coalesce, so
// one SIGCHLD may stand for several exits.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
