package linkstate

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/encoding"
)

func TestPresetsAreValid(t *testing.T) {
	for name, c := range map[string]Config{
		"lan": DefaultConfig(1, "a"),
		"wan": DefaultWANConfig(1, "a"),
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, c.Validate())
			// Kim10 §2.1: EWMA weight 0.25 on the new sample, 20% hysteresis.
			assert.Equal(t, 0.25, c.EWMAWeight)
			assert.Equal(t, 0.2, c.CostThreshold)
		})
	}
	assert.Equal(t, CostRTT, DefaultWANConfig(1, "a").CostMode)
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"long name", func(c *Config) { c.Name = string(make([]byte, 256)) }, "Name is 256 bytes"},
		{"no hello", func(c *Config) { c.HelloInterval = 0 }, "HelloInterval = 0s"},
		{"dead too short", func(c *Config) { c.DeadInterval = c.HelloInterval }, "DeadInterval = 1s, want at least 2×HelloInterval = 2s"},
		{"no refresh", func(c *Config) { c.RefreshInterval = -time.Second }, "RefreshInterval = -1s"},
		{"max age below refresh", func(c *Config) { c.MaxAge = c.RefreshInterval }, "MaxAge = 30m0s, want more than RefreshInterval"},
		{"no digest hellos", func(c *Config) { c.DigestMismatchHellos = 0 }, "DigestMismatchHellos = 0"},
		{"cost mode", func(c *Config) { c.CostMode = 7 }, "CostMode = 7"},
		{"ewma zero", func(c *Config) { c.EWMAWeight = 0 }, "EWMAWeight = 0"},
		{"ewma above one", func(c *Config) { c.EWMAWeight = 1.5 }, "EWMAWeight = 1.5"},
		{"ewma NaN", func(c *Config) { c.EWMAWeight = math.NaN() }, "EWMAWeight = NaN"},
		{"negative threshold", func(c *Config) { c.CostThreshold = -0.1 }, "CostThreshold = -0.1"},
		{"infinite threshold", func(c *Config) { c.CostThreshold = math.Inf(1) }, "CostThreshold = +Inf"},
		{"zero floor", func(c *Config) { c.CostFloor = 0 }, "CostFloor = 0"},
		{"keepalive too short", func(c *Config) { c.Keepalive = time.Millisecond }, "Keepalive = 1ms, want 0 (no keepalives) or at least 5ms"},
		{"negative keepalive", func(c *Config) { c.Keepalive = -time.Second }, "Keepalive = -1s"},
		{"multiplier one", func(c *Config) { c.SuspectMultiplier = 1 }, "SuspectMultiplier = 1, want 0 (no fast detection) or 2 to 100"},
		{"multiplier huge", func(c *Config) { c.SuspectMultiplier = 101 }, "SuspectMultiplier = 101"},
		{"bad encoding", func(c *Config) { c.Encoding = encoding.Params{M: 100, K: 3} }, "Config.Encoding: encoding: M=100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig(1, "a")
			tc.edit(&c)
			err := c.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			_, err = New(c)
			assert.Error(t, err)
		})
	}
}
