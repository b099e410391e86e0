package broker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/broker"
)

// TestConfigValidate: each bad setting is named once, in words a user
// reads (durations as durations), without a package name said twice.
func TestConfigValidate(t *testing.T) {
	require.NoError(t, broker.DefaultConfig(1, "b1").Validate())
	tests := []struct {
		name string
		edit func(*broker.Config)
		want string
	}{
		{"bloom hashes", func(c *broker.Config) { c.Encoding.K = 100 }, "encoding: K=100 hash positions, want 1..32"},
		{"bloom bits", func(c *broker.Config) { c.Encoding.M = 100 }, "encoding: M=100 bits, want a multiple of 32 in 64..2048 for cat-v2"},
		{"hop limit", func(c *broker.Config) { c.DRP.HopLimit = 0 }, "drp: Config.HopLimit = 0, want at least 1 (no bundle could leave its ingress router)"},
		{"hello", func(c *broker.Config) { c.LinkState.HelloInterval = 0 }, "linkstate: Config.HelloInterval = 0s, want > 0"},
		{"drain timeout", func(c *broker.Config) { c.DrainTimeout = -time.Second }, "drain timeout must be positive, got -1s"},
		{"advertise interval", func(c *broker.Config) { c.AdvertiseInterval = 0 }, "advertise interval must be positive, got 0s"},
		{"subscriber queue", func(c *broker.Config) { c.SubscriberQueue = -1 }, "subscriber queue must be positive, got -1"},
		{"link marks past the queue", func(c *broker.Config) { c.LinkQueueBytes, c.LinkMarkBytes = 1000, 1001 },
			"link mark bytes must lie between 0 (no marks) and the link queue's 1000, got 1001"},
		{"negative link marks", func(c *broker.Config) { c.LinkMarkBytes = -1 }, "link mark bytes must lie between 0 (no marks) and the link queue's 4194304, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := broker.DefaultConfig(1, "b1")
			tt.edit(&c)
			err := c.Validate()
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			for _, pkg := range []string{"encoding", "drp", "linkstate"} {
				assert.LessOrEqual(t, strings.Count(err.Error(), pkg+":"), 1, "%s named twice", pkg)
			}
		})
	}
}
