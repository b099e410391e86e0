package node

import (
	"time"

	"github.com/dripmesh/drip/internal/linkstate"
)

// Bundles whose reverse path or epoch this broker cannot confirm yet
// (admitSource) wait for its routes to change, for at most
// unverifiedHoldFor: while link state floods, the neighbour that sent one
// may already route on what has not reached this broker, as a bounced
// bundle's does (bounce.go). Checked again on the new routes, an honest
// bundle passes; a forged one is dropped once its wait is over.
const (
	unverifiedHoldFor = bounceHoldFor
	// maxUnverified and maxUnverifiedBytes bound the hold, so that a
	// neighbour sending forgeries cannot hold more than that here; a
	// bundle that does not fit is dropped at once.
	maxUnverified      = 1024
	maxUnverifiedBytes = 4 << 20
)

// unverifiedBundle is a bundle waiting for the routes, in its wire form.
type unverifiedBundle struct {
	from   Link
	raw    []byte
	routes *linkstate.Table // the routes it failed on
	until  time.Time
}

// unverifiedHold is the node's bundles waiting for its routes to confirm
// their source.
type unverifiedHold = routeHold[unverifiedBundle]

func (ub unverifiedBundle) wait() (*linkstate.Table, time.Time, int) {
	return ub.routes, ub.until, len(ub.raw)
}
func (unverifiedBundle) bounds() (int, int) { return maxUnverified, maxUnverifiedBytes }

// retiredRoutesFor is how long bundles may still follow routes after this
// broker replaced them: what a change takes to reach every broker of a
// mesh of tens, across slow links and control planes that fall behind,
// and for the views of brokers that received its parts in another order
// to meet again, as when brokers leave in turn.
const retiredRoutesFor = 10 * time.Second

// maxRetiredRoutes bounds the routes kept for retiredRoutesFor: the
// latest; older ones are forgotten sooner when routes change often, as
// they do around a link that falls silent: each end's suspicion, its
// return and the cost it returns with are a table each, at every broker.
const maxRetiredRoutes = 16

// retiredRoutes are routes the node replaced, and until when bundles
// following them are taken in.
type retiredRoutes struct {
	routes *linkstate.Table
	until  time.Time
}
