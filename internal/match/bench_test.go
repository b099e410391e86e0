package match

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/workload"
)

// benchSetup is one installed workload: the predicates in an index and in a
// plain slice for the one-by-one baseline, and a pool of messages.
type benchSetup struct {
	x     *Index
	preds []content.Predicate
	msgs  []content.Message
}

func newBenchSetup(b *testing.B, cfg workload.Config, predicates int) benchSetup {
	g, err := workload.New(cfg)
	require.NoError(b, err)
	s := benchSetup{x: New(), preds: g.Predicates(predicates), msgs: g.Messages(1000)}
	for i, p := range s.preds {
		require.NoError(b, s.x.Add(SubscriberID(i), p))
	}
	return s
}

// runIndex measures Match; see cpuTimer.stop for what it reports.
func (s benchSetup) runIndex(b *testing.B) {
	dst := make([]SubscriberID, 0, len(s.preds))
	matched := 0
	t := startTimer(b)
	for i := 0; i < b.N; i++ {
		dst = s.x.Match(s.msgs[i%len(s.msgs)], dst[:0])
		matched += len(dst)
	}
	t.stop(b, matched)
}

// runOneByOne is the JMS way (Gorton03 §3.3, Fig. 3): every predicate
// evaluated in isolation, each filter until its first failing constraint.
func (s benchSetup) runOneByOne(b *testing.B) {
	dst := make([]SubscriberID, 0, len(s.preds))
	matched := 0
	t := startTimer(b)
	for i := 0; i < b.N; i++ {
		m := s.msgs[i%len(s.msgs)]
		dst = dst[:0]
		for id, p := range s.preds {
			if p.Matches(m) {
				dst = append(dst, SubscriberID(id))
			}
		}
		matched += len(dst)
	}
	t.stop(b, matched)
}

// cpuTimer adds to a benchmark the CPU time its goroutine's thread spent,
// which on a shared machine is a steadier measure than wall time.
type cpuTimer struct {
	start time.Duration
	ok    bool
}

// startTimer locks the benchmark to its thread, so that the thread's CPU
// time is the loop's, and starts the clocks.
func startTimer(b *testing.B) cpuTimer {
	runtime.LockOSThread()
	b.ReportAllocs()
	start, ok := threadCPU()
	b.ResetTimer()
	return cpuTimer{start, ok}
}

// stop reports cpu-ns/op (where the OS tells), msgs/s on one core (from CPU
// time where available, else wall time) and matches/msg, the mean number of
// subscribers matched: the replication r of Henjes07's cost model.
func (t cpuTimer) stop(b *testing.B, matched int) {
	b.StopTimer()
	end, _ := threadCPU()
	runtime.UnlockOSThread()
	elapsed := b.Elapsed()
	if t.ok {
		elapsed = end - t.start
		b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(matched)/float64(b.N), "matches/msg")
}

// benchWorkload runs index and one-by-one on cfg at each number of
// installed filters (FiltersPerPredicate per predicate).
func benchWorkload(b *testing.B, cfg workload.Config, filters ...int) {
	for _, n := range filters {
		s := newBenchSetup(b, cfg, n/cfg.FiltersPerPredicate)
		b.Run(fmt.Sprintf("filters=%d/index", n), s.runIndex)
		b.Run(fmt.Sprintf("filters=%d/onebyone", n), s.runOneByOne)
	}
}

// BenchmarkPaper is the workload of Carzaniga09 §5.1.4: messages of 10
// attributes (60% strings over 200 terms, 40% ints in [0,100]), predicates
// of 20 filters of 1–5 constraints.
func BenchmarkPaper(b *testing.B) {
	benchWorkload(b, workload.Default(), 1000, 10000, 100000)
}

// BenchmarkSingleConstraint is the comparative variant of Carzaniga09 §5.1.4:
// one constraint per filter over 200 names.
func BenchmarkSingleConstraint(b *testing.B) {
	benchWorkload(b, workload.SingleConstraint(), 1000, 10000, 100000)
}

