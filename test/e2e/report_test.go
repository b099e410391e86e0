package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/bench"
)

// parseReport finds drip bench's JSON report in the bench pod's log, where
// standard error's lines (the summary, any error) surround it: the report
// is the first line that opens a JSON object up to where that object ends.
func parseReport(log []byte) (*bench.Report, error) {
	for off := 0; off < len(log); {
		line := log[off:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i+1]
		}
		if bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte("{")) {
			var r bench.Report
			dec := json.NewDecoder(bytes.NewReader(log[off:]))
			if err := dec.Decode(&r); err != nil {
				return nil, fmt.Errorf("bench report at byte %d of the log: %w", off, err)
			}
			return &r, nil
		}
		off += len(line)
	}
	return nil, fmt.Errorf("no JSON report in the bench log (%d bytes; it ends: %q)", len(log), tail(log, 300))
}

// tail returns at most the last n bytes of b.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// checkReport lists what makes r a failed run: any false positive or
// duplicate (Carzaniga09 §2.2, §3: brokers apply the exact predicates before
// delivering, so Bloom false positives cost bandwidth and never reach a
// client), or fewer than minDelivery of the ideal deliveries (Carzaniga09
// §5.1.4: output throughput against the ideal, input × replication).
func checkReport(r *bench.Report, minDelivery float64) []string {
	t := r.Totals
	var problems []string
	if t.Sent == 0 {
		problems = append(problems, "the bench sent nothing")
	}
	if t.Sent > 0 && t.Ideal == 0 {
		problems = append(problems, fmt.Sprintf("%d messages sent but none matched a subscriber: the workload tests nothing", t.Sent))
	}
	if t.FalsePositives > 0 {
		problems = append(problems, fmt.Sprintf("%d false positives: deliveries a subscriber's predicate does not match", t.FalsePositives))
	}
	if t.Duplicates > 0 {
		problems = append(problems, fmt.Sprintf("%d duplicate deliveries", t.Duplicates))
	}
	if t.Ideal > 0 {
		if ratio := deliveryRatio(r); ratio < minDelivery {
			problems = append(problems, fmt.Sprintf("delivered %d of %d ideal deliveries (%.2f%%), below %.2f%% (undelivered %d, of which lost at slow subscribers %d)",
				t.Delivered, t.Ideal, 100*ratio, 100*minDelivery, t.Undelivered, t.Lost))
		}
	}
	return problems
}

// deliveryRatio is output over ideal throughput.
func deliveryRatio(r *bench.Report) float64 {
	if r.Totals.Ideal == 0 {
		return 0
	}
	return float64(r.Totals.Delivered) / float64(r.Totals.Ideal)
}

// summary is the report in one line for the test log.
func summary(r *bench.Report) string {
	t := r.Totals
	return fmt.Sprintf("sent %d at %.0f/s for %.0fs, replication %.2f subscribers / %.2f brokers, ideal %d, delivered %d (%.2f%%), false positives %d, duplicates %d, lost %d, foreign %d; latency ms p50 %.1f p99 %.1f max %.1f",
		t.Sent, r.Config.Rate, r.Config.Duration, r.Replication.Client, r.Replication.Broker, t.Ideal, t.Delivered, 100*deliveryRatio(r),
		t.FalsePositives, t.Duplicates, t.Lost, t.Foreign, r.Latency.P50, r.Latency.P99, r.Latency.Max)
}

func TestParseReport(t *testing.T) {
	rep := bench.Report{Totals: bench.Totals{Sent: 4000, Ideal: 16000, Delivered: 15990, Undelivered: 10}}
	js, err := json.MarshalIndent(rep, "", "  ")
	require.NoError(t, err)
	summaryLine := "drip bench: sent 4000, ideal 16000 (replication 4.00), delivered 15990 (99.9%)\n"
	tests := []struct {
		name    string
		log     string
		wantErr string
	}{
		{name: "report only", log: string(js) + "\n"},
		{name: "summary after", log: string(js) + "\n" + summaryLine},
		{name: "noise before", log: "W1122 warning from somewhere\n" + string(js) + "\n" + summaryLine},
		{name: "compact", log: `{"totals":{"sent":4000,"ideal":16000,"delivered":15990,"undelivered":10}}`},
		{name: "empty", log: "", wantErr: "no JSON report"},
		{name: "error only", log: "Error: dial drip-0: connection refused\n", wantErr: "connection refused"},
		{name: "truncated", log: string(js[:len(js)/2]), wantErr: "bench report at byte 0"},
		{name: "not a report", log: `{"totals": "many"}`, wantErr: "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseReport([]byte(tt.log))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, rep.Totals, got.Totals)
		})
	}
}

