//go:build !linux

package lab

import (
	"errors"
	"net/netip"
	"os"
	"time"
)

// The lab needs Linux: network namespaces, TUN devices and timerfd. These
// stubs keep the driplab binary building elsewhere.

var errNotLinux = errors.New("the lab needs Linux (network namespaces, TUN devices)")

func createSite(string, netip.Addr, netip.Prefix) (*os.File, error) { return nil, errNotLinux }

type hrTimer struct{}

func newHRTimer() (*hrTimer, error)        { return nil, errNotLinux }
func (*hrTimer) C() <-chan struct{}        { return nil }
func (*hrTimer) Reset(time.Duration) error { return errNotLinux }
func (*hrTimer) Close() error              { return nil }

const mntDetach = 0
