//go:build linux

package match

import (
	"syscall"
	"time"
)

// rusageThread is RUSAGE_THREAD of linux/resource.h, which package syscall
// does not name.
const rusageThread = 1

// threadCPU returns the CPU time the calling OS thread has consumed. The
// benchmarks use it because the machines they run on are shared: wall time
// then includes the time the thread waited for a core.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
