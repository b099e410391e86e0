package lab

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// hrTimer is a one-shot timer on a timerfd. Go's own timers wake through
// epoll_pwait's millisecond timeout, so they fire up to a millisecond
// late; a link emulator releasing packets every 1.5 ms at 1 MB/s, and
// adding that lateness at every hop, needs the kernel's high-resolution
// timer, which reaches the Go poller as a readable fd.
type hrTimer struct {
	fd int
	f  *os.File
	c  chan struct{}
}

func newHRTimer() (*hrTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	t := &hrTimer{fd: fd, f: os.NewFile(uintptr(fd), "timerfd"), c: make(chan struct{}, 1)}
	go t.run()
	return t, nil
}

// run turns expirations into (coalesced) sends on c until the timer is
// closed.
func (t *hrTimer) run() {
	var buf [8]byte
	for {
		if _, err := t.f.Read(buf[:]); err != nil {
			close(t.c)
			return
		}
		if binary.NativeEndian.Uint64(buf[:]) == 0 {
			continue
		}
		select {
		case t.c <- struct{}{}:
		default:
		}
	}
}

// C receives after the timer expires. A wake-up may be stale (from a
// setting replaced since); the loop only uses it to look at the clock.
func (t *hrTimer) C() <-chan struct{} { return t.c }

// Reset arms the timer to expire after d (at once if d ≤ 0).
func (t *hrTimer) Reset(d time.Duration) error {
	d = max(d, time.Nanosecond) // a zero value would disarm it
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	return unix.TimerfdSettime(t.fd, 0, &spec, nil)
}

// Stop disarms the timer.
func (t *hrTimer) Stop() error {
	return unix.TimerfdSettime(t.fd, 0, &unix.ItimerSpec{}, nil)
}

// Close stops the timer for good and ends its goroutine.
func (t *hrTimer) Close() error { return t.f.Close() }
