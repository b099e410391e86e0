// Package wire converts between drip's protobuf messages (api/proto/drip/v1)
// and the content data model, enforcing the size limits a broker puts on
// client input. Every error names the offending element (attribute name,
// filter and constraint index, byte offset), so a client can be told exactly
// what to fix with codes.InvalidArgument.
//
// It also holds the congestion-control wire forms (docs/design.md §12): the
// header a publishing client puts in Message.congestion, which brokers pass
// on unread but bounded (MaxCongestionHeader), and the payload of feedback
// messages, with the Bloom parameters both clients use (CongestionParams).
package wire
