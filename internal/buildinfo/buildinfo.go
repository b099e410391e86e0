// Package buildinfo reports which build of drip (or driplab) this is: the
// version stamped at link time
// (-ldflags "-X github.com/dripmesh/drip/internal/buildinfo.Version=v1.2.3")
// or, failing that, what the Go toolchain recorded about the module.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set by the linker for release builds.
var Version = ""

// String returns "drip <version> (<go version> <os>/<arch>)".
func String() string { return Of("drip") }

// Of is String for another of the project's binaries, such as driplab:
// "<binary> <version> (<go version> <os>/<arch>)".
func Of(binary string) string {
	return fmt.Sprintf("%s %s (%s %s/%s)", binary, version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
