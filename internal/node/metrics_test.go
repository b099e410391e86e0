package node

import (
	"os"
	"regexp"
	"testing"

	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDropReasonsAreDocumented keeps docs/metrics.md's list of reasons the
// one the code uses.
func TestDropReasonsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	require.NoError(t, err)
	line := func(metric string) string {
		m := regexp.MustCompile("(?m)^\\| `" + metric + "\\{reason\\}`.*$").Find(doc)
		require.NotNil(t, m, "docs/metrics.md has no row for %s", metric)
		return string(m)
	}
	drops := line("drip_route_dropped_destinations_total")
	for r := range drp.NumDropReasons {
		assert.Contains(t, drops, "`"+drp.DropReason(r).String()+"`")
	}
	assert.Contains(t, drops, "`"+routeDropLinkDown+"`")
	assert.Contains(t, drops, "`"+routeDropMatchAll+"`")
}

// TestMatchAllFiltersCounted: drip_match_all_filters counts the other
// routers' filters that match every message, following their updates and
// removals; the broker's own do not count.
func TestMatchAllFiltersCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	n, err := New(DefaultConfig(1, "b1"), WithRegisterer(reg))
	require.NoError(t, err)
	var some encoding.Bloom
	some.Set(3)
	for _, step := range []struct {
		u    linkstate.PredicateUpdate
		want float64
	}{
		{linkstate.PredicateUpdate{Router: 2, Filters: []encoding.Bloom{{}, some, {}}}, 2},
		{linkstate.PredicateUpdate{Router: 3, Filters: []encoding.Bloom{{}}}, 3},
		{linkstate.PredicateUpdate{Router: 1, Filters: []encoding.Bloom{{}}}, 3},
		{linkstate.PredicateUpdate{Router: 2, Filters: []encoding.Bloom{some}}, 1},
		{linkstate.PredicateUpdate{Router: 3, Removed: true}, 0},
	} {
		n.matchAll.apply(step.u)
		assert.Equal(t, step.want, testutil.ToFloat64(n.m.matchAllFilters), "after %+v", step.u)
	}
}
