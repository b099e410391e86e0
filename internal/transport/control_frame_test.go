package transport

import (
	"testing"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMalformedControlRefusesTheWholeFrame: one malformed control message
// makes the frame's every message unusable, those before it included, and
// the error names the link; the handler hears nothing of the frame.
func TestMalformedControlRefusesTheWholeFrame(t *testing.T) {
	hello := func(router uint32) *dripv1.Control {
		return &dripv1.Control{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{Router: router, Version: linkstate.Version}}}
	}
	deliver := func(cs ...*dripv1.Control) ([]linkstate.Message, error) {
		ca, cb := memPipe(open(1), open(2))
		defer ca.Close(nil)
		var got []linkstate.Message
		l, err := NewLink(cb, LinkConfig{QueueBytes: 1 << 16, MaxFrameBytes: 1 << 16},
			func(_ *Link, msgs []linkstate.Message, _ [][]byte) error { got = msgs; return nil })
		require.NoError(t, err)
		frame, err := AppendFrame(nil, cs, nil)
		require.NoError(t, err)
		return got, l.Deliver(frame)
	}
	for _, tc := range []struct {
		name string
		bad  *dripv1.Control
		want string
	}{
		{"empty", &dripv1.Control{}, "empty or of an unknown kind"},
		{"negative hello time", &dripv1.Control{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{Router: 2, SentAtNs: -1}}}, "negative timestamp"},
		{"negative LSA age", &dripv1.Control{Msg: &dripv1.Control_Lsa{Lsa: &dripv1.Lsa{Origin: 2, AgeNs: -1}}}, "negative age"},
		{"unknown Bloom scheme", &dripv1.Control{Msg: &dripv1.Control_PredicateAd{PredicateAd: &dripv1.PredicateAd{Origin: 2, BloomScheme: "nope"}}}, "predicate advertisement of router 2"},
		{"truncated filters", &dripv1.Control{Msg: &dripv1.Control_PredicateAd{PredicateAd: &dripv1.PredicateAd{Origin: 2, BloomScheme: "cat-v1", BloomBits: 512, BloomHashes: 4, Filters: []byte{1, 2, 3}}}}, "predicate advertisement of router 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := deliver(hello(1), tc.bad)
			require.ErrorIs(t, err, ErrMalformedControl)
			assert.Contains(t, err.Error(), "malformed control message from b1")
			assert.Contains(t, err.Error(), tc.want)
			assert.Nil(t, msgs)
		})
	}
	msgs, err := deliver(hello(1), hello(1))
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	assert.Equal(t, uint32(1), msgs[1].(*linkstate.Hello).Router)
}
