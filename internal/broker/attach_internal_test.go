package broker

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRefuseNew: which of two links to one neighbour survives. Both ends
// decide alike — each sees the other's dial as the opposite direction —
// so exactly one link survives a race, and a silent old link never keeps
// out its neighbour's new one (a silent cut, healed).
func TestRefuseNew(t *testing.T) {
	for _, tc := range []struct {
		oldDialed, newDialed, lowerDials, oldSilent bool
		refuse                                      bool
	}{
		// A race: the link the lower ID dialled wins.
		{oldDialed: true, newDialed: false, lowerDials: true, refuse: true},
		{oldDialed: false, newDialed: true, lowerDials: false, refuse: true},
		{oldDialed: true, newDialed: false, lowerDials: false, refuse: false},
		{oldDialed: false, newDialed: true, lowerDials: true, refuse: false},
		// Same direction: the neighbour redialled, or this broker did.
		{oldDialed: true, newDialed: true, lowerDials: true, refuse: false},
		{oldDialed: false, newDialed: false, lowerDials: true, refuse: false},
		// The winner of a race, gone silent: replaced all the same.
		{oldDialed: true, newDialed: false, lowerDials: true, oldSilent: true, refuse: false},
		{oldDialed: false, newDialed: true, lowerDials: false, oldSilent: true, refuse: false},
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			assert.Equal(t, tc.refuse, refuseNew(tc.oldDialed, tc.newDialed, tc.lowerDials, tc.oldSilent))
			// The other end of the same two links decides the same: its
			// old link is this end's old link, seen from the other side.
			if !tc.oldSilent && tc.oldDialed != tc.newDialed {
				assert.Equal(t, tc.refuse, refuseNew(!tc.oldDialed, !tc.newDialed, !tc.lowerDials, false), "the other end")
			}
		})
	}
}
