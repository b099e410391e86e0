package rawcodec

import (
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Raw is a message already in its wire form. Codec sends its bytes as they
// are, and receives a message into it unparsed, so that the data path
// encodes a delivery once for all its subscribers and decodes a publish
// request without building protobuf objects.
//
// A sent Raw whose Pool is set gives B back to that pool once gRPC has
// written it out (or dropped it): the sender must not touch B after the
// send, and in return encodes its next message into a recycled buffer
// instead of a new one.
type Raw struct {
	B    []byte
	Pool mem.BufferPool
}

// Codec is gRPC's protobuf codec, passing Raw through. Brokers serve with
// it (grpc.ForceServerCodecV2) and clients call with it
// (grpc.ForceCodecV2); the bytes on the wire are protobuf either way, so
// peers that use the plain codec interoperate.
type Codec struct{}

var protoCodec = encoding.GetCodecV2(grpcproto.Name)

// Name is the codec's content subtype: protobuf's.
func (Codec) Name() string { return grpcproto.Name }

// Marshal encodes v; a *Raw is its bytes.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*Raw); ok {
		if r.Pool != nil {
			b := r.B
			return mem.BufferSlice{mem.NewBuffer(&b, r.Pool)}, nil
		}
		return mem.BufferSlice{mem.SliceBuffer(r.B)}, nil
	}
	return protoCodec.Marshal(v)
}

// Unmarshal decodes data into v; a *Raw gets a copy of the bytes, which it
// then owns.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*Raw); ok {
		r.B = data.Materialize()
		return nil
	}
	return protoCodec.Unmarshal(data, v)
}
