package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// metrics is one scrape of a /metrics endpoint (docs/metrics.md lists the
// brokers' names; internal/netem's Metrics the sidecar's).
type metrics map[string]*dto.MetricFamily

// parseMetrics reads the Prometheus text format, which is what /metrics
// serves to a client that asks for nothing else.
func parseMetrics(text []byte) (metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return metrics(fams), nil
}

// sampleValue is a gauge's, counter's or untyped sample's value.
func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}

// value is the value of name's sample whose labels include want, and
// whether there is one.
func (m metrics) value(name string, want map[string]string) (float64, bool) {
	f := m[name]
	if f == nil {
		return 0, false
	}
next:
	for _, s := range f.Metric {
		have := map[string]string{}
		for _, l := range s.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return sampleValue(s), true
	}
	return 0, false
}

// byLabel is name's samples keyed by label's value; samples without the
// label are left out.
func (m metrics) byLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	f := m[name]
	if f == nil {
		return out
	}
	for _, s := range f.Metric {
		for _, l := range s.Label {
			if l.GetName() == label {
				out[l.GetValue()] += sampleValue(s)
			}
		}
	}
	return out
}

// checkLinks lists what is wrong with a broker's links after the bench:
// every neighbour the topology gives it must have its link up and have
// been sent data, and no other link may be up.
func checkLinks(m metrics, neighbours []string) []string {
	up := m.byLabel("drip_link_up", "peer")
	sent := m.byLabel("drip_link_sent_bytes_total", "peer")
	var problems []string
	for _, n := range neighbours {
		switch {
		case up[n] != 1:
			problems = append(problems, fmt.Sprintf("link to %s is not up", n))
		case sent[n] == 0:
			problems = append(problems, fmt.Sprintf("nothing sent to %s", n))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(up)) {
		if up[p] == 1 && !slices.Contains(neighbours, p) {
			problems = append(problems, fmt.Sprintf("link to %s is up, but the topology does not link them", p))
		}
	}
	return problems
}

// linkLine is a broker's per-peer traffic for the test log.
func linkLine(m metrics) string {
	sent := m.byLabel("drip_link_sent_bytes_total", "peer")
	recv := m.byLabel("drip_link_received_bytes_total", "peer")
	bundles := m.byLabel("drip_link_sent_bundles_total", "peer")
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(sent)) {
		parts = append(parts, fmt.Sprintf("→%s %s sent (%.0f bundles), %s received", p, bytesString(sent[p]), bundles[p], bytesString(recv[p])))
	}
	if len(parts) == 0 {
		return "no links"
	}
	return strings.Join(parts, "; ")
}

// bytesString is a byte count with a binary unit.
func bytesString(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", b)
	}
}

