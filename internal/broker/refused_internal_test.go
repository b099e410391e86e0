package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dripmesh/drip/internal/linkstate"
)

// stubLink is a Link that only has a name.
type stubLink struct {
	Link
	id uint32
}

func (l stubLink) Peer() uint32 { return l.id }
func (l stubLink) Name() string { return "stub" }

// TestRefusedAdvertisementsAreLoggedOncePerLinkAndReason: a forger sending
// many advertisements costs one warn line per link and reason a minute;
// the counter counts every one.
func TestRefusedAdvertisementsAreLoggedOncePerLinkAndReason(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	n, err := NewNode(DefaultConfig(1, "b1"), WithLogger(zap.New(core)), WithClock(clk))
	require.NoError(t, err)
	err = errors.New("forged")
	for range 100 {
		n.refused(stubLink{id: 3}, linkstate.RefusedIdentity, err)
	}
	assert.Equal(t, 1, logs.Len())
	n.refused(stubLink{id: 3}, linkstate.RefusedSignature, err)
	n.refused(stubLink{id: 4}, linkstate.RefusedIdentity, err)
	assert.Equal(t, 3, logs.Len(), "another reason, another link: logged")
	clk.Step(refusedLogInterval)
	n.refused(stubLink{id: 3}, linkstate.RefusedIdentity, err)
	assert.Equal(t, 4, logs.Len(), "a minute later: logged again")
	assert.Equal(t, 102.0, testutil.ToFloat64(n.AdvertisementsRefused(linkstate.RefusedIdentity)))
	assert.Equal(t, "identity", logs.All()[0].ContextMap()["reason"])
}
