// Package race says whether the binary was built with the race detector,
// for tests whose timing its slowdown skews: they skip under it, and make
// test runs them alone without it.
package race
