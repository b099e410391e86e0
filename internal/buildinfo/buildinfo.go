// Package buildinfo reports what drip binary this is: the version stamped at
// link time (-ldflags "-X github.com/dripmesh/drip/internal/buildinfo.Version=v1.2.3")
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
func String() string {
	return fmt.Sprintf("drip %s (%s %s/%s)", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
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
