package drp

// Routing is the unicast state DRP forwards with (Carzaniga09 §2.2, the UNICAST
// table), seen from one router. linkstate provides it; tests use fakes.
type Routing interface {
	// Self is the router making the decision.
	Self() uint32
	// NextHop is the neighbour on the shortest path to dst; ok is false when
	// dst is unreachable or dst == Self().
	NextHop(dst uint32) (next uint32, ok bool)
	// TreeChildren lists Self's children in the shortest-path tree rooted
	// at source, in ascending order, for reverse-path broadcast (§2.3).
	// Every router must derive the tree from the same database with the
	// same tie-breaking, so that the lists of all routers form one tree and
	// a broadcast reaches each router once. Callers only read the slice.
	TreeChildren(source uint32) []uint32
	// Known is the number of reachable routers, Self included.
	Known() int
}
