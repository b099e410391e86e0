//go:build linux || darwin

package transport

import "golang.org/x/sys/unix"

// NotSentLowatSupported reports whether SetNotSentLowat bounds anything on
// this platform.
const NotSentLowatSupported = true

func setNotSentLowat(fd uintptr, lowat int) error {
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, lowat)
}

func getNotSentLowat(fd uintptr) (int, error) {
	return unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
}
