package node

import (
	"cmp"
	"slices"

	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/linkstate"
)

// HasRoutes reports whether the node has joined the mesh: it has no
// configured peers, or it holds a neighbour's database through a finished
// exchange (an advertised adjacency), so its routes are as complete as
// that neighbour's.
func (n *Node) HasRoutes() bool { return len(n.cfg.Peers) == 0 || n.adjacencyAdvertised }

// Linked counts the configured neighbours (Config.Peers) whose link routes
// both ways: this node advertises it (their database exchange is done) and
// the neighbour's own advertisement lists this node. Only such a link is in
// every router's shortest paths.
func (n *Node) Linked() (linked, configured int) {
	advertised := make(map[uint32]bool, len(n.cfg.Peers))
	for _, nb := range n.ls.Neighbors() {
		advertised[nb.ID] = nb.Advertised
	}
	for _, p := range n.cfg.Peers {
		if advertised[p.ID] && n.listedBy(p.ID) {
			linked++
		}
	}
	return linked, len(n.cfg.Peers)
}

// listedBy says whether router id's advertisement lists a link to this node.
func (n *Node) listedBy(id uint32) bool {
	lsa, ok := n.ls.LSA(id)
	if !ok || lsa.Withdrawn {
		return false
	}
	_, found := slices.BinarySearchFunc(lsa.Links, n.cfg.ID, func(l linkstate.Link, id uint32) int { return cmp.Compare(l.Neighbor, id) })
	return found
}

// Joined reports whether the node has joined the mesh: it is linked both
// ways to every configured neighbour (Linked), or JoinTimeout has passed
// since it started, as the first broker of a mesh, or one whose neighbour
// is down, must serve anyway; and its PREDICATES index covers the
// advertisements it held at that moment. Once joined it stays joined, and
// the first call that finds it says so in the log. Only then may the next
// broker of a rolling update leave: a broker ready after its first
// neighbour's database, as it once was, could be that neighbour's only link
// to the mesh when Kubernetes took the neighbour down next, and dropped what
// it was handed for want of a route (docs/design.md §10, "Ready means
// joined"). And only then may it take publishers: a message matched
// against an index built before the database arrived — seconds before it
// could be rebuilt, on a broker short of CPU — reaches none of the brokers
// missing from it, and no broker counts that as a drop. A control-plane
// call.
func (n *Node) Joined() bool {
	if n.joined {
		return true
	}
	if !n.joinDue {
		linked, configured := n.Linked()
		switch {
		case linked == configured:
		case n.clock.Since(n.start) < n.cfg.JoinTimeout:
			return false
		case n.HasRoutes():
			n.log.Warn("not linked to every neighbour after the join timeout; serving with the routes it has",
				zap.Int("linked", linked), zap.Int("neighbours", configured), zap.Duration("join_timeout", n.cfg.JoinTimeout))
		default:
			n.log.Warn("no neighbour's database after the join timeout; serving anyway", zap.Duration("join_timeout", n.cfg.JoinTimeout))
		}
		// Not a moving target: what arrives from now on is the mesh's
		// ordinary churn, which the index follows as it always does.
		n.joinDue, n.joinGen = true, n.predsGen
	}
	if n.indexGen < n.joinGen {
		return false
	}
	n.joined = true
	linked, configured := n.Linked()
	n.log.Info("joined the mesh", zap.Duration("after", n.clock.Since(n.start)), zap.Int("neighbours", configured), zap.Int("linked", linked))
	return true
}
