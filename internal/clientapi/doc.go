// Package clientapi converts between the client API's protobuf messages
// (api/proto/drip/v1) and the content data model, enforcing the size limits
// a broker puts on client input. Every error names the offending element
// (attribute name, filter and constraint index, byte offset), so a client
// can be told exactly what to fix with codes.InvalidArgument. It also
// encodes the payload of congestion-control feedback messages
// (docs/design.md §12).
package clientapi