// unsupportedFeatures are the impairments (delay, jitter, loss) the netem
// sidecar says the node's kernel cannot apply.
func unsupportedFeatures(m metrics) []string {
	var out []string
	for f, v := range m.byLabel("drip_netem_unsupported", "feature") {
		if v == 1 {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

const brokerScrape = `# HELP drip_routers_known Routers reachable from this broker, itself included.
# TYPE drip_routers_known gauge
drip_routers_known 4
# HELP drip_link_up 1 while the link to peer is established.
# TYPE drip_link_up gauge
drip_link_up{peer="drip-1"} 1
drip_link_up{peer="drip-3"} 1
drip_link_up{peer="drip-2"} 0
# HELP drip_link_sent_bytes_total Bytes of frames sent to peer.
# TYPE drip_link_sent_bytes_total counter
drip_link_sent_bytes_total{peer="drip-1"} 123456
drip_link_sent_bytes_total{peer="drip-3"} 2048
drip_link_sent_bytes_total{peer="drip-2"} 0
# HELP drip_link_received_bytes_total Bytes of frames received from peer.
# TYPE drip_link_received_bytes_total counter
drip_link_received_bytes_total{peer="drip-1"} 1000
# HELP drip_link_dropped_bundles_total Bundles dropped.
# TYPE drip_link_dropped_bundles_total counter
drip_link_dropped_bundles_total{peer="drip-1",reason="queue_full"} 2
drip_link_dropped_bundles_total{peer="drip-1",reason="link_down"} 3
# HELP drip_build_info Constant 1.
# TYPE drip_build_info gauge
drip_build_info{broker="drip-0",version="dev"} 1
`

const netemScrape = `# HELP drip_netem_links Neighbours whose traffic has its own htb class.
# TYPE drip_netem_links gauge
drip_netem_links 2
# HELP drip_netem_unsupported 1 while some link asks for this impairment and the kernel lacks netem.
# TYPE drip_netem_unsupported gauge
drip_netem_unsupported{feature="delay"} 1
drip_netem_unsupported{feature="jitter"} 0
drip_netem_unsupported{feature="loss"} 1
`

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics([]byte(brokerScrape))
	require.NoError(t, err)

	v, ok := m.value("drip_routers_known", nil)
	require.True(t, ok)
	assert.Equal(t, 4.0, v)
	v, ok = m.value("drip_link_sent_bytes_total", map[string]string{"peer": "drip-3"})
	require.True(t, ok)
	assert.Equal(t, 2048.0, v)
	v, ok = m.value("drip_link_dropped_bundles_total", map[string]string{"peer": "drip-1", "reason": "link_down"})
	require.True(t, ok)
	assert.Equal(t, 3.0, v, "every wanted label must match, not just one")
	_, ok = m.value("drip_link_sent_bytes_total", map[string]string{"peer": "drip-9"})
	assert.False(t, ok)
	_, ok = m.value("drip_no_such_metric", nil)
	assert.False(t, ok)

	assert.Equal(t, map[string]float64{"drip-1": 1, "drip-2": 0, "drip-3": 1}, m.byLabel("drip_link_up", "peer"))
	assert.Equal(t, map[string]float64{"drip-1": 5}, m.byLabel("drip_link_dropped_bundles_total", "peer"), "samples of one peer add up")
	assert.Empty(t, m.byLabel("drip_routers_known", "peer"))
	assert.Empty(t, m.byLabel("drip_no_such_metric", "peer"))

	_, err = parseMetrics([]byte("drip_routers_known{peer=\"unterminated} 4\n"))
	require.ErrorContains(t, err, "metrics:")
}

func TestCheckLinks(t *testing.T) {
	m, err := parseMetrics([]byte(brokerScrape))
	require.NoError(t, err)
	assert.Empty(t, checkLinks(m, []string{"drip-1", "drip-3"}))
	assert.Equal(t, []string{"link to drip-2 is not up"}, checkLinks(m, []string{"drip-1", "drip-2", "drip-3"}))
	assert.Equal(t, []string{"link to drip-3 is up, but the topology does not link them"}, checkLinks(m, []string{"drip-1"}))

	quiet, err := parseMetrics([]byte("drip_link_up{peer=\"drip-1\"} 1\ndrip_link_sent_bytes_total{peer=\"drip-1\"} 0\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"nothing sent to drip-1"}, checkLinks(quiet, []string{"drip-1"}))
}

func TestLinkLine(t *testing.T) {
	m, err := parseMetrics([]byte(brokerScrape))
	require.NoError(t, err)
	assert.Equal(t, "→drip-1 120.6 KiB sent (0 bundles), 1000 B received; →drip-2 0 B sent (0 bundles), 0 B received; →drip-3 2.0 KiB sent (0 bundles), 0 B received", linkLine(m))
	assert.Equal(t, "no links", linkLine(metrics{}))
	assert.Equal(t, "3.0 MiB", bytesString(3<<20))
}

func TestUnsupportedFeatures(t *testing.T) {
	m, err := parseMetrics([]byte(netemScrape))
	require.NoError(t, err)
	assert.Equal(t, []string{"delay", "loss"}, unsupportedFeatures(m))
	links, ok := m.value("drip_netem_links", nil)
	require.True(t, ok)
	assert.Equal(t, 2.0, links)
	assert.Empty(t, unsupportedFeatures(metrics{}))
}

func FuzzParseMetrics(f *testing.F) {
	f.Add([]byte(brokerScrape))
	f.Add([]byte(netemScrape))
	f.Add([]byte("x{a=\"1\",a=\"2\"} 1\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		m, err := parseMetrics(text)
		if err != nil {
			return
		}
		// Every sample with a label is found by value under its labels,
		// and byLabel never invents keys.
		for name, fam := range m {
			for _, s := range fam.Metric {
				want := map[string]string{}
				for _, l := range s.Label {
					want[l.GetName()] = l.GetValue()
				}
				_, ok := m.value(name, want)
				require.True(t, ok, "%s%v", name, want)
				for label, v := range want {
					_, ok := m.byLabel(name, label)[v]
					require.True(t, ok, "%s by %s", name, label)
				}
			}
		}
	})
}
