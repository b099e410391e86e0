//go:build !race

package client

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = false
