package churn

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ScrapeInterval is how often the Monitor reads every broker's metrics:
// the resolution of the reconvergence times.
const ScrapeInterval = 100 * time.Millisecond

// scrapeTimeout bounds one scrape; a broker that does not answer in time
// counts as down for that round.
const scrapeTimeout = time.Second

// counterLabels are the broker counters a run sums, each by the label that
// says why (empty: none). Other labels (the peer of a link) are summed
// over.
var counterLabels = map[string]string{
	"drip_duplicates_suppressed_total":      "verdict",
	"drip_route_dropped_destinations_total": "reason",
	"drip_link_dropped_bundles_total":       "reason",
	"drip_subscriber_dropped_total":         "",
	"drip_false_positives_total":            "",
	"drip_malformed_bundles_total":          "",
	"drip_published_messages_total":         "",
	"drip_delivered_messages_total":         "",
}

// Sample is what one scrape of one broker found.
type Sample struct {
	Up          bool // the scrape succeeded
	Incarnation int  // of the broker's process, as the Mesh counts them
	Digest      float64
	Routers     float64
	Pending     float64
	LSDBEntries float64
	Advertised  float64
}

// Round is one scrape of every broker; At is when the last of them
// returned, so a state a round shows held by At.
type Round struct {
	At      time.Time
	Brokers []Sample
}

// Monitor scrapes every broker's /metrics every ScrapeInterval and keeps
// every round, and each broker incarnation's latest counters.
type Monitor struct {
	addrs       []string
	incarnation func(i int) int
	http        *http.Client

	mu       sync.Mutex
	rounds   []Round
	counters []map[int]map[string]float64 // broker → incarnation → counter → latest value
	detailed []map[int]map[string]float64 // the same with every label (the peer of a link)
	changed  chan struct{}                // closed and replaced when a round is added
}

// NewMonitor returns a monitor of the brokers whose metrics listen at
// addrs; incarnation says which process of broker i is running.
func NewMonitor(addrs []string, incarnation func(i int) int) *Monitor {
	m := &Monitor{
		addrs: addrs, incarnation: incarnation,
		http:     &http.Client{Timeout: scrapeTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1}},
		counters: make([]map[int]map[string]float64, len(addrs)),
		detailed: make([]map[int]map[string]float64, len(addrs)),
		changed:  make(chan struct{}),
	}
	for i := range m.counters {
		m.counters[i], m.detailed[i] = map[int]map[string]float64{}, map[int]map[string]float64{}
	}
	return m
}

// Run scrapes until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	defer m.http.CloseIdleConnections()
	tick := time.NewTicker(ScrapeInterval)
	defer tick.Stop()
	for {
		m.round(ctx)
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// round scrapes every broker at once and records what it found.
func (m *Monitor) round(ctx context.Context) {
	r := Round{Brokers: make([]Sample, len(m.addrs))}
	counters := make([]map[string]float64, len(m.addrs))
	detailed := make([]map[string]float64, len(m.addrs))
	var wg sync.WaitGroup
	for i, addr := range m.addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inc := m.incarnation(i)
			fams, err := m.scrape(ctx, addr)
			// A scrape that spans a restart cannot say whose counters it read.
			if err != nil || m.incarnation(i) != inc {
				r.Brokers[i] = Sample{Incarnation: inc}
				return
			}
			r.Brokers[i] = Sample{
				Up: true, Incarnation: inc,
				Digest: gauge(fams, "drip_lsdb_digest"), Routers: gauge(fams, "drip_routers_known"),
				Pending: gauge(fams, "drip_advertisement_pending"), LSDBEntries: gauge(fams, "drip_lsdb_entries"),
				Advertised: gauge(fams, "drip_advertised_filters"),
			}
			counters[i], detailed[i] = sumCounters(fams, false), sumCounters(fams, true)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	r.At = time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rounds = append(m.rounds, r)
	for i, c := range counters {
		if c != nil {
			m.counters[i][r.Brokers[i].Incarnation] = c
			m.detailed[i][r.Brokers[i].Incarnation] = detailed[i]
		}
	}
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *Monitor) scrape(ctx context.Context, addr string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scraping %s: %s: %s", addr, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// gauge returns the value of an unlabelled gauge, or -1 when absent.
func gauge(fams map[string]*dto.MetricFamily, name string) float64 {
	f, ok := fams[name]
	if !ok || len(f.GetMetric()) == 0 {
		return -1
	}
	return f.GetMetric()[0].GetGauge().GetValue()
}

// sumCounters picks the counters of counterLabels out of a scrape, keyed
// name or name{label="value"}, summed over the other labels, or with all
// labels, in the order of the scrape.
func sumCounters(fams map[string]*dto.MetricFamily, allLabels bool) map[string]float64 {
	out := map[string]float64{}
	for name, label := range counterLabels {
		for _, mt := range fams[name].GetMetric() {
			var ls []string
			for _, lp := range mt.GetLabel() {
				if allLabels || (label != "" && lp.GetName() == label) {
					ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
				}
			}
			key := name
			if len(ls) > 0 {
				key += "{" + strings.Join(ls, ",") + "}"
			}
			out[key] += mt.GetCounter().GetValue()
		}
	}
	return out
}

// Rounds returns the rounds so far.
func (m *Monitor) Rounds() []Round {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Round(nil), m.rounds...)
}

// Counters sums every counter over every broker and every incarnation:
// each incarnation as of its last scrape, so a killed broker's counts
// miss at most its last ScrapeInterval.
func (m *Monitor) Counters() map[string]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]float64{}
	for _, incs := range m.counters {
		for _, c := range incs {
			for k, v := range c {
				out[k] += v
			}
		}
	}
	return out
}

