package node

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/dripmesh/drip/internal/linkstate"
)

// routeHold is bundles waiting for the node's routes to change, the bounced
// ones (bounce.go) and those whose source the routes do not confirm yet
// (unverified.go), shared by the link readers that hold and the goroutine
// that releases (Forwarder.ReleaseHeld).
type routeHold[T waiting] struct {
	mu    sync.Mutex
	held  []T
	bytes int
	count atomic.Int64 // len(held), read without the lock
}

// waiting is a bundle in a routeHold.
type waiting interface {
	// wait is the routes it was decided on, until when it waits at most,
	// and its size in bytes.
	wait() (routes *linkstate.Table, until time.Time, size int)
	// bounds are the most bundles and bytes a hold of its kind keeps.
	bounds() (count, bytes int)
}

// add holds w unless the hold is full.
func (h *routeHold[T]) add(w T) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, _, size := w.wait()
	maxCount, maxBytes := w.bounds()
	if len(h.held) >= maxCount || h.bytes+size > maxBytes {
		return false
	}
	h.held = append(h.held, w)
	h.bytes += size
	h.count.Store(int64(len(h.held)))
	return true
}

// take removes and returns the bundles that are due: decided on other
// routes than routes, or held until now. all takes every one.
func (h *routeHold[T]) take(routes *linkstate.Table, now time.Time, all bool) []T {
	h.mu.Lock()
	defer h.mu.Unlock()
	var due []T
	kept := h.held[:0]
	for _, w := range h.held {
		on, until, size := w.wait()
		if all || on != routes || !now.Before(until) {
			due = append(due, w)
			h.bytes -= size
		} else {
			kept = append(kept, w)
		}
	}
	clear(h.held[len(kept):])
	h.held = kept
	h.count.Store(int64(len(kept)))
	return due
}
