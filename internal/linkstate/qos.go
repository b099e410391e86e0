package linkstate

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
)

// QoSClass is the part of a router's predicate whose subscribers asked for
// a delivery deadline, two-path delivery or both (Kim10 §2.2–2.3;
// docs/design.md §11): the Bloom filters of those subscriptions, grouped by
// what they asked. A predicate advertisement carries its classes beside its
// filters, so an ingress router learns with the PREDICATES row how urgent a
// match at that router is. Classes never decide whether a router is a
// destination — every class filter is covered by the advertisement's
// filters — only how its bundles travel.
type QoSClass struct {
	// Deadline is the time from a message's acceptance at its ingress
	// router to its delivery that the class's subscribers asked for; 0:
	// none.
	Deadline time.Duration
	// TwoPaths asks for two-path delivery of the class's messages.
	TwoPaths bool
	// Filters are the class's Bloom filters, in the advertisement's
	// parameters.
	Filters []encoding.Bloom
}

// MaxQoSClasses bounds the classes of one advertisement: each class costs
// every ingress router a scan of its filters per matching message, so a
// router may not advertise more than a handful of distinct deadlines.
const MaxQoSClasses = 16

// CompareQoS orders classes as advertisements list them: by deadline (none
// last), then without two paths before with.
func CompareQoS(a, b QoSClass) int {
	da, db := a.Deadline, b.Deadline
	if da == 0 {
		da = 1<<63 - 1
	}
	if db == 0 {
		db = 1<<63 - 1
	}
	if c := cmp.Compare(da, db); c != 0 {
		return c
	}
	switch {
	case a.TwoPaths == b.TwoPaths:
		return 0
	case b.TwoPaths:
		return -1
	}
	return 1
}

func validateClasses(p *PredAd) error {
	if len(p.Classes) > MaxQoSClasses {
		return fmt.Errorf("predicate advertisement of router %d has %d QoS classes, at most %d", p.Origin, len(p.Classes), MaxQoSClasses)
	}
	if p.Withdrawn && len(p.Classes) > 0 {
		return fmt.Errorf("withdrawn predicate advertisement of router %d has %d QoS classes", p.Origin, len(p.Classes))
	}
	for i, c := range p.Classes {
		switch {
		case c.Deadline < 0:
			return fmt.Errorf("predicate advertisement of router %d: QoS class %d has a negative deadline %v", p.Origin, i, c.Deadline)
		case c.Deadline == 0 && !c.TwoPaths:
			return fmt.Errorf("predicate advertisement of router %d: QoS class %d asks for nothing (no deadline, one path)", p.Origin, i)
		case len(c.Filters) == 0:
			return fmt.Errorf("predicate advertisement of router %d: QoS class %d has no filters", p.Origin, i)
		case i > 0 && CompareQoS(p.Classes[i-1], c) >= 0:
			return fmt.Errorf("predicate advertisement of router %d: QoS classes %d and %d out of order or repeated", p.Origin, i-1, i)
		}
	}
	return nil
}

// normalizeClasses copies classes in advertisement order, dropping empty
// ones, and checks what validateClasses checks of the result.
func normalizeClasses(classes []QoSClass, m int) ([]QoSClass, error) {
	var out []QoSClass
	var pos []int
	for _, c := range classes {
		if len(c.Filters) == 0 {
			continue
		}
		for i, f := range c.Filters {
			pos = f.AppendPositions(pos[:0])
			if len(pos) > 0 && pos[len(pos)-1] >= m {
				return nil, fmt.Errorf("linkstate: QoS class (deadline %v) filter %d has bit %d set, beyond M=%d of Config.Encoding",
					c.Deadline, i, pos[len(pos)-1], m)
			}
		}
		out = append(out, QoSClass{Deadline: c.Deadline, TwoPaths: c.TwoPaths, Filters: slices.Clone(c.Filters)})
	}
	slices.SortStableFunc(out, CompareQoS)
	return out, nil
}

// addClasses folds the classes into a checksum. Nothing is added without
// classes, so advertisements without them keep the checksums of routers
// that predate classes.
func (s *hasher) addClasses(classes []QoSClass, words int) {
	if len(classes) == 0 {
		return
	}
	s.add(uint64(len(classes)))
	for _, c := range classes {
		s.add(uint64(c.Deadline))
		s.add(boolWord(c.TwoPaths))
		s.add(uint64(len(c.Filters)))
		for _, f := range c.Filters {
			for i := range words {
				s.add(f.Word(i))
			}
		}
	}
}

func (c QoSClass) wireSize(p encoding.Params) int {
	n := uintField(uint64(c.Deadline)) + boolField(c.TwoPaths)
	if len(c.Filters) > 0 {
		n += bytesField(p.FiltersSize(c.Filters))
	}
	return bytesField(n)
}
