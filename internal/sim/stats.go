package sim

import (
	"cmp"
	"slices"

	"github.com/dripmesh/drip/internal/linkstate"
)

// MessageKind classifies control messages for the counters.
type MessageKind uint8

// The kinds, one per linkstate message type.
const (
	KindHello MessageKind = iota
	KindLSA
	KindPredAd
	KindSummary
	KindRequest
	numKinds
)

var kindNames = [numKinds]string{"hello", "lsa", "predad", "summary", "request"}

// String returns the kind's name.
func (k MessageKind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

func kindOf(m linkstate.Message) MessageKind {
	switch m.(type) {
	case *linkstate.Hello:
		return KindHello
	case *linkstate.LSA:
		return KindLSA
	case *linkstate.PredAd:
		return KindPredAd
	case *linkstate.DBSummary:
		return KindSummary
	}
	return KindRequest
}

// Counter is a number of messages and their WireSize bytes.
type Counter struct {
	Messages int64
	Bytes    int64
}

// LinkStats counts the control traffic sent on one direction of a link,
// including messages then lost.
type LinkStats struct {
	Counter
	// Dropped counts messages lost to drops, cuts and partitions.
	Dropped int64
	ByKind  [numKinds]Counter
}

func (s *LinkStats) count(m linkstate.Message) {
	b := int64(m.WireSize())
	k := kindOf(m)
	s.Messages++
	s.Bytes += b
	s.ByKind[k].Messages++
	s.ByKind[k].Bytes += b
}

func (s *LinkStats) add(o LinkStats) {
	s.Messages += o.Messages
	s.Bytes += o.Bytes
	s.Dropped += o.Dropped
	for i := range s.ByKind {
		s.ByKind[i].Messages += o.ByKind[i].Messages
		s.ByKind[i].Bytes += o.ByKind[i].Bytes
	}
}

// DirectedStats are the counters of the direction From→To of a link.
type DirectedStats struct {
	From, To uint32
	LinkStats
}

// Stats returns the counters of the direction from→to.
func (nw *Network) Stats(from, to uint32) LinkStats {
	return nw.link(from, to).out(from).stats
}

// AllStats returns the counters of every link direction, ordered by
// (From, To).
func (nw *Network) AllStats() []DirectedStats {
	var out []DirectedStats
	for k, l := range nw.links {
		out = append(out, DirectedStats{From: k[0], To: k[1], LinkStats: l.out(k[0]).stats})
	}
	slices.SortFunc(out, func(x, y DirectedStats) int {
		return cmp.Or(cmp.Compare(x.From, y.From), cmp.Compare(x.To, y.To))
	})
	return out
}

// TotalStats sums the counters of all links.
func (nw *Network) TotalStats() LinkStats {
	var t LinkStats
	for k, l := range nw.links {
		if k[0] == l.a {
			t.add(l.dir[0].stats)
			t.add(l.dir[1].stats)
		}
	}
	return t
}

// ResetStats zeroes all counters, to measure a window of a run.
func (nw *Network) ResetStats() {
	for _, l := range nw.links {
		l.dir[0].stats, l.dir[1].stats = LinkStats{}, LinkStats{}
	}
}
