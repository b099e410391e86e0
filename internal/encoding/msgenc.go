package encoding

import "github.com/dripmesh/drip/internal/content"

// MessageEncoder is Params.EncodeMessage for one goroutine that encodes a
// stream of messages. Under cat-v2 most of a message's encoding is its fine
// categories — a string's bytes and pairs, a number's trie nodes, a few
// dozen hashes each — and they depend only on the attribute's name and on
// the string, or on the number's trie key, which a stream keeps repeating:
// the same symbols and regions, counters and prices close enough to share a
// key. So the encoder remembers the bits of the attribute values it met
// last, in a small direct-mapped cache whose keys are compared exactly: a
// string's bits whole, coarse and fine, since its key is its name and
// value; a number's fine bits, hashing only its coarse categories again
// (the equality category holds the exact number, which rarely repeats). The
// Blooms are EncodeMessage's, bit for bit (TestMessageEncoderMatchesEncodeMessage).
//
// It is not safe for concurrent use. Its cache, about 10 KB, is allocated
// by the first message that needs it.
type MessageEncoder struct {
	p     Params
	lo    int // the first word fine categories hash into
	slots *[encoderSlots]fineSlot
}

const (
	// encoderSlots is the cache's size, a power of two: enough for the
	// distinct values of a publisher's few attributes, small enough for
	// every publishing stream of a broker to hold one.
	encoderSlots = 32
	// fineKeyMax bounds a cached attribute's key (class, escaped name,
	// payload); a longer one is encoded each time.
	fineKeyMax = 46
)

// fineSlot is one remembered attribute value: its key and its fine bits.
type fineSlot struct {
	n    uint8 // key length; 0: empty
	key  [fineKeyMax + 1]byte
	bits Bloom
}

// NewMessageEncoder returns an encoder for p. It panics if p is invalid.
func NewMessageEncoder(p Params) *MessageEncoder {
	p.mustValidate()
	return &MessageEncoder{p: p, lo: p.coarseBits() / 64}
}

// Encode returns p.EncodeMessage(m).
func (e *MessageEncoder) Encode(m content.Message) Bloom {
	p := e.p
	if p.Scheme != SchemeCatV2 {
		return p.EncodeMessage(m)
	}
	// EncodeMessage's loop, the fine bits from the cache. Shared through a
	// type parameter or a function value, the scratch array escapes and
	// each message costs two allocations (TestEncodeMessageDoesNotAllocate).
	var b Bloom
	var scratch [scratchSize]byte
	for _, a := range m.Attributes() {
		if a.Value.Kind() == content.KindString && e.addString(&b, a, scratch[:0]) {
			continue
		}
		buf, split, ok := appendAttribute(scratch[:0], a)
		if !ok {
			continue
		}
		p.addCoarse(&b, hashCategory(buf[:split]))
		p.addCoarse(&b, hashCategory(buf[split:]))
		e.addFine(&b, a, scratch[:0])
	}
	return b
}

// addString adds string attribute a's bits to b, coarse and fine, from the
// cache, or computes and remembers them. A string's categories depend only
// on its name and value, which its key holds whole, so a string the stream
// repeats costs one comparison of keys. It reports false for a string the
// cache does not hold (empty, or too long), which the caller encodes.
func (e *MessageEncoder) addString(b *Bloom, a content.Attribute, scratch []byte) bool {
	key, ok := fineKey(scratch, a)
	if !ok {
		return false
	}
	s := e.slot(key)
	if int(s.n) != len(key) || string(s.key[:s.n]) != string(key) {
		s.n = uint8(copy(s.key[:], key))
		s.bits = Bloom{}
		buf, split, _ := appendAttribute(scratch[:0], a)
		e.p.addCoarse(&s.bits, hashCategory(buf[:split]))
		e.p.addCoarse(&s.bits, hashCategory(buf[split:]))
		e.p.addFineAttribute(&s.bits, a, scratch[:0])
	}
	for i := range b.w {
		b.w[i] |= s.bits.w[i]
	}
	return true
}

// slot is where key is remembered, if it is.
func (e *MessageEncoder) slot(key []byte) *fineSlot {
	if e.slots == nil {
		e.slots = new([encoderSlots]fineSlot)
	}
	return &e.slots[mix64(hashCategory(key))&(encoderSlots-1)]
}

// addFine adds a's fine bits to b from the cache, or computes and
// remembers them.
func (e *MessageEncoder) addFine(b *Bloom, a content.Attribute, scratch []byte) {
	key, ok := fineKey(scratch, a)
	if !ok {
		e.p.addFineAttribute(b, a, scratch)
		return
	}
	s := e.slot(key)
	if int(s.n) != len(key) || string(s.key[:s.n]) != string(key) {
		s.bits = Bloom{}
		e.p.addFineAttribute(&s.bits, a, key[len(key):])
		s.n = uint8(copy(s.key[:], key))
	}
	for i := e.lo; i < words; i++ {
		b.w[i] |= s.bits.w[i]
	}
}

// fineKey appends to dst what a's fine categories depend on: a class, the
// escaped name, '=' (which ends it) and the string or the number's trie
// key. ok is false when a has no fine categories or its key is too long to
// remember.
func fineKey(dst []byte, a content.Attribute) (key []byte, ok bool) {
	if len(a.Name) > fineKeyMax {
		return dst, false
	}
	switch a.Value.Kind() {
	case content.KindString:
		s := a.Value.Str()
		if s == "" || len(a.Name)+len(s) > fineKeyMax-2 {
			return dst, false
		}
		dst = append(dst, classByte)
		dst = append(appendName(dst, a.Name), equalsByte)
		dst = append(dst, s...)
	case content.KindInt, content.KindFloat:
		k, ok := numKey(a.Value)
		if !ok {
			return dst, false
		}
		dst = append(dst, classNode)
		dst = append(appendName(dst, a.Name), equalsByte)
		dst = append(dst, byte(k>>8), byte(k))
	default:
		return dst, false
	}
	return dst, len(dst) <= fineKeyMax
}
