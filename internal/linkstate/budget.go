package linkstate

import "time"

// Reactive rerouting (Kim10 §2.2, docs/design.md §11).
//
// With measured costs a link's cost follows its smoothed RTT, and a change
// is advertised only past CostThreshold — at the sample that crosses it,
// or, with CostInterval, at the next periodic check: Kim10 §2.1's
// proactive best path, which switches at most once per period. Neither
// keeps a deadline: the EWMA takes several samples to follow a jump, and a
// period may be long.
//
// The driver therefore tells the node, per link, the delay budget of the
// deadline flows that use it (SetDelayBudget): the largest one-way delay
// the link may have before one of them misses its deadline — the link's
// advertised delay plus its share of the flow's latency margin, (D − d)/k.
// A sample whose one-way delay (RTT/2) exceeds the budget while the
// advertised cost is still within it is a budget violation: the node
// takes the sample as the link's new level (the EWMA restarts from it, so
// the next samples do not pull the cost back under the budget) and
// advertises it at once, bypassing the threshold and the period. SPF at
// every router then moves the flows to paths that keep their deadline.

// SetDelayBudget sets the delay budget of the link to peer: the one-way
// delay beyond which a deadline flow through it misses its deadline, as
// the driver measures the flows. 0 removes it. It applies from the next
// RTT sample, and only in CostRTT mode, where costs are delays.
func (n *Node) SetDelayBudget(peer uint32, oneWay time.Duration) {
	if nb := n.nbrs[peer]; nb != nil {
		nb.budget = max(oneWay, 0)
	}
}

// advertisedOneWay is the one-way delay a cost advertises (costs are RTTs
// in microseconds).
func advertisedOneWay(cost uint32) time.Duration {
	return time.Duration(cost) * time.Microsecond / 2
}

// budgetViolated reports whether an RTT sample breaks the link's delay
// budget while the advertised cost does not yet show it.
func (n *Node) budgetViolated(nb *neighbor, rtt time.Duration) bool {
	return n.cfg.CostMode == CostRTT && nb.budget > 0 && nb.samples > 1 &&
		rtt/2 > nb.budget && advertisedOneWay(nb.cost) <= nb.budget
}

// violation restarts the link's smoothed RTT at the sample and advertises
// it now.
func (n *Node) violation(nb *neighbor, rtt time.Duration) {
	nb.srtt = rtt
	c := rttCost(rtt, n.cfg.CostFloor)
	n.events = append(n.events, Event{Type: EventBudgetViolation, Peer: nb.id, OldCost: nb.cost, Cost: c, RTT: rtt, Budget: nb.budget})
	n.setCost(nb, c)
}

// checkCosts is the periodic best-path check of CostInterval: every
// measured cost that moved past the threshold is advertised, in one LSA.
func (n *Node) checkCosts() {
	if n.cfg.CostMode != CostRTT || n.cfg.CostInterval <= 0 || n.now < n.nextCostCheck {
		return
	}
	n.nextCostCheck = n.now + n.cfg.CostInterval
	for _, id := range n.nbrIDs {
		nb := n.nbrs[id]
		if nb.samples == 0 {
			continue
		}
		if c := rttCost(nb.srtt, n.cfg.CostFloor); beyondThreshold(c, nb.cost, n.cfg.CostThreshold) {
			n.setCost(nb, c)
		}
	}
}
