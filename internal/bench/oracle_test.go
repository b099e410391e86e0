package bench

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/workload"
)

// referenceExpect is the oracle's definition: every predicate evaluated in
// full.
func referenceExpect(preds []content.Predicate, m content.Message) []int32 {
	var out []int32
	for j, p := range preds {
		if p.Matches(m) {
			out = append(out, int32(j))
		}
	}
	return out
}

// The name-keyed oracle gives exactly what evaluating every predicate
// gives, on both workload presets over many vocabularies and seeds, and on
// hand-made edge cases (empty filters, empty predicates, type mismatches,
// "!=" on a missing attribute).
func TestOracleIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for trial := range 40 {
		c := workload.SingleConstraint()
		if trial%2 == 1 {
			c = workload.Default()
		}
		c.Seed = int64(trial)
		c.Names = c.AttrsPerMessage + r.IntN(60)
		c.MaxConstraints = min(c.MaxConstraints, c.Names)
		g, err := workload.New(c)
		require.NoError(t, err)
		preds := g.Predicates(1 + r.IntN(40))
		o := newOracle(preds, workload.RoundRobin(len(preds), 3))
		sc := o.scratch(3)
		for _, m := range g.Messages(200) {
			got, _ := o.expect(m, sc)
			require.Equal(t, referenceExpect(preds, m), got, "trial %d, message %v", trial, m)
		}
	}

	preds := []content.Predicate{
		content.MustParse(`a != 1`),
		{content.Filter{}}, // an empty filter matches everything
		{},                 // an empty predicate matches nothing
		content.MustParse(`b prefix "x" && a exists || c = 2.5`),
		content.MustParse(`a = "1"`),
	}
	o := newOracle(preds, []int{0, 0, 0, 0, 0})
	sc := o.scratch(1)
	for _, m := range []content.Message{
		content.MessageFrom(map[string]content.Value{}),
		content.MessageFrom(map[string]content.Value{"a": content.Int(2)}),
		content.MessageFrom(map[string]content.Value{"a": content.Int(1), "b": content.String("xy")}),
		content.MessageFrom(map[string]content.Value{"c": content.Int(2)}),
		content.MessageFrom(map[string]content.Value{"a": content.String("1"), "c": content.Float(2.5)}),
	} {
		got, _ := o.expect(m, sc)
		require.Equal(t, referenceExpect(preds, m), got, "message %v", m)
	}
}

// Carzaniga09 §5.1.4, Fig. 2: the oracle's mean number of matched subscribers
// and of distinct brokers per message are the workload's client and broker
// replication factors.
func TestOracleAgreesWithReplication(t *testing.T) {
	g, err := workload.New(workload.SingleConstraint())
	require.NoError(t, err)
	preds := g.Predicates(80)
	o := newOracle(preds, workload.RoundRobin(80, 8))
	sc := o.scratch(8)
	msgs := g.Messages(2000)
	var subs, brokers int
	for _, m := range msgs {
		exp, b := o.expect(m, sc)
		subs += len(exp)
		brokers += b
	}
	wantClient, wantBroker := workload.Replication(preds, o.brokerOf, msgs)
	assert.InDelta(t, wantClient, float64(subs)/2000, 1e-12)
	assert.InDelta(t, wantBroker, float64(brokers)/2000, 1e-12)
	assert.Greater(t, subs, 0)
}

func BenchmarkOracleExpect(b *testing.B) {
	for _, preset := range []struct {
		name string
		cfg  workload.Config
	}{{"single", workload.SingleConstraint()}, {"default", workload.Default()}} {
		b.Run(preset.name, func(b *testing.B) {
			g, err := workload.New(preset.cfg)
			require.NoError(b, err)
			o := newOracle(g.Predicates(80), workload.RoundRobin(80, 8))
			sc := o.scratch(8)
			msgs := g.Messages(256)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				o.expect(msgs[i%len(msgs)], sc)
				i++
			}
		})
	}
}

// BenchmarkReferenceExpect is what the index saves.
func BenchmarkReferenceExpect(b *testing.B) {
	g, err := workload.New(workload.SingleConstraint())
	require.NoError(b, err)
	preds := g.Predicates(80)
	msgs := g.Messages(256)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		referenceExpect(preds, msgs[i%len(msgs)])
		i++
	}
}
