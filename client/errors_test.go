package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dripmesh/drip/client"
)

// TestCtxOrTellsTheLastAttempt: a call whose context ended reports the
// context's error, which errors.Is recognises, and beside it the broker's
// last answer when that answer was something else (a Subscribe that
// retried a refusal until its deadline said only "context deadline
// exceeded").
func TestCtxOrTellsTheLastAttempt(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	refused := status.Error(codes.ResourceExhausted, "broker b0: open client streams hold 96 MiB")
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want string
		is   error
	}{
		{"live context: the error", live, refused, refused.Error(), refused},
		{"ended, no error", cancelled, nil, "context canceled", context.Canceled},
		{"ended by the cancellation itself", cancelled, status.Error(codes.Canceled, "context canceled"), "context canceled", context.Canceled},
		{"ended, the context's own error", cancelled, context.Canceled, "context canceled", context.Canceled},
		{"ended after a refusal", cancelled, refused, "context canceled; the last attempt: " + refused.Error(), context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := client.CtxOr(tc.ctx, tc.err)
			assert.EqualError(t, got, tc.want)
			assert.True(t, errors.Is(got, tc.is), "errors.Is(%v, %v)", got, tc.is)
		})
	}
}
