// Package rawcodec is the gRPC codec of drip's client and peer APIs:
// protobuf, except that a message already in its wire form (Raw) passes
// through as bytes, both ways, so that the data path encodes a delivery
// once for all its subscribers and decodes requests without building
// protobuf objects.
package rawcodec
