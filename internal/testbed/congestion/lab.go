package congestion

import (
	"context"
	"fmt"

	"github.com/dripmesh/drip/internal/testbed/lab"
)

// LabNetwork changes and reads the bottleneck of a lab.
type LabNetwork struct{ Lab *lab.Lab }

// SetBandwidth sets both directions of the link a–b.
func (n LabNetwork) SetBandwidth(ctx context.Context, a, b string, bw float64) error {
	return n.Lab.Set(ctx, a, b, lab.Change{Bandwidth: &bw})
}

// Sent is what the link has serialised from a to b.
func (n LabNetwork) Sent(ctx context.Context, a, b string) (uint64, error) {
	st, err := n.Lab.Status(ctx)
	if err != nil {
		return 0, err
	}
	for _, l := range st.Links {
		if l.From == a && l.To == b {
			return l.Sent, nil
		}
	}
	return 0, fmt.Errorf("lab %s has no link from %s to %s", n.Lab.Name(), a, b)
}
