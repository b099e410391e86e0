package node

import (
	"sync"
	"sync/atomic"
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

// unverifiedHold is the node's waiting bundles, shared by the link readers
// that hold and the goroutine that releases (Forwarder.ReleaseHeld).
type unverifiedHold struct {
	mu    sync.Mutex
	held  []unverifiedBundle
	bytes int
	count atomic.Int64 // len(held), read without the lock
}

// add holds u unless the hold is full.
func (h *unverifiedHold) add(u unverifiedBundle) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.held) >= maxUnverified || h.bytes+len(u.raw) > maxUnverifiedBytes {
		return false
	}
	h.held = append(h.held, u)
	h.bytes += len(u.raw)
	h.count.Store(int64(len(h.held)))
	return true
}

// take removes and returns the bundles that are due: failed on other
// routes than routes, or held until now. all takes every one.
func (h *unverifiedHold) take(routes *linkstate.Table, now time.Time, all bool) []unverifiedBundle {
	h.mu.Lock()
	defer h.mu.Unlock()
	var due []unverifiedBundle
	kept := h.held[:0]
	for _, u := range h.held {
		if all || u.routes != routes || !now.Before(u.until) {
			due = append(due, u)
			h.bytes -= len(u.raw)
		} else {
			kept = append(kept, u)
		}
	}
	clear(h.held[len(kept):])
	h.held = kept
	h.count.Store(int64(len(kept)))
	return due
}

// retiredRoutesFor is how long bundles may still follow routes after this
// broker replaced them: what a change takes to reach every broker of a
// mesh of tens, across slow links and control planes that fall behind,
// and for the views of brokers that received its parts in another order
// to meet again, as when brokers leave in turn.
const retiredRoutesFor = 10 * time.Second

// maxRetiredRoutes bounds the routes kept for retiredRoutesFor: the
// latest; older ones are forgotten sooner when routes change often.
const maxRetiredRoutes = 8

// retiredRoutes are routes the node replaced, and until when bundles
// following them are taken in.
type retiredRoutes struct {
	routes *linkstate.Table
	until  time.Time
}
