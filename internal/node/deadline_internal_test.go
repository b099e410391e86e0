package node

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dripmesh/drip/internal/wire"
)

func TestSaneQoS(t *testing.T) {
	// A neighbour's deadline and budget are bounded before any arithmetic:
	// hostile extremes cannot overflow budgets or urgencies.
	h := int64(MaxDeadline)
	for _, tt := range []struct {
		name     string
		in, want wire.BundleQoS
	}{
		{"ordinary", wire.BundleQoS{Deadline: 50e6, Budget: 20e6}, wire.BundleQoS{Deadline: 50e6, Budget: 20e6}},
		{"late", wire.BundleQoS{Deadline: 50e6, Budget: -7e6}, wire.BundleQoS{Deadline: 50e6, Budget: -7e6}},
		{"budget beyond the deadline", wire.BundleQoS{Deadline: 50e6, Budget: 90e6}, wire.BundleQoS{Deadline: 50e6, Budget: 50e6}},
		{"huge deadline", wire.BundleQoS{Deadline: math.MaxInt64, Budget: math.MaxInt64}, wire.BundleQoS{Deadline: h, Budget: h}},
		{"huge lateness", wire.BundleQoS{Deadline: h, Budget: math.MinInt64}, wire.BundleQoS{Deadline: h, Budget: -h}},
		{"path kept", wire.BundleQoS{Path: wire.PathSecond}, wire.BundleQoS{Path: wire.PathSecond}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := saneQoS(tt.in)
			assert.Equal(t, tt.want, got)
			// What the broker computes from it stays in range.
			assert.GreaterOrEqual(t, got.Deadline-got.Budget, int64(0))
			assert.LessOrEqual(t, got.Deadline-got.Budget, 2*h)
		})
	}
}