// DropsByBroker lists, per broker incarnation ("b9/2": broker b9's
// second process), its counters other than the published and delivered
// totals that are not zero, with every label: where the drops and
// suppressed copies of Counters happened, and on which link.
func (m *Monitor) DropsByBroker() map[string]map[string]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]map[string]float64{}
	for i, incs := range m.detailed {
		for inc, c := range incs {
			for k, v := range c {
				if v == 0 || k == "drip_published_messages_total" || k == "drip_delivered_messages_total" {
					continue
				}
				key := fmt.Sprintf("%s/%d", Name(i), inc)
				if out[key] == nil {
					out[key] = map[string]float64{}
				}
				out[key][k] = v
			}
		}
	}
	return out
}

// WaitFor waits until the last stable rounds all satisfy ok, or ctx ends;
// it returns the last round and, on timeout, says what the last round
// showed.
func (m *Monitor) WaitFor(ctx context.Context, stable int, ok func(Round) bool) (Round, error) {
	for {
		m.mu.Lock()
		rs, changed := m.rounds, m.changed
		m.mu.Unlock()
		if n := len(rs); n >= stable {
			all := true
			for _, r := range rs[n-stable:] {
				all = all && ok(r)
			}
			if all {
				return rs[n-1], nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			last := "no round yet"
			if len(rs) > 0 {
				last = describe(rs[len(rs)-1])
			}
			return Round{}, fmt.Errorf("%w; last scrape: %s", context.Cause(ctx), last)
		}
	}
}

// describe summarises a round for an error message.
func describe(r Round) string {
	s := ""
	for i, b := range r.Brokers {
		if !b.Up {
			s += fmt.Sprintf(" %s:down", Name(i))
			continue
		}
		s += fmt.Sprintf(" %s:routers=%g,digest=%x,pending=%g,lsdb=%g", Name(i), b.Routers, uint64(b.Digest), b.Pending, b.LSDBEntries)
	}
	return s[min(1, len(s)):]
}

// Agree reports whether, in r, the brokers of each group are up, know
// exactly the routers of their group (reachable, themselves included),
// have no advertisement pending, and share one link-state database
// digest: each part of the mesh has converged on its own.
func Agree(r Round, groups [][]int) bool {
	for _, g := range groups {
		for _, v := range g {
			b := r.Brokers[v]
			if !b.Up || b.Routers != float64(len(g)) || b.Pending != 0 || b.Digest != r.Brokers[g[0]].Digest {
				return false
			}
		}
	}
	return true
}

// FirstAgreement is the time of the first round after since in which the
// groups agree (Agree), and whether there was one.
func FirstAgreement(rounds []Round, since time.Time, groups [][]int) (time.Time, bool) {
	i := sort.Search(len(rounds), func(i int) bool { return rounds[i].At.After(since) })
	for ; i < len(rounds); i++ {
		if Agree(rounds[i], groups) {
			return rounds[i].At, true
		}
	}
	return time.Time{}, false
}
