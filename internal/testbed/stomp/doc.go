// Package stomp is a minimal STOMP 1.2 client: enough to drive Apache
// ActiveMQ from the experiment runner (internal/testbed/systems) the way Carzaniga09
// §5.1.3 drives it, with non-persistent messages sent to one topic and
// non-durable subscriptions that carry a JMS selector.
//
// It speaks the protocol of https://stomp.github.io/stomp-specification-1.2.html:
// CONNECT/CONNECTED with heart-beats off, SEND with arbitrary headers and a
// content-length body, SUBSCRIBE with a `selector` header and auto
// acknowledgement, MESSAGE dispatch by subscription id, RECEIPT for
// SUBSCRIBE and DISCONNECT, and ERROR. Header names and values are escaped
// as the specification says (\\ \n \r \c), except in CONNECT and CONNECTED
// frames, which are never escaped.
//
// The frame codec (Frame, Reader, AppendFrame) is pure and fuzzed; Conn
// adds one reader goroutine per connection. The module github.com/go-stomp/stomp
// is not available to this build, hence this package.
package stomp