// BenchmarkConstraintsPerFilter holds the number of filters at 10,000 and
// makes every filter k constraints long (Gorton03 §4, Henjes07 §4.4): the
// index's cost should stay flat while one-by-one evaluation does more work
// per filter that passes its first constraints.
func BenchmarkConstraintsPerFilter(b *testing.B) {
	for _, k := range []int{1, 5} {
		cfg := workload.Default()
		cfg.MinConstraints, cfg.MaxConstraints = k, k
		s := newBenchSetup(b, cfg, 10000/cfg.FiltersPerPredicate)
		b.Run(fmt.Sprintf("constraints=%d/index", k), s.runIndex)
		b.Run(fmt.Sprintf("constraints=%d/onebyone", k), s.runOneByOne)
	}
}

// BenchmarkConjunctionLength is Henjes07 §4.4's experiment (3) on the paper
// workload's messages: filters of k constraints where only the last one
// decides (a00 = <term>) and the k-1 before it hold for every message and
// differ from filter to filter, so neither early rejection nor sharing
// helps one-by-one evaluation. Replication is the same for every k. With
// k = 1 the 10,000 filters collapse into at most 200 distinct ones; from
// k = 2 on they are all distinct, so 2 against 5 isolates the conjunction's
// length (Gorton03 §4: it must not make the matcher collapse).
func BenchmarkConjunctionLength(b *testing.B) {
	cfg := workload.Default()
	g, err := workload.New(cfg)
	require.NoError(b, err)
	msgs := g.Messages(1000)
	// workload names its attributes a00, a01, ...: a00-a05 are strings and
	// a06-a09 ints in [0, IntMax] under Default.
	always := func(j int, r *rand.Rand) content.Constraint {
		t := int64(r.IntN(1_000_000))
		switch j {
		case 1:
			return content.Constraint{Name: "a06", Op: content.OpGt, Value: content.Int(-1 - t)}
		case 2:
			return content.Constraint{Name: "a07", Op: content.OpGe, Value: content.Int(-1 - t)}
		case 3:
			return content.Constraint{Name: "a08", Op: content.OpNe, Value: content.Int(-1 - t)}
		default:
			return content.Constraint{Name: "a09", Op: content.OpLt, Value: content.Int(cfg.IntMax + 1 + t)}
		}
	}
	for _, k := range []int{1, 2, 5} {
		r := rand.New(rand.NewPCG(5, 6))
		s := benchSetup{x: New(), msgs: msgs}
		for i := range 10000 {
			f := make(content.Filter, 0, k)
			for j := 1; j < k; j++ {
				f = append(f, always(j, r))
			}
			term, ok := msgs[r.IntN(len(msgs))].Get("a00")
			require.True(b, ok && term.Kind() == content.KindString, "workload's a00 is a string")
			f = append(f, content.Constraint{Name: "a00", Op: content.OpEq, Value: term})
			p := content.Predicate{f}
			s.preds = append(s.preds, p)
			require.NoError(b, s.x.Add(SubscriberID(i), p))
		}
		b.Run(fmt.Sprintf("constraints=%d/index", k), s.runIndex)
		b.Run(fmt.Sprintf("constraints=%d/onebyone", k), s.runOneByOne)
	}
}

// BenchmarkBroadConstraints installs 10,000 filters of the form
// sym = <term> && price > <threshold>, thresholds distinct floats: a stock
// quote subscription. A quote satisfies half of the price constraints, so
// enumerating them would cost O(filters) per message; the index checks a
// price constraint only for the filters whose sym matched.
func BenchmarkBroadConstraints(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	s := benchSetup{x: New()}
	terms := make([]string, 200)
	for i := range terms {
		terms[i] = fmt.Sprintf("SYM%03d", i)
	}
	for i := range 10000 {
		p := content.Predicate{{
			{Name: "sym", Op: content.OpEq, Value: content.String(terms[r.IntN(len(terms))])},
			{Name: "price", Op: content.OpGt, Value: content.Float(r.Float64() * 1000)},
		}}
		s.preds = append(s.preds, p)
		require.NoError(b, s.x.Add(SubscriberID(i), p))
	}
	for range 1000 {
		s.msgs = append(s.msgs, content.MessageFrom(map[string]content.Value{
			"sym":   content.String(terms[r.IntN(len(terms))]),
			"price": content.Float(r.Float64() * 1000),
		}))
	}
	b.Run("index", s.runIndex)
	b.Run("onebyone", s.runOneByOne)
}

