package workload

import (
	"fmt"

	"github.com/dripmesh/drip/internal/content"
)

// Replication measures, over msgs, the mean number of predicates each message matches (client
// replication) and the mean number of distinct brokers hosting a matched predicate
// (brokerOf[i] = broker of predicate i) (broker replication), Carzaniga09 §5.1.4 / Fig. 2.
//
// It returns zeros for no messages and panics when brokerOf and preds differ
// in length, which is a bug in the caller.
func Replication(preds []content.Predicate, brokerOf []int, msgs []content.Message) (client, broker float64) {
	if len(brokerOf) != len(preds) {
		panic(fmt.Sprintf("workload: Replication: %d brokers given for %d predicates", len(brokerOf), len(preds)))
	}
	if len(msgs) == 0 {
		return 0, 0
	}
	// seen[b] is 1 + the index of the last message that counted broker b,
	// so the set of matched brokers needs no clearing between messages.
	seen := make(map[int]int)
	var clients, brokers int
	for mi, m := range msgs {
		for pi, p := range preds {
			if !p.Matches(m) {
				continue
			}
			clients++
			if b := brokerOf[pi]; seen[b] != mi+1 {
				seen[b] = mi + 1
				brokers++
			}
		}
	}
	n := float64(len(msgs))
	return float64(clients) / n, float64(brokers) / n
}

// RoundRobin assigns n clients to brokers 0..brokers-1 in turn, the uniform
// distribution of clients over the network of Carzaniga09 §5.1.4: client i
// goes to broker i mod brokers. It panics when brokers < 1.
func RoundRobin(n, brokers int) []int {
	if brokers < 1 {
		panic(fmt.Sprintf("workload: RoundRobin: %d brokers, want at least 1", brokers))
	}
	out := make([]int, n)
	for i := range out {
		out[i] = i % brokers
	}
	return out
}
