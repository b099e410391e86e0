package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/congestion"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/wire"
	"github.com/dripmesh/drip/internal/workload"
)

// TestRecordEntriesThatLookTaken measures, on Carzaniga09's one-constraint
// workload (the 8-broker scenarios'), how often a publication record entry
// looks taken by a filter that does not take the message, for the filters
// congestionFilter marks exact and those it marks coarse. A subscriber
// reads such an entry in a gap as a loss. Coarse filters must look taken
// far more often, or marking them would be pointless; and an exact
// filter's rate, against the share of messages it takes, says how much
// loss a record can reveal at all (docs/design.md §12).
func TestRecordEntriesThatLookTaken(t *testing.T) {
	g, err := workload.New(workload.SingleConstraint())
	require.NoError(t, err)
	msgs := g.Messages(400)
	blooms := make([]encoding.Bloom, len(msgs))
	for i, m := range msgs {
		blooms[i] = wire.CongestionParams.EncodeMessage(m)
	}
	type count struct{ filters, taken, notTaken, falseMatch int }
	var exact, coarse count
	for _, pred := range g.Predicates(40) {
		for i, f := range pred {
			cf := congestionFilter(uint32(i), f)
			c := &exact
			if cf.Coarse {
				c = &coarse
			}
			c.filters++
			for j, m := range msgs {
				if f.Matches(m) {
					c.taken++
					continue
				}
				c.notTaken++
				if cf.Matches(blooms[j]) {
					c.falseMatch++
				}
			}
		}
	}
	rate := func(c count) (fp, taken float64) {
		return float64(c.falseMatch) / float64(c.notTaken), float64(c.taken) / float64(c.taken+c.notTaken)
	}
	efp, etaken := rate(exact)
	cfp, ctaken := rate(coarse)
	t.Logf("exact filters: %d, take %.2f%% of messages, look taken in %.2f%% of the others", exact.filters, 100*etaken, 100*efp)
	t.Logf("coarse filters: %d, take %.2f%% of messages, look taken in %.2f%% of the others", coarse.filters, 100*ctaken, 100*cfp)
	require.Positive(t, exact.filters)
	require.Positive(t, coarse.filters)
	assert.Less(t, efp, cfp/4)
}

// TestMarkedDeliveryIsALossEvent: a delivery a broker marked
// (Published.congestion_experienced) reaches the subscription's
// congestion control as a loss event without a gap; the same delivery
// unmarked is none.
func TestMarkedDeliveryIsALossEvent(t *testing.T) {
	for _, marked := range []bool{false, true} {
		cc := newSubCC()
		cc.setPredicate("a = 1")
		now := time.Unix(100, 0)
		for seq := uint64(1); seq <= 2; seq++ {
			msg, err := proto.Marshal(&dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a", Value: &dripv1.Value{Kind: &dripv1.Value_IntValue{IntValue: 1}}}}})
			require.NoError(t, err)
			msg = protowire.AppendTag(msg, fieldMessageCongestion, protowire.BytesType)
			msg = protowire.AppendBytes(msg, wire.AppendCongestionHeader(nil, &congestion.Header{Publisher: 7, Seq: seq, SentAt: now, Rate: 100}))
			d, err := deliveryFromWire(wire.AppendPublished(nil, msg, wire.PublishedHeader{Ingress: 1, Seq: seq, Marked: marked && seq == 2}), nil)
			require.NoError(t, err)
			assert.Equal(t, marked && seq == 2, d.marked)
			cc.receive(&d, now)
		}
		st := cc.core.Stats()
		want := uint64(0)
		if marked {
			want = 1
		}
		assert.Equal(t, want, st.Marked, "marked %v", marked)
		sessions := cc.core.Sessions()
		require.Len(t, sessions, 1)
		assert.Equal(t, want, sessions[0].LossEvents, "marked %v", marked)
	}
}
