package wire

// MessageLimits bound a published message. Zero means no limit.
type MessageLimits struct {
	MaxAttributes int // attributes per message
	MaxName       int // bytes of an attribute name
	MaxString     int // bytes of a string value
	MaxPayload    int // bytes of the opaque payload
}

// DefaultMessageLimits suit messages of tens of attributes and payloads up
// to 1 MiB, well under gRPC's default 4 MiB frame.
func DefaultMessageLimits() MessageLimits {
	return MessageLimits{MaxAttributes: 256, MaxName: 256, MaxString: 64 << 10, MaxPayload: 1 << 20}
}