// The message and selectors of Gorton03 §4.1 (Fig. 5): selector expense
// level 1 is an equality on a short field, 2 a substring of a short field,
// 3 a substring near the start of the long body, 4 one near its end.
var (
	seed003Message = content.MessageFrom(map[string]content.Value{
		"From":    content.String("Someone (Someone@yahoo.com)"),
		"Date":    content.String("2002-12-28 21:04:22 PST"),
		"Subject": content.String("I have a question..."),
		"Body": content.String("I covered my daffodils, garlic, and rhubarb last night in hopes of " +
			"saving them from freezing. Should one uncover them during the day if the temp is above " +
			"freezing, and re-cover them in the late afternoon? Or can I just leave them covered for " +
			"a few days till the nights get warmer? (may be a moot point after I look at them...) "),
	})
	seed003Selectors = []string{
		`From = "Someone (Someone@yahoo.com)"`,
		`Subject contains "question"`,
		`Body contains "garlic"`,
		`Body contains "warmer"`,
	}
)

// BenchmarkSeed003 reproduces the scenario of Gorton03 §4.1–4.2: every
// subscriber registers the same selector and every message matches it. The
// index evaluates the shared selector once, so its cost per message is the
// reporting of the subscribers alone, the r·t_tx term of Henjes07 §4.5.
func BenchmarkSeed003(b *testing.B) {
	for level, sel := range seed003Selectors {
		for _, subs := range []int{10, 400} {
			s := benchSetup{x: New(), msgs: []content.Message{seed003Message}}
			p := content.MustParse(sel)
			for i := range subs {
				s.preds = append(s.preds, p)
				require.NoError(b, s.x.Add(SubscriberID(i), p))
			}
			b.Run(fmt.Sprintf("level=%d/subs=%d/index", level+1, subs), s.runIndex)
			b.Run(fmt.Sprintf("level=%d/subs=%d/onebyone", level+1, subs), s.runOneByOne)
		}
	}
}

// BenchmarkReplace measures subscription churn: one subscriber of the paper
// workload at 10,000 filters swaps between two predicates of 20 filters.
func BenchmarkReplace(b *testing.B) {
	cfg := workload.Default()
	s := newBenchSetup(b, cfg, 10000/cfg.FiltersPerPredicate)
	cfg.Seed = 99 // predicates unlike the installed ones
	g, err := workload.New(cfg)
	require.NoError(b, err)
	alt := g.Predicates(2)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.x.Replace(0, alt[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInertFilters installs filters that share the message's
// equality but fail on a numeric bound (symbol = "DRIP" && n < -K, one K
// per filter), beside the one subscription the message matches: the
// sorted bound groups should keep the cost near that of the plain case,
// however many such filters there are.
func BenchmarkInertFilters(b *testing.B) {
	m := content.MessageFrom(map[string]content.Value{"symbol": content.String("DRIP"), "n": content.Int(5)})
	for _, inert := range []int{0, 100, 10000} {
		s := benchSetup{x: New(), msgs: []content.Message{m}}
		s.preds = append(s.preds, content.MustParse(`symbol = "DRIP"`))
		for k := range inert {
			s.preds = append(s.preds, content.MustParse(fmt.Sprintf(`symbol = "DRIP" && n < %d`, -k-1)))
		}
		for i, p := range s.preds {
			require.NoError(b, s.x.Add(SubscriberID(i), p))
		}
		b.Run(fmt.Sprintf("inert=%d", inert), s.runIndex)
	}
}
