package congestion

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func constant(r float64) func(time.Duration) float64 {
	return func(time.Duration) float64 { return r }
}

// meanRate is the mean of per-second counts over seconds [from, to).
func meanRate(counts []int, from, to int) float64 {
	var sum int
	for _, c := range counts[from:to] {
		sum += c
	}
	return float64(sum) / float64(to-from)
}

// fairnessPhase is how long each capacity of the fairness run lasts; the
// rates are read over its second half.
const fairnessPhase = 40 * time.Second

// fairnessCaps are Fig. 9's 2, 1 and 0.5 Mbit/s in 1 KB messages.
var fairnessCaps = []float64{250, 125, 62.5}

// fairnessDemands are the three pairs' matching rates: 400 msg/s
// published, 20%, 50% and 100% matching.
var fairnessDemands = []float64{80, 200, 400}

// fairnessRun is Malekpour11 §IV-C (Fig. 9) in virtual time with
// publication records of size k: it returns, per capacity, the pairs'
// delivered rates and Jain's index against the max-min fair shares.
func fairnessRun(k int, seed uint64) (sharedOutcome, [][]float64, []float64) {
	return fairnessRunMarked(k, seed, 0)
}

// fairnessRunMarked is fairnessRun with messages marked from markAt
// queued on (0: none).
func fairnessRunMarked(k int, seed uint64, markAt int) (sharedOutcome, [][]float64, []float64) {
	cfg := DefaultConfig()
	cfg.RecordSize = k
	run := sharedRun{
		markAt: markAt,
		cfg:    cfg,
		pairs:  []pair{{constant(400), 0.2}, {constant(400), 0.5}, {constant(400), 1}},
		capacity: func(t time.Duration) float64 {
			return fairnessCaps[min(int(t/fairnessPhase), len(fairnessCaps)-1)]
		},
		limit: 20, delay: 40 * time.Millisecond, duration: time.Duration(len(fairnessCaps)) * fairnessPhase, seed: seed,
	}
	out := run.run()
	var rates [][]float64
	var index []float64
	n := int(fairnessPhase / time.Second)
	for p, c := range fairnessCaps {
		var x []float64
		for i := range run.pairs {
			x = append(x, meanRate(out.delivered[i], (p+1)*n-n/2, (p+1)*n))
		}
		rates = append(rates, x)
		index = append(index, jain(x, MaxMin(c, fairnessDemands)))
	}
	return out, rates, index
}

// TestFairnessAfterCapacityCuts is Malekpour11 §IV-C (Fig. 9): three
// publisher/subscriber pairs of different matching rates share a
// bottleneck cut from 2 to 1 to 0.5 Mbit/s. With losses seen precisely (a
// record that covers every gap, k = 64) the flows settle at their max-min
// fair shares: Jain's index ≥ 0.95, the target. (With the default
// k = 5 the flow that matches 20% of its publisher's messages sees fewer of
// its losses, §III-C, and takes more than its share: the study below.)
func TestFairnessAfterCapacityCuts(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		_, rates, index := fairnessRun(64, seed)
		for p, c := range fairnessCaps {
			t.Logf("seed %d, capacity %5.1f msg/s, shares %.1f: rates %.1f, Jain %.3f", seed, c, MaxMin(c, fairnessDemands), rates[p], index[p])
			assert.GreaterOrEqual(t, index[p], 0.95, "seed %d at %v msg/s", seed, c)
		}
	}
}

// adaptRun is Malekpour11 §IV-B (Fig. 8) in virtual time: one pair, the
// bottleneck alternating 2 and 1 Mbit/s (250 and 125 msg/s of 1 KB) every
// period.
func adaptRun() sharedOutcome { return adaptRunMarked(0) }