// TestParseReportFindsRandomReports embeds random reports between random
// non-JSON lines, as a pod log interleaves standard output and error.
func TestParseReportFindsRandomReports(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	noise := []string{"drip bench: sent 1", "Error: something", "  indented }", "[not json", ""}
	for range 200 {
		rep := bench.Report{
			Totals:  bench.Totals{Sent: rng.Uint64N(1e6), Ideal: rng.Uint64N(1e7), Delivered: rng.Uint64N(1e7), Duplicates: rng.Uint64N(3)},
			Latency: bench.Latency{P50: rng.Float64() * 100},
			Series:  []bench.Second{{T: 0, Sent: rng.Uint64N(100)}},
		}
		js, err := json.Marshal(rep)
		require.NoError(t, err)
		var log strings.Builder
		for range rng.IntN(3) {
			log.WriteString(noise[rng.IntN(len(noise))] + "\n")
		}
		log.Write(js)
		log.WriteString("\n")
		for range rng.IntN(3) {
			log.WriteString(noise[rng.IntN(len(noise))] + "\n")
		}
		got, err := parseReport([]byte(log.String()))
		require.NoError(t, err, log.String())
		require.Equal(t, rep.Totals, got.Totals)
		require.Equal(t, rep.Latency, got.Latency)
	}
}

func FuzzParseReport(f *testing.F) {
	f.Add([]byte(`{"totals":{"sent":1,"ideal":2,"delivered":2}}`))
	f.Add([]byte("noise\n{\"totals\":{}}\ndrip bench: done\n"))
	f.Add([]byte("{\n"))
	f.Fuzz(func(t *testing.T, log []byte) {
		r, err := parseReport(log)
		if err != nil {
			return
		}
		// A parsed report survives a round trip through its JSON form.
		js, err := json.Marshal(r)
		require.NoError(t, err)
		again, err := parseReport(js)
		require.NoError(t, err)
		require.Equal(t, r.Totals, again.Totals)
	})
}

func TestCheckReport(t *testing.T) {
	good := bench.Totals{Sent: 4000, Ideal: 16000, Delivered: 15990, Undelivered: 10}
	tests := []struct {
		name string
		mod  func(*bench.Totals)
		want []string // one substring per problem, in order
	}{
		{name: "exact and complete", mod: func(*bench.Totals) {}},
		{name: "exactly at the threshold", mod: func(t *bench.Totals) { t.Delivered, t.Undelivered = 15840, 160 }},
		{name: "false positives", mod: func(t *bench.Totals) { t.FalsePositives = 3 }, want: []string{"3 false positives"}},
		{name: "duplicates", mod: func(t *bench.Totals) { t.Duplicates = 1 }, want: []string{"1 duplicate"}},
		{name: "below threshold", mod: func(t *bench.Totals) { t.Delivered, t.Undelivered, t.Lost = 15839, 161, 7 },
			want: []string{"delivered 15839 of 16000 ideal deliveries (98.99%), below 99.00% (undelivered 161, of which lost at slow subscribers 7)"}},
		{name: "nothing sent", mod: func(t *bench.Totals) { *t = bench.Totals{} }, want: []string{"sent nothing"}},
		{name: "nothing matched", mod: func(t *bench.Totals) { t.Ideal, t.Delivered, t.Undelivered = 0, 0, 0 }, want: []string{"none matched"}},
		{name: "everything wrong", mod: func(t *bench.Totals) { t.FalsePositives, t.Duplicates, t.Delivered = 1, 1, 0 },
			want: []string{"false positives", "duplicate", "delivered 0 of 16000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &bench.Report{Totals: good}
			tt.mod(&r.Totals)
			got := checkReport(r, 0.99)
			require.Len(t, got, len(tt.want), "%q", got)
			for i, w := range tt.want {
				assert.Contains(t, got[i], w)
			}
		})
	}
}

func TestSummaryNamesTheCounts(t *testing.T) {
	r := &bench.Report{Totals: bench.Totals{Sent: 10, Ideal: 40, Delivered: 20, FalsePositives: 2}}
	s := summary(r)
	for _, want := range []string{"sent 10", "ideal 40", "delivered 20 (50.00%)", "false positives 2"} {
		assert.Contains(t, s, want)
	}
}
