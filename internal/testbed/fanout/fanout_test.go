package fanout

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestScrapeReadsGaugesInOneFetch: the gauges of a sample come from one
// fetch of /metrics, in the order named, -1 for one that is missing or
// labelled, and all -1 when the broker does not answer.
func TestScrapeReadsGaugesInOneFetch(t *testing.T) {
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		fmt.Fprint(w, "# HELP go_goroutines x\ngo_goroutines 4875\ndrip_memory_budget_used_bytes 1.34217728e+08\nother{a=\"b\"} 1\n")
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	got := scrape(addr, "drip_memory_budget_used_bytes", "go_memstats_heap_inuse_bytes", "go_goroutines", "other")
	assert.Equal(t, []int64{134217728, -1, 4875, -1}, got)
	assert.Equal(t, int32(1), fetches.Load())

	srv.Close()
	assert.Equal(t, []int64{-1, -1}, scrape(addr, "go_goroutines", "other"))
}