// adaptRunMarked is adaptRun with messages marked from markAt queued on
// (0: none).
func adaptRunMarked(markAt int) sharedOutcome {
	period := 20 * time.Second
	caps := []float64{250, 125}
	return sharedRun{
		markAt: markAt,
		cfg:    DefaultConfig(),
		pairs:  []pair{{constant(400), 1}},
		capacity: func(t time.Duration) float64 {
			return caps[int(t/period)%2]
		},
		limit: 20, delay: 40 * time.Millisecond, duration: 4 * period, seed: 1,
	}.run()
}

// TestAdaptsToCapacityChanges: when the bottleneck doubles, the flow
// carries 85% of it in the second second and 90% in the third; when it
// halves, only the first second loses much (the queue overflows before
// the feedback returns): from the next second on the flow carries 90% of
// the new capacity and loses at most 5% of it, the equation's probing.
// (How much of the doubled capacity the second second gets depends on
// when the last loss event of the slow phase fell: eq. 1 at the drained
// queue's round trip with that phase's loss history allows about 90%, and
// p falls only once the open interval outgrows the average, RFC 5348 §5.4.
// Over link delays of 30–50 ms and queues of 15–25 it ranged from 73% to
// 100%.)
func TestAdaptsToCapacityChanges(t *testing.T) {
	out := adaptRun()
	got := out.delivered[0]
	t.Logf("delivered per second %v", got)
	t.Logf("dropped per second %v", out.dropped)
	for _, up := range []int{40} {
		assert.GreaterOrEqual(t, float64(got[up+1]), 0.85*250, "second %d, 2 s after the capacity doubled", up+1)
		assert.GreaterOrEqual(t, float64(got[up+2]), 0.9*250, "second %d, 3 s after the capacity doubled", up+2)
	}
	for _, down := range []int{20, 60} {
		for s := down + 1; s < down+20; s++ {
			assert.GreaterOrEqual(t, float64(got[s]), 0.9*125, "second %d after the cut at %d", s, down)
			assert.LessOrEqual(t, float64(out.dropped[s]), 0.05*125, "second %d after the cut at %d", s, down)
		}
	}
}

// persistentLoss is the share of a single pair's messages the bottleneck
// dropped in the second half of each of adaptRun's phases.
func persistentLoss(out sharedOutcome, period int) []float64 {
	var loss []float64
	for p := 0; p < len(out.dropped)/period; p++ {
		dropped, delivered := 0, 0
		for s := p*period + period/2; s < (p+1)*period; s++ {
			dropped += out.dropped[s]
			delivered += out.delivered[0][s]
		}
		loss = append(loss, float64(dropped)/float64(dropped+delivered))
	}
	return loss
}

// TestMarksEndPersistentLoss: with a drop-tail bottleneck alone, eq. 1
// settles where the queue overflows often enough to give it the loss event
// rate that matches the capacity (about 1% at 125 msg/s and this round
// trip), so that Fig. 8 keeps losing after it has adapted. Messages marked
// once the queue is nine tenths full give the equation those events before
// the queue overflows: the persistent loss goes to zero (the issue's
// target is 0.2%), and the flows still share fairly and follow the cuts.
// What it costs is the up-step: with more loss events in its history the
// flow reaches 90% of the doubled capacity in the fourth second, a second
// later than with drop-tail alone (TestAdaptsToCapacityChanges).
func TestMarksEndPersistentLoss(t *testing.T) {
	const markAt = 18 // of 20
	bare, marked := adaptRun(), adaptRunMarked(markAt)
	lossBare, lossMarked := persistentLoss(bare, 20), persistentLoss(marked, 20)
	t.Logf("persistent loss by phase: drop-tail %.4f, marked %.4f", lossBare, lossMarked)
	assert.Greater(t, slices.Max(lossBare), 0.005, "drop-tail loses nothing persistently: the test shows nothing")
	for p, l := range lossMarked {
		assert.LessOrEqual(t, l, 0.002, "phase %d", p)
	}
	got := marked.delivered[0]
	t.Logf("marked: delivered per second %v", got)
	for _, down := range []int{20, 60} {
		for s := down + 2; s < down+20; s++ {
			assert.GreaterOrEqual(t, float64(got[s]), 0.9*125, "second %d after the cut at %d", s, down)
		}
	}
	assert.GreaterOrEqual(t, float64(got[43]), 0.9*250, "4 s after the capacity doubled")
	for _, seed := range []uint64{1, 2} {
		_, rates, index := fairnessRunMarked(64, seed, markAt)
		for p, c := range fairnessCaps {
			t.Logf("seed %d, capacity %5.1f msg/s, shares %.1f: rates %.1f, Jain %.3f", seed, c, MaxMin(c, fairnessDemands), rates[p], index[p])
			assert.GreaterOrEqual(t, index[p], 0.95, "seed %d at %v msg/s", seed, c)
		}
	}
}

