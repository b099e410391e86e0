// Package transport carries drip.v1.Peer frames between neighbouring
// brokers behind a narrow interface (Conn, Dialer), with a gRPC
// implementation for production and an in-memory one (MemNetwork) for
// tests, in the manner of hashicorp/memberlist's Transport and MockNetwork.
//
// A Conn exists only after the Open handshake: each side's first frame
// introduces it (protocol version, mesh name, router ID, Bloom parameters)
// and Compatible decides whether the two may link. It also provides Queue,
// the per-link send queue that keeps control traffic ahead of data and
// bounds data in bytes (docs/design.md §4), and the link's own wire forms:
// frames (AppendFrame, ParseFrame), link-state control messages as protobuf
// (ControlToProto, ControlFromProto), predicate advertisements as deltas
// against what the link last carried (AdEncoder, AdDecoder), and the
// compression both ends agreed on. A Link sends an empty frame when it has
// been idle for its keepalive interval, so that the neighbour can tell a
// failed link from an idle one, and keeps what it sent last (Recent) for
// the broker to send again around it if it fails silently.
package transport
