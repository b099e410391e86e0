package broker

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/transport"
)

// zeroSeries returns the label values of name's series on a fresh broker's
// registry, failing if any is not zero.
func zeroSeries(t *testing.T, families []*dto.MetricFamily, name, label string) []string {
	t.Helper()
	var values []string
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					values = append(values, l.GetValue())
				}
			}
			assert.Zero(t, m.GetCounter().GetValue(), "%s %v", name, m.GetLabel())
		}
	}
	slices.Sort(values)
	return values
}

// TestCountersTheDashboardsQueryStartAtZero: a healthy mesh's dashboards
// show zeros, not "no data", for the failure counters.
func TestCountersTheDashboardsQueryStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := New(DefaultConfig(0, "b0"), WithRegisterer(reg))
	require.NoError(t, err)
	families, err := reg.Gather()
	require.NoError(t, err)

	want := slices.Clone(handshakeFailureReasons)
	slices.Sort(want)
	assert.Equal(t, want, zeroSeries(t, families, "drip_link_handshake_failures_total", "reason"))
	assert.Equal(t, []string{"hop_limit", "link_down", "match_all", "no_route"}, zeroSeries(t, families, "drip_route_dropped_destinations_total", "reason"))
	assert.Equal(t, []string{"certificate", "identity", "limit", "signature", "unsigned"}, zeroSeries(t, families, "drip_advertisements_refused_total", "reason"))
	assert.Equal(t, []string{"epoch", "reverse_path"}, zeroSeries(t, families, "drip_bundles_refused_total", "reason"))
	assert.Equal(t, []string{"publish", "subscribe"}, zeroSeries(t, families, "drip_authz_denied_total", "op"))
}

// TestHandshakeReasonsCoverTheTransport: every reason the transport gives a
// refused handshake is one the counter starts with.
func TestHandshakeReasonsCoverTheTransport(t *testing.T) {
	local := &dripv1.Open{ProtocolVersion: transport.ProtocolVersion, RouterId: 1, Mesh: "m", BloomBits: 2048, BloomHashes: 6, BloomScheme: "cat-v2"}
	mismatch := map[string]func(o *dripv1.Open){
		"version": func(o *dripv1.Open) { o.ProtocolVersion++ },
		"mesh":    func(o *dripv1.Open) { o.Mesh = "other" },
		"bloom":   func(o *dripv1.Open) { o.BloomBits = 512 },
		"self":    func(o *dripv1.Open) { o.RouterId = local.RouterId },
	}
	for want, mutate := range mismatch {
		remote := &dripv1.Open{ProtocolVersion: local.ProtocolVersion, RouterId: 2, Mesh: local.Mesh, BloomBits: local.BloomBits, BloomHashes: local.BloomHashes, BloomScheme: local.BloomScheme}
		mutate(remote)
		reason, ok := transport.IsIncompatible(transport.Compatible(local, remote))
		require.True(t, ok, want)
		assert.Equal(t, want, reason)
		assert.Contains(t, handshakeFailureReasons, reason)
	}
	reason, ok := transport.IsIncompatible(transport.Compatible(local, nil))
	require.True(t, ok)
	assert.Contains(t, handshakeFailureReasons, reason)
	for _, r := range []string{"refused", "duplicate"} {
		assert.Contains(t, handshakeFailureReasons, r, "set by the dialler (refused) and attach (duplicate)")
	}
}

// TestHandshakeReasonsAreDocumented keeps docs/metrics.md's list of
// reasons the one the code uses.
func TestHandshakeReasonsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?m)^\\| `drip_link_handshake_failures_total\\{reason\\}`.*$").Find(doc)
	require.NotNil(t, m, "docs/metrics.md has no row for drip_link_handshake_failures_total")
	for _, r := range handshakeFailureReasons {
		assert.Contains(t, string(m), "`"+r+"`")
	}
}