// tcpRun is Malekpour11 §IV-D (Fig. 10) in virtual time: a content flow
// (400 msg/s offered, all matching) on a 125 msg/s bottleneck (1 Mbit/s of
// 1 KB), joined by a TCP Reno flow at 20 s.
func tcpRun(seed uint64) sharedOutcome {
	return sharedRun{
		cfg:      DefaultConfig(),
		pairs:    []pair{{constant(400), 1}},
		capacity: constant(125),
		limit:    20, delay: 40 * time.Millisecond, duration: 80 * time.Second, seed: seed,
		tcpFrom: 20 * time.Second,
	}.run()
}

// TestSharesWithTCP is Malekpour11 §IV-D (Fig. 10) in virtual time: when a
// TCP flow joins, the content flow makes room within 2 s, and the two
// share the link without either starving; the link stays full. (The
// paper's TCP got 5% over its fair share; here it gets about 25% over,
// docs/results/congestion.md.)
func TestSharesWithTCP(t *testing.T) {
	out := tcpRun(1)
	content, tcp := meanRate(out.delivered[0], 40, 80), meanRate(out.tcp, 40, 80)
	t.Logf("seconds 40–80: content %.1f msg/s, TCP %.1f msg/s, fair share 62.5", content, tcp)
	assert.Less(t, float64(out.delivered[0][21]), 0.8*125, "the content flow makes room within 2 s of TCP's start")
	assert.Greater(t, content, 0.5*62.5)
	assert.Greater(t, tcp, 0.5*62.5)
	assert.Greater(t, content+tcp, 0.95*125, "the link stays full")
}

// stallRun is one pair on a 250 msg/s bottleneck (400 msg/s offered)
// whose deliveries stall for stall every 3 s, nothing lost.
func stallRun(stall time.Duration) sharedOutcome {
	return sharedRun{
		cfg:      DefaultConfig(),
		pairs:    []pair{{constant(400), 1}},
		capacity: constant(250),
		limit:    20, delay: 40 * time.Millisecond, duration: 60 * time.Second, seed: 1,
		stallEvery: 3 * time.Second, stallFor: stall,
	}.run()
}

// TestStalledDeliveriesKeepTheRate: deliveries held up below the
// bottleneck for 150 or 300 ms every 3 s (a broker's peer link recovering
// a segment; nothing lost) cost the flow little. Algorithm 1 starts a
// limiting subscriber's quota from the reception rate (line 20); measured
// over the last round alone, a round the stall left empty set the quota
// to MinRate and the flow climbed back by α a round (241 and 226 msg/s
// here). The reception rate is the greater of the last two rounds', as
// TFRC's receive rate limit is (RFC 5348 §4.3), and the flow keeps 248
// and 238 msg/s.
func TestStalledDeliveriesKeepTheRate(t *testing.T) {
	for _, c := range []struct {
		stall time.Duration
		least float64
	}{
		{150 * time.Millisecond, 0.98 * 250},
		{300 * time.Millisecond, 0.94 * 250},
	} {
		out := stallRun(c.stall)
		got := meanRate(out.delivered[0], 10, 60)
		t.Logf("stall %v every 3 s: delivered %.1f msg/s of 250", c.stall, got)
		assert.GreaterOrEqual(t, got, c.least, "stall %v", c.stall)
	}
}
