package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStampRoundTrip(t *testing.T) {
	for _, s := range []stamp{
		{},
		{run: 1, pub: 2, seq: 3, sent: time.Second},
		{run: ^uint32(0), pub: ^uint32(0), seq: ^uint64(0), sent: -1},
	} {
		got, ok := decodeStamp(s.encode())
		require.True(t, ok)
		assert.Equal(t, s, got)
	}
}

func TestDecodeStampRejects(t *testing.T) {
	good := stamp{run: 1, pub: 2, seq: 3, sent: 4}.encode()
	wrongMagic := append([]byte{}, good...)
	wrongMagic[0] = 'D'
	for name, b := range map[string][]byte{
		"empty":       nil,
		"short":       good[:payloadSize-1],
		"long":        append(append([]byte{}, good...), 0),
		"wrong magic": wrongMagic,
		"text":        []byte("hello, this is 28 bytes long"),
	} {
		_, ok := decodeStamp(b)
		assert.False(t, ok, name)
	}
}

func FuzzDecodeStamp(f *testing.F) {
	f.Add(stamp{run: 1, pub: 2, seq: 3, sent: 4}.encode())
	f.Add([]byte("drbn"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, ok := decodeStamp(b)
		if ok {
			require.Equal(t, b, s.encode(), "what decodes re-encodes to the same bytes")
		}
	})
}
