package perf

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCaveats(t *testing.T) {
	c := &CaseResult{Name: CaseOneToOne, Systems: []string{"drip", "nats"}, Runs: []RunResult{
		{System: "drip", Window: 5, ServerCores: 0.4, HarnessCPU: 6, DrainEnd: "complete"},
		{System: "drip", Window: 5, ServerCores: 0.9, HarnessCPU: 5, DrainEnd: "complete"},
		{System: "nats", Window: 5, ServerCores: 1.0, HarnessCPU: 5, DrainEnd: "timeout", Lost: 3},
		{System: "nats", Window: 5, ServerCores: 1.0, DrainEnd: "unsettled"},
		{System: "nats", Error: "broken"},
	}}
	got := caveats(c)
	assert.Len(t, got, 4)
	assert.Contains(t, got[0], "drip: in 1 of 2 runs the servers were busy less than 0.6 cores (median 0.65; the clients in driplab 1.10)")
	assert.Contains(t, got[1], "nats: 1 of 3 runs failed")
	assert.Contains(t, got[2], "nats: 1 of 3 runs ended the drain while deliveries still arrived")
	assert.Contains(t, got[2], "nats reported 3 drops")
	assert.Contains(t, got[3], "nats: in 1 of 3 runs the system had not taken everything")

	c.Runs = []RunResult{{System: "drip", Window: 1, ServerCores: 1.5, DrainEnd: "complete"}}
	assert.Empty(t, caveats(c), "a busy server and a complete drain say nothing")
}

func TestShellQuote(t *testing.T) {
	assert.Equal(t, `bin/driplab perf --note 'it'\''s the baseline' --cases one-to-one,latency ''`,
		ShellQuote([]string{"bin/driplab", "perf", "--note", "it's the baseline", "--cases", "one-to-one,latency", ""}))
}
