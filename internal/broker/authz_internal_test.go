package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dripmesh/drip/internal/authz"
)

// TestDenialsLoggedOncePerWindow: a client retrying a refused request in a
// loop is counted every time and logged once a minute, and other clients
// are logged on their own.
func TestDenialsLoggedOncePerWindow(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	now := time.Unix(1000, 0)
	a := &authorizer{
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "d"}, []string{"op"}),
		log:    zap.New(core), now: func() time.Time { return now }, logged: map[string]time.Time{},
	}
	alice, bob := authz.Identity{CommonName: "alice"}, authz.Identity{CommonName: "bob"}
	denied := &authz.DeniedError{Rule: "r", Msg: "no"}
	for range 100 {
		_ = a.refuse(opPublish, alice, denied)
	}
	_ = a.refuse(opSubscribe, bob, denied)
	assert.Equal(t, 100.0, testutil.ToFloat64(a.denied.WithLabelValues(opPublish)))
	assert.Equal(t, 2, logs.Len(), "one line per client")
	now = now.Add(denialLogWindow)
	_ = a.refuse(opPublish, alice, denied)
	assert.Equal(t, 3, logs.Len(), "and again after the window")
	assert.Equal(t, "CN=alice", logs.All()[2].ContextMap()["client"])

	// Not a denial: a conjunction over the limits is the client's
	// mistake, neither counted nor logged.
	_ = a.refuse(opSubscribe, alice, errors.New("over the limit"))
	assert.Equal(t, 1.0, testutil.ToFloat64(a.denied.WithLabelValues(opSubscribe)))
}
