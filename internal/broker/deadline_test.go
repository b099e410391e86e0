package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

func TestSubscribeWithDeadline(t *testing.T) {
	// docs/design.md §11: the broker installs a subscription's deadline and
	// two-path option and acknowledges what it understood; a deadline out
	// of range is refused, naming the field.
	m := startMesh(t, 1, nil, nil)
	for _, tt := range []struct {
		name     string
		deadline int64
		two      bool
		want     string // error text; "" to succeed
	}{
		{"deadline and two paths", int64(50 * time.Millisecond), true, ""},
		{"two paths alone", 0, true, ""},
		{"negative", -1, false, "deadline_ns = -1"},
		{"beyond an hour", int64(2 * time.Hour), false, "up to 1h0m0s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			stream, err := dripv1.NewBrokerClient(m.clients[0]).Subscribe(ctx)
			require.NoError(t, err)
			require.NoError(t, stream.Send(&dripv1.SubscribeRequest{
				Predicate: &dripv1.Predicate{Text: `k exists`}, DeadlineNs: tt.deadline, TwoPaths: tt.two,
			}))
			ev, err := stream.Recv()
			if tt.want != "" {
				require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
				assert.Contains(t, status.Convert(err).Message(), tt.want)
				return
			}
			require.NoError(t, err)
			ack := ev.GetSubscribed()
			require.NotNil(t, ack)
			assert.Equal(t, tt.deadline, ack.GetDeadlineNs())
			assert.Equal(t, tt.two, ack.GetTwoPaths())
		})
	}
}

func TestPublishRejectsDeadlineBeyondAnHour(t *testing.T) {
	m := startMesh(t, 1, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := dripv1.NewBrokerClient(m.clients[0]).Publish(ctx)
	require.NoError(t, err)
	str := &dripv1.Value{Kind: &dripv1.Value_StringValue{StringValue: "x"}}
	attrs := []*dripv1.Attribute{{Name: "a", Value: str}}
	require.NoError(t, stream.Send(&dripv1.PublishRequest{Message: &dripv1.Message{Attributes: attrs, DeadlineNs: int64(time.Second)}}))
	require.NoError(t, stream.Send(&dripv1.PublishRequest{Message: &dripv1.Message{Attributes: attrs, DeadlineNs: int64(61 * time.Minute)}}))
	_, err = stream.CloseAndRecv()
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "message 1: message deadline is 1h1m0s, at most 1h0m0s")
}
