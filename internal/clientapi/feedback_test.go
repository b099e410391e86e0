package clientapi

import (
	"math"
	"strings"
	"testing"
	"time"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/congestion"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCongestionFeedbackRoundTrip(t *testing.T) {
	at := time.Unix(0, 1_700_000_000_000_000_000)
	in := CongestionFeedback{
		Feedback: congestion.Feedback{Subscriber: 7, SentAt: at, Requests: []congestion.Request{
			{Filter: 1, Bloom: ccBloom(t, content.Attribute{Name: "a", Value: content.Int(1)}), Quota: 12.5},
			{Filter: 2, Quota: math.Inf(1)},
		}, Listen: content.MustParse(`a = 1 || b prefix "x\n" && c >= 2.5`)},
		Echo: &congestion.Echo{Subscriber: 7, SentAt: at, Filters: []encoding.Bloom{ccBloom(t, content.Attribute{Name: "z", Value: content.Bool(true)})}},
	}
	b, err := MarshalCongestionFeedback(in)
	require.NoError(t, err)
	out, err := UnmarshalCongestionFeedback(b, 99)
	require.NoError(t, err)
	assert.Equal(t, uint64(99), out.Feedback.Publisher)
	assert.Equal(t, in.Feedback.Requests, out.Feedback.Requests)
	assert.Equal(t, in.Feedback.Listen, out.Feedback.Listen)
	require.NotNil(t, out.Echo)
	assert.Equal(t, in.Echo.Filters, out.Echo.Filters)
	assert.Equal(t, uint64(99), out.Echo.Publisher)

	for name, c := range map[string]struct {
		pb   *dripv1.CongestionFeedback
		want string
	}{
		"bloom size":   {&dripv1.CongestionFeedback{Requests: []*dripv1.CongestionRequest{{Bloom: []byte{1}}}}, "request 0: encoding: Bloom wire form is 1 bytes"},
		"echo filter":  {&dripv1.CongestionFeedback{Echo: true, EchoFilters: [][]byte{{1}}}, "echo filter 0"},
		"many filters": {&dripv1.CongestionFeedback{EchoFilters: make([][]byte, congestion.MaxEchoFilters+1)}, "17 echo filters, more than 16"},
		"listen":       {&dripv1.CongestionFeedback{Listen: "a = "}, "listen: predicate: at byte 4"},
		"listen size":  {&dripv1.CongestionFeedback{Listen: "a = 1" + strings.Repeat(" ", 64<<10)}, "over the limit of 65536"},
	} {
		_, err := UnmarshalCongestionFeedback(marshal(t, c.pb), 1)
		require.ErrorContains(t, err, c.want, name)
	}
	_, err = UnmarshalCongestionFeedback([]byte{0xff}, 1)
	require.ErrorContains(t, err, "congestion feedback:")
}

func ccBloom(t testing.TB, attrs ...content.Attribute) encoding.Bloom {
	m, err := content.NewMessage(attrs, nil)
	require.NoError(t, err)
	return wire.CongestionParams.EncodeMessage(m)
}
