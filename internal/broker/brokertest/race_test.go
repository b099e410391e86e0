//go:build race

package brokertest

const raceEnabled = true
