package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/linkstate"
)

// Inspection is a consistent view of the broker's routing state.
type Inspection struct {
	Routers    []uint32          // reachable, self included
	NextHops   map[uint32]uint32 // destination → neighbour
	Predicates map[uint32]int    // router → advertised filters
	Links      map[uint32]string // neighbour ID → name of links that are up
	LSDB       int               // entries
	Digest     uint64            // LSDB digest: equal on converged brokers
	// Pending says local subscription changes wait to be advertised or a
	// PREDICATES rebuild is due or in flight.
	Pending   bool
	Neighbors []linkstate.NeighborInfo
}

// Inspect returns the routing state (a control-plane call).
func (n *Node) Inspect() Inspection {
	t := n.ls.Routes()
	in := Inspection{
		Routers:    t.Routers(),
		NextHops:   map[uint32]uint32{},
		Predicates: map[uint32]int{},
		Links:      map[uint32]string{},
		LSDB:       n.ls.LSDBSize(),
		Digest:     n.ls.Digest(),
		Pending:    n.AdvertisementPending(),
		Neighbors:  n.ls.Neighbors(),
	}
	for _, r := range in.Routers {
		if nh, ok := t.NextHop(r); ok {
			in.NextHops[r] = nh
		}
	}
	// The data plane's view, which may trail the protocol's by up to
	// PredicateRebuildInterval.
	snap := n.preds.Load()
	for _, r := range snap.Routers() {
		f, _ := snap.Filters(r)
		in.Predicates[r] = len(f)
	}
	for id, l := range n.current {
		in.Links[id] = l.Name()
	}
	return in
}

// AdvertisementsRefused returns the counter of neighbours' advertisements
// refused for a reason (linkstate.RefusedReasons).
func (n *Node) AdvertisementsRefused(reason string) prometheus.Counter {
	return n.m.adsRefused.WithLabelValues(reason)
}

// PublishedCounter counts messages accepted from local publishers.
func (n *Node) PublishedCounter() prometheus.Counter { return n.m.published }

// DuplicatesSuppressed counts copies not passed on, by verdict (duplicate,
// stale).
func (n *Node) DuplicatesSuppressed(verdict dedup.Verdict) prometheus.Counter {
	return n.m.duplicates.WithLabelValues(verdict.String())
}

// ProtocolEvents returns the counter of the routing protocol's events of
// one type.
func (n *Node) ProtocolEvents(ev linkstate.EventType) prometheus.Counter {
	return n.m.protocolEvents.WithLabelValues(ev.String())
}

// Link returns the link the node knows to a neighbour, nil if none (a
// control-plane call).
func (n *Node) Link(peer uint32) Link { return n.current[peer] }

// Routes returns the routing table the data plane forwards with now.
func (n *Node) Routes() *linkstate.Table { return n.routes.Load() }
