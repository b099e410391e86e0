package lab

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/topology"
)

func TestPlanAddr(t *testing.T) {
	p16 := DefaultPrefix
	p24 := netip.MustParsePrefix("192.168.5.0/24")
	tests := []struct {
		prefix netip.Prefix
		i      int
		want   string
		err    string
	}{
		{p16, 0, "10.77.0.1", ""},
		{p16, 1, "10.77.0.2", ""},
		{p16, 253, "10.77.0.254", ""},
		{p16, 254, "10.77.1.1", ""},
		{p16, 254*256 - 1, "10.77.255.254", ""},
		{p16, 254 * 256, "", "no room for site 65024"},
		{netip.MustParsePrefix("10.77.3.9/16"), 0, "10.77.0.1", ""}, // host bits are ignored
		{p24, 253, "192.168.5.254", ""},
		{p24, 254, "", "no room"},
		{netip.MustParsePrefix("10.0.0.0/30"), 1, "10.0.0.2", ""},
		{netip.MustParsePrefix("10.0.0.0/30"), 2, "", "no room"},
		{netip.MustParsePrefix("10.0.0.1/32"), 0, "", "no room"},
		{netip.MustParsePrefix("fd00::/64"), 0, "", "only IPv4"},
		{p16, -1, "", "negative"},
	}
	for _, tt := range tests {
		got, err := PlanAddr(tt.prefix, tt.i)
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, "%s #%d", tt.prefix, tt.i)
			continue
		}
		require.NoError(t, err, "%s #%d", tt.prefix, tt.i)
		assert.Equal(t, tt.want, got.String(), "%s #%d", tt.prefix, tt.i)
	}
}

// Every planned address is distinct, inside the prefix, and never a /24's
// network or broadcast address.
func TestPlanAddrProperties(t *testing.T) {
	seen := map[netip.Addr]int{}
	for i := range 254 * 256 {
		a, err := PlanAddr(DefaultPrefix, i)
		require.NoError(t, err)
		require.True(t, DefaultPrefix.Contains(a), a)
		last := a.As4()[3]
		require.True(t, last >= 1 && last <= 254, a)
		if j, dup := seen[a]; dup {
			t.Fatalf("sites %d and %d both get %s", j, i, a)
		}
		seen[a] = i
	}
}

func TestAddresses(t *testing.T) {
	parse := func(yaml string) *topology.Topology {
		tp, err := topology.Parse([]byte(yaml))
		require.NoError(t, err)
		return tp
	}
	got, err := Addresses(parse(`
brokers:
  - {name: b0}
  - {name: b1, peer: 10.77.9.9:7100, client: 10.77.9.9:7000}
  - {name: b2, client: ":7000"}
`), DefaultPrefix)
	require.NoError(t, err)
	assert.Equal(t, []netip.Addr{
		netip.MustParseAddr("10.77.0.1"), netip.MustParseAddr("10.77.9.9"), netip.MustParseAddr("10.77.0.3"),
	}, got, "explicit addresses are kept, missing ones planned by position")

	for _, tt := range []struct{ name, yaml, want string }{
		{"outside", "brokers: [{name: b0, peer: 127.0.0.1:7100}]", "outside the lab prefix"},
		{"hostname", "brokers: [{name: b0, peer: broker0:7100}]", "needs an IP"},
		{"no port", "brokers: [{name: b0, peer: 10.77.0.1}]", "missing port"},
		{"two IPs", "brokers: [{name: b0, peer: 10.77.0.1:1, client: 10.77.0.2:2}]", "both 10.77.0.1 and 10.77.0.2"},
		{"shared", "brokers: [{name: b0}, {name: b1, peer: 10.77.0.1:1}]", `"b0" and "b1" both have lab address 10.77.0.1`},
		{"bad site name", "brokers: [{name: b/0}]", `broker "b/0"`},
		{"leading dot", "brokers: [{name: .b}]", `broker ".b"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Addresses(parse(tt.yaml), DefaultPrefix)
			assert.ErrorContains(t, err, tt.want)
		})
	}
	_, err = Addresses(parse("brokers: [{name: b0}]"), netip.MustParsePrefix("fd00::/64"))
	assert.ErrorContains(t, err, "only IPv4")
}

func TestNames(t *testing.T) {
	for name, ok := range map[string]bool{
		"drip": true, "t1234-x": true, "a": true, "0lab": true,
		"": false, "Drip": false, "a.b": false, "-a": false, "a/b": false, "abcdefghijklmnopqrstuvwxyz0123456": false,
	} {
		assert.Equal(t, ok, ValidateName(name) == nil, name)
	}
	assert.Equal(t, "drip-lab-x.b0", NamespaceName("x", "b0"))
	// Lab "a" must not claim lab "a-b"'s namespaces.
	assert.NotContains(t, NamespaceName("a-b", "c"), namespacePrefixOf("a"))
}
