// Package wire encodes and decodes the data plane's wire forms by hand,
// without protobuf objects: messages as publishers send them
// (DecodeMessage, which enforces the size limits a broker puts on client
// input and names the offending element), publish requests, bundles between
// brokers, and deliveries. Every form is the protobuf encoding of its
// message in api/proto/drip/v1, byte for byte, so a peer that uses the
// generated code reads it alike; the tests check that against the
// generated code. The package itself imports neither gRPC nor the
// generated code, so that the broker's core (internal/node) does not.
//
// It also holds the congestion-control header a publishing client puts in
// Message.congestion (docs/design.md §12), which brokers pass on unread but
// bounded (MaxCongestionHeader), with the Bloom parameters both clients use
// (CongestionParams).
package wire
