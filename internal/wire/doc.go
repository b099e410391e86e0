// Package wire converts between drip's protobuf messages (api/proto/drip/v1)
// and the content data model, enforcing the size limits a broker puts on
// client input. Every error names the offending element (attribute name,
// filter and constraint index, byte offset), so a client can be told exactly
// what to fix with codes.InvalidArgument.
package wire
