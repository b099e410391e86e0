// Package cli is the cobra command tree of the driplab binary: the
// emulated-WAN lab (driplab lab) and the comparative experiments of
// Carzaniga09 §5 (driplab experiment). It lives apart from the drip
// binary's commands (internal/cli) so that the broker ships without the
// testbed's plotting, NATS client and STOMP code; it reuses their logging
// and signal handling, so both binaries behave alike.
package cli
