//go:build !race

package bench

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = false
