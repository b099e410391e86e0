//go:build !race

package brokertest

const raceEnabled = false
