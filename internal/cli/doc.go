// Package cli is the cobra command tree of the drip binary. It lives apart
// from cmd/drip so that commands can be tested in-process with their output
// captured.
package cli
