//go:build !linux && !darwin

package transport

import "errors"

// NotSentLowatSupported reports whether SetNotSentLowat bounds anything on
// this platform.
const NotSentLowatSupported = false

func setNotSentLowat(uintptr, int) error { return errors.ErrUnsupported }

func getNotSentLowat(uintptr) (int, error) { return 0, errors.ErrUnsupported }
