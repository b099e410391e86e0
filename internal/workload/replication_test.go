package workload

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/content"
)

var replicationTable = flag.Bool("replication-table", false,
	"log the replication factors of Default and of SingleConstraint by Names (80 predicates, 8 brokers, 10,000 messages)")

func TestReplicationHandMade(t *testing.T) {
	preds := []content.Predicate{
		content.MustParse(`a = 1`),
		content.MustParse(`a = 1 || b = "x"`),
		content.MustParse(`b = "x"`),
		content.MustParse(`c > 5`),
	}
	brokerOf := []int{0, 0, 1, 2}
	msgs := []content.Message{
		content.MessageFrom(map[string]content.Value{"a": content.Int(1)}),                                                // p0 p1: 2 clients, 1 broker
		content.MessageFrom(map[string]content.Value{"b": content.String("x")}),                                           // p1 p2: 2 clients, 2 brokers
		content.MessageFrom(map[string]content.Value{"a": content.Int(1), "b": content.String("x"), "c": content.Int(9)}), // all: 4, 3
		content.MessageFrom(map[string]content.Value{"a": content.Int(2), "c": content.Int(5)}),                           // none
		content.MessageFrom(map[string]content.Value{"a": content.String("1")}),                                           // type mismatch: none
	}
	client, broker := Replication(preds, brokerOf, msgs)
	assert.InDelta(t, 8.0/5, client, 1e-12)
	assert.InDelta(t, 6.0/5, broker, 1e-12)
}

func TestReplicationEdgeCases(t *testing.T) {
	p := []content.Predicate{content.MustParse(`a = 1`)}
	client, broker := Replication(p, []int{0}, nil)
	assert.Zero(t, client)
	assert.Zero(t, broker)
	assert.PanicsWithValue(t, "workload: Replication: 2 brokers given for 1 predicates", func() {
		Replication(p, []int{0, 1}, nil)
	})
}

// referenceReplication recomputes the factors with a fresh set per message.
func referenceReplication(preds []content.Predicate, brokerOf []int, msgs []content.Message) (float64, float64) {
	var clients, brokers int
	for _, m := range msgs {
		set := map[int]bool{}
		for i, p := range preds {
			if p.Matches(m) {
				clients++
				set[brokerOf[i]] = true
			}
		}
		brokers += len(set)
	}
	return float64(clients) / float64(len(msgs)), float64(brokers) / float64(len(msgs))
}

func TestReplicationMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for seed := range int64(20) {
		c := SingleConstraint()
		c.Seed, c.Names, c.FiltersPerPredicate = seed, 10+r.IntN(40), 1+r.IntN(10)
		g := mustNew(t, c)
		preds := g.Predicates(1 + r.IntN(30))
		brokerOf := make([]int, len(preds))
		for i := range brokerOf {
			brokerOf[i] = r.IntN(9) - 4 // broker IDs need not be dense or positive
		}
		msgs := g.Messages(1 + r.IntN(200))
		wc, wb := referenceReplication(preds, brokerOf, msgs)
		gc, gb := Replication(preds, brokerOf, msgs)
		require.Equal(t, wc, gc, "seed %d", seed)
		require.Equal(t, wb, gb, "seed %d", seed)
	}
}

func TestRoundRobin(t *testing.T) {
	assert.Equal(t, []int{0, 1, 2, 0, 1}, RoundRobin(5, 3))
	assert.Empty(t, RoundRobin(0, 3))
	assert.Panics(t, func() { RoundRobin(5, 0) })
	// Carzaniga09 §5.2.1: 80 clients uniformly over 8 sites, 10 each.
	per := map[int]int{}
	for _, b := range RoundRobin(80, 8) {
		per[b]++
	}
	assert.Equal(t, map[int]int{0: 10, 1: 10, 2: 10, 3: 10, 4: 10, 5: 10, 6: 10, 7: 10}, per)
}

// measure returns the replication factors of c over the comparative setup
// of Carzaniga09 §5.2.1: 80 clients with one predicate each, 10 on each of 8
// brokers.
func measure(t testing.TB, c Config, messages int) (client, broker float64) {
	g := mustNew(t, c)
	return Replication(g.Predicates(80), RoundRobin(80, 8), g.Messages(messages))
}

// Carzaniga09 §5.2.2: the names knob trades matching probability; more names
// means a message carries a smaller share of them and fewer constraints
// can match.
func TestMoreNamesLowerReplication(t *testing.T) {
	tests := []struct {
		preset string
		config func() Config
		names  []int
	}{
		{"SingleConstraint", SingleConstraint, []int{10, 20, 40, 80, 200}},
		{"Default", Default, []int{10, 20, 40, 80}},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			lastClient, lastBroker := 1e9, 1e9
			for _, n := range tt.names {
				c := tt.config()
				c.Names = n
				client, broker := measure(t, c, 1000)
				t.Logf("Names=%d: client %.2f, broker %.2f", n, client, broker)
				assert.Less(t, client, lastClient, "Names=%d", n)
				assert.LessOrEqual(t, broker, lastBroker, "Names=%d", n)
				assert.LessOrEqual(t, broker, client, "Names=%d", n)
				lastClient, lastBroker = client, broker
			}
		})
	}
}

// Carzaniga09 §5.1.4 Fig. 2: with 80 clients on 8 brokers the comparative
// workload has client replication 4.2 (5% of 80) and broker replication 3.3.
func TestSingleConstraintReproducesFig2(t *testing.T) {
	client, broker := measure(t, SingleConstraint(), 5000)
	assert.InDelta(t, 4.2, client, 0.5)
	assert.InDelta(t, 3.3, broker, 0.4)
}

// TestReplicationTable produces the table in SingleConstraint's doc comment:
//
//	go test ./internal/workload -run ReplicationTable -v -args -replication-table
func TestReplicationTable(t *testing.T) {
	if !*replicationTable {
		t.Skip("run with -args -replication-table")
	}
	const seeds = 5
	row := func(label string, c Config) {
		var sc, sb float64
		for s := int64(1); s <= seeds; s++ {
			c.Seed = s
			client, broker := measure(t, c, 10000)
			sc += client
			sb += broker
		}
		t.Logf("%-16s Names=%3d  client %5.2f (%4.1f%% of 80)  broker %4.2f (of 8)",
			label, c.Names, sc/seeds, sc/seeds/80*100, sb/seeds)
	}
	row("Default", Default())
	for _, n := range []int{10, 20, 40, 80, 160, 190, 200, 210, 230} {
		c := SingleConstraint()
		c.Names = n
		row("SingleConstraint", c)
	}
}

func ExampleReplication() {
	g, err := New(SingleConstraint())
	if err != nil {
		panic(err)
	}
	preds := g.Predicates(80)     // one per client
	brokerOf := RoundRobin(80, 8) // 10 clients on each of 8 brokers
	client, broker := Replication(preds, brokerOf, g.Messages(1000))
	fmt.Printf("client %.1f, broker %.1f\n", client, broker)
	// Output: client 4.6, broker 3.6
}

func BenchmarkReplication(b *testing.B) {
	g := mustNew(b, SingleConstraint())
	preds, brokerOf, msgs := g.Predicates(80), RoundRobin(80, 8), g.Messages(100)
	b.ReportAllocs()
	for b.Loop() {
		Replication(preds, brokerOf, msgs)
	}
}
