package topology

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tp, err := Parse([]byte(`
mesh: demo
brokers:
  - {name: b0, client: 127.0.0.1:7000, peer: 127.0.0.1:7100}
  - {name: b1, id: 7}
  - {name: b2}
links:
  - {a: b0, b: b1, bandwidth: 1MBps, delay: 20ms, jitter: 1ms, loss: 0.5%}
  - {a: b2, b: b0, weight: 3, bandwidth: 8Mbit, loss: 0.01}
`))
	require.NoError(t, err)
	assert.Equal(t, "demo", tp.Mesh)
	assert.Equal(t, uint32(0), *tp.Brokers[0].ID)
	assert.Equal(t, uint32(7), *tp.Brokers[1].ID)
	assert.Equal(t, uint32(2), *tp.Brokers[2].ID, "default ID is the position")
	l := tp.Links[0]
	assert.Equal(t, Rate(1e6), l.Bandwidth)
	assert.Equal(t, Duration(20*time.Millisecond), l.Delay)
	assert.InDelta(t, 0.005, float64(l.Loss), 1e-12)
	assert.Equal(t, uint32(1), l.Weight, "default weight")
	assert.Equal(t, Rate(1e6), tp.Links[1].Bandwidth, "8 Mbit/s is 1 MB/s")

	nb := tp.Neighbors("b0")
	require.Len(t, nb, 2)
	assert.Equal(t, "b2", nb[0].Broker.Name, "neighbours in router ID order")
	assert.Equal(t, uint32(3), nb[0].Link.Weight)
	assert.Equal(t, "b1", nb[1].Broker.Name)
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"no brokers", `mesh: x`, "no brokers"},
		{"unknown field", "brokers: [{name: b0, port: 1}]", "field port not found"},
		{"duplicate name", "brokers: [{name: b0}, {name: b0}]", `"b0" is used twice`},
		{"duplicate id", "brokers: [{name: b0, id: 1}, {name: b1}]", "share router ID 1"},
		{"unnamed", "brokers: [{id: 3}]", "broker 0 has no name"},
		{"unknown broker", "brokers: [{name: b0}]\nlinks: [{a: b0, b: bx}]", "unknown broker"},
		{"self link", "brokers: [{name: b0}]\nlinks: [{a: b0, b: b0}]", "to itself"},
		{"twice", "brokers: [{name: b0}, {name: b1}]\nlinks: [{a: b0, b: b1}, {a: b1, b: b0}]", "listed twice"},
		{"bad rate", "brokers: [{name: b0}, {name: b1}]\nlinks: [{a: b0, b: b1, bandwidth: 3 furlongs}]", "unknown unit"},
		{"bad delay", "brokers: [{name: b0}, {name: b1}]\nlinks: [{a: b0, b: b1, delay: soon}]", `duration "soon"`},
		{"bad loss", "brokers: [{name: b0}, {name: b1}]\nlinks: [{a: b0, b: b1, loss: 150%}]", "not in [0, 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]Rate{
		"1000": 1000, "1MBps": 1e6, "250KBps": 250e3, "1.5MB/s": 1.5e6, "10Mbit": 1.25e6,
		"1Gbit": 125e6, "800kbps": 100e3, "2GBps": 2e9, "0": 0,
	} {
		got, err := ParseRate(in)
		require.NoError(t, err, in)
		assert.InDelta(t, float64(want), float64(got), 1e-6, in)
	}
	for _, bad := range []string{"", "fast", "-1MBps", "1XBps", "1MBpsx"} {
		_, err := ParseRate(bad)
		assert.Error(t, err, bad)
	}
}

func TestDefaultAndRoundTrip(t *testing.T) {
	d := Default()
	require.Len(t, d.Brokers, 4)
	require.Len(t, d.Links, 5)
	assert.Len(t, d.Neighbors("b0"), 3, "b0 has the diagonal")
	out, err := d.Marshal()
	require.NoError(t, err)
	again, err := Parse(out)
	require.NoError(t, err)
	assert.Equal(t, d, again)
}
