package systems

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/content"
)

// What a NATS publisher encodes, a NATS subscriber's filter decodes: the
// payload comes back unchanged when the predicate matches the attributes,
// and nothing when it does not.
func TestNATSFilterRoundTrip(t *testing.T) {
	m, err := content.NewMessage([]content.Attribute{
		{Name: "symbol", Value: content.String("DRIP")}, {Name: "n", Value: content.Int(7)},
	}, nil)
	require.NoError(t, err)
	data, err := EncodeNATS(m, []byte("payload"))
	require.NoError(t, err)

	payload, ok, err := NewNATSFilter(content.MustParse(`symbol = "DRIP" && n > 5`)).Match(data)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, []byte("payload"), payload)

	payload, ok, err = NewNATSFilter(content.MustParse(`symbol = "DRIP" && n < -5`)).Match(data)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Nil(t, payload)

	_, _, err = NewNATSFilter(content.MustParse(`n > 0`)).Match([]byte{0xff, 0xff})
	assert.ErrorContains(t, err, "nats: decoding a message")
}
