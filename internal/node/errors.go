package node

import (
	"errors"
	"fmt"
)

// The errors a node gives its clients' requests. They say what is wrong in
// the node's terms; the client service maps them to the API's codes
// (Unavailable for ErrStopped and ErrDraining, ResourceExhausted for a
// *LimitError, InvalidArgument for an *InvalidError).
var (
	// ErrStopped: the node has ended its subscriptions and takes no more.
	ErrStopped = errors.New("broker is shutting down")
	// ErrDraining: the node is leaving the mesh; its clients move to
	// other brokers.
	ErrDraining = errors.New("broker is draining: subscribe at another broker")
)

// LimitError is a request the node refuses because it holds as much of
// something as it may.
type LimitError struct {
	What  string // what is at its limit, plural ("subscriptions")
	Limit int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("broker holds its limit of %d %s", e.Limit, e.What)
}

// InvalidError is a request the node refuses for what it asks: a predicate
// or a deadline outside what the node accepts.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }

func (e *InvalidError) Unwrap() error { return e.Err }

func invalid(format string, args ...any) error {
	return &InvalidError{fmt.Errorf(format, args...)}
}
