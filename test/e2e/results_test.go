package e2e

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/bench"
)

// suiteResults is what one run of TestMesh keeps: -results/e2e.json, and
// the ramps plotted in -results/ramp.png. docs/results holds a committed
// run's (docs/kubernetes.md).
type suiteResults struct {
	Date         string         `json:"date"`
	Brokers      int            `json:"brokers"`
	Shape        string         `json:"shape"`
	Netem        bool           `json:"netem"`
	ConvergenceS float64        `json:"convergence_s"` // last broker's start to routing converged
	Ramps        []*rampResult  `json:"ramps,omitempty"`
	Restart      *restartResult `json:"restart,omitempty"`
}

// resultsDir is -results, or test/e2e/results under the module root.
func resultsDir(root string) string {
	if opts.results != "" {
		return opts.results
	}
	return filepath.Join(root, "test", "e2e", "results")
}

// write keeps the results, also of a failed run (what it measured until
// then).
func (r *suiteResults) write(t *testing.T, root string) {
	r.Date = time.Now().UTC().Format(time.RFC3339)
	dir := resultsDir(root)
	path, err := writeJSON(dir, "e2e.json", r)
	if err != nil {
		t.Errorf("writing the results: %v", err)
		return
	}
	t.Logf("results: %s", path)
	if len(r.Ramps) == 0 {
		return
	}
	png := filepath.Join(dir, "ramp.png")
	if err := plotRamps(r.Ramps, png); err != nil {
		t.Errorf("plotting the ramps: %v", err)
		return
	}
	t.Logf("ramp plot: %s", png)
}

// perSecond is a report's series, one line a second, for the log of a
// failed churn run: where the gaps, failovers and losses fell.
func perSecond(r *bench.Report) []string {
	var out []string
	for _, s := range r.Series {
		line := fmt.Sprintf("t=%3ds sent %d ideal %d delivered %d undelivered %d duplicates %d", s.T, s.Sent, s.Ideal, s.Delivered, s.Undelivered, s.Duplicates)
		if s.Gaps > 0 || s.Failovers > 0 {
			line += fmt.Sprintf(" gaps %d failovers %d", s.Gaps, s.Failovers)
		}
		out = append(out, line)
	}
	return out
}

// missLines groups a report's undelivered deliveries by when their
// messages were sent (to the tenth of a second) and where their
// subscribers and publishers first connected, one line a group in time
// order, to read beside the brokers' drains and joins.
func missLines(r *bench.Report) []string {
	type key struct {
		tenth    int
		sub, pub string
	}
	groups := map[key][]int{}
	var keys []key
	for _, m := range r.Misses {
		k := key{int(m.SentS * 10), m.SubscriberBroker, m.PublisherBroker}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], m.Subscriber)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.tenth, b.tenth), strings.Compare(a.sub, b.sub), strings.Compare(a.pub, b.pub))
	})
	// The wall-clock time, to read beside the brokers' logs.
	start, startErr := time.Parse(time.RFC3339Nano, r.SendingStarted)
	var out []string
	for _, k := range keys {
		subs := groups[k]
		slices.Sort(subs)
		at := ""
		if startErr == nil {
			at = " (" + start.Add(time.Duration(k.tenth)*100*time.Millisecond).Format("15:04:05.0") + ")"
		}
		out = append(out, fmt.Sprintf("sent t=%.1fs%s: %d undelivered to subscribers %v of %s, published at %s",
			float64(k.tenth)/10, at, len(subs), slices.Compact(subs), k.sub, k.pub))
	}
	if n := r.Totals.Undelivered; n > uint64(len(r.Misses)) {
		out = append(out, fmt.Sprintf("(%d more not listed)", n-uint64(len(r.Misses))))
	}
	return out
}

func TestMissLines(t *testing.T) {
	r := &bench.Report{SendingStarted: "2026-11-26T14:13:59.5Z", Totals: bench.Totals{Undelivered: 5}, Misses: []bench.Miss{
		{Subscriber: 7, SubscriberBroker: "b2", PublisherBroker: "b0", SentS: 41.23},
		{Subscriber: 3, SubscriberBroker: "b2", PublisherBroker: "b0", SentS: 41.27},
		{Subscriber: 3, SubscriberBroker: "b2", PublisherBroker: "b0", SentS: 41.29},
		{Subscriber: 1, SubscriberBroker: "b1", PublisherBroker: "b0", SentS: 12.0},
	}}
	assert.Equal(t, []string{
		"sent t=12.0s (14:14:11.5): 1 undelivered to subscribers [1] of b1, published at b0",
		"sent t=41.2s (14:14:40.7): 3 undelivered to subscribers [3 7] of b2, published at b0",
		"(1 more not listed)",
	}, missLines(r))
	r.SendingStarted = ""
	assert.Equal(t, "sent t=12.0s: 1 undelivered to subscribers [1] of b1, published at b0", missLines(r)[0], "no start time: no wall clock")
}

func TestSuiteResultsWrite(t *testing.T) {
	old := opts.results
	opts.results = filepath.Join(t.TempDir(), "out")
	t.Cleanup(func() { opts.results = old })
	r := &suiteResults{Brokers: 8, Shape: "ring", Netem: true, ConvergenceS: 1.5}
	r.write(t, "unused")
	js, err := os.ReadFile(filepath.Join(opts.results, "e2e.json"))
	require.NoError(t, err)
	assert.Contains(t, string(js), `"convergence_s": 1.5`)
	_, err = os.Stat(filepath.Join(opts.results, "ramp.png"))
	assert.True(t, os.IsNotExist(err), "no ramp, no plot")

	r.Ramps = []*rampResult{{Netem: true, Steps: []rampStep{{Rate: 200, Ratio: 1, P99: 20, Sustained: true}}, Sustained: 200, MinRatio: 0.95, MaxP99Ms: 1000}}
	r.write(t, "unused")
	_, err = os.Stat(filepath.Join(opts.results, "ramp.png"))
	assert.NoError(t, err)
}

func TestPerSecond(t *testing.T) {
	r := &bench.Report{Series: []bench.Second{{T: 0, Sent: 200, Ideal: 800, Delivered: 790}, {T: 1, Sent: 200, Ideal: 800, Delivered: 810, Gaps: 2, Failovers: 1}}}
	lines := perSecond(r)
	require.Len(t, lines, 2)
	assert.Equal(t, "t=  0s sent 200 ideal 800 delivered 790 undelivered 0 duplicates 0", lines[0])
	assert.True(t, strings.HasSuffix(lines[1], "gaps 2 failovers 1"))
}
