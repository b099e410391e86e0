package bench

import "github.com/dripmesh/drip/internal/content"

// oracle knows every subscriber's predicate and broker and computes, for a
// message, exactly which subscribers must receive it.
//
// Evaluating every filter of every predicate costs 1,600 filter evaluations
// per message with 80 subscribers of 20 filters (about 100 µs), too much
// CPU to take from the brokers sharing the machine. So filters are indexed
// by the name of their first constraint: a constraint is satisfied only by a
// message that has its attribute (content's evaluation semantics), so only
// filters keyed by one of the message's names can match, and those are then
// evaluated in full with content.Filter.Matches. TestOracleIsExact checks
// the result against content.Predicate.Matches on every predicate.
type oracle struct {
	preds    []content.Predicate
	brokerOf []int
	byName   map[string][]filterRef
	always   []int32 // predicates with an empty filter, which matches every message
}

type filterRef struct {
	pred   int32
	filter content.Filter
}

func newOracle(preds []content.Predicate, brokerOf []int) *oracle {
	o := &oracle{preds: preds, brokerOf: brokerOf, byName: map[string][]filterRef{}}
	for j, p := range preds {
		for _, f := range p {
			if len(f) == 0 {
				o.always = append(o.always, int32(j))
				continue
			}
			o.byName[f[0].Name] = append(o.byName[f[0].Name], filterRef{pred: int32(j), filter: f})
		}
	}
	return o
}

// oracleScratch is one goroutine's working space for expect.
type oracleScratch struct {
	matched []bool // per subscriber
	seen    []bool // per broker
}

func (o *oracle) scratch(brokers int) *oracleScratch {
	return &oracleScratch{matched: make([]bool, len(o.preds)), seen: make([]bool, brokers)}
}

// expect returns, in increasing order, the subscribers whose predicate m
// satisfies, and the number of distinct brokers hosting them.
func (o *oracle) expect(m content.Message, sc *oracleScratch) (subs []int32, brokers int) {
	clear(sc.matched)
	clear(sc.seen)
	for _, j := range o.always {
		sc.matched[j] = true
	}
	for _, a := range m.Attributes() {
		for _, ref := range o.byName[a.Name] {
			if !sc.matched[ref.pred] && ref.filter.Matches(m) {
				sc.matched[ref.pred] = true
			}
		}
	}
	for j, ok := range sc.matched {
		if !ok {
			continue
		}
		subs = append(subs, int32(j))
		if b := o.brokerOf[j]; !sc.seen[b] {
			sc.seen[b] = true
			brokers++
		}
	}
	return subs, brokers
}
