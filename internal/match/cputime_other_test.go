//go:build !linux

package match

import "time"

// threadCPU is not available here; the benchmarks report wall time only.
func threadCPU() (time.Duration, bool) { return 0, false }
