package netem

import (
	"fmt"
	"math"
	"time"
)

// Reconcile brings the device behind tc to want, changing only what
// differs from what is installed, and returns the number of changes made
// (0 when the device already matched). want is a Plan's State: either
// empty (remove drip's root, if any) or an htb root under RootHandle with
// its classes, leaves and filters.
//
// The order follows the kernel's rules: filters to be dropped go before
// the classes they point at (a class with filters bound cannot be
// deleted), classes before their leaves, new filters last. Reconcile is
// convergent: after a failure part-way, the next call finishes the job.
func Reconcile(tc TC, want State) (int, error) {
	r := reconciler{tc: tc}
	err := r.run(want)
	return r.changes, err
}

type reconciler struct {
	tc      TC
	changes int
}

func (r *reconciler) do(err error, what string, obj fmt.Stringer) error {
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, obj, err)
	}
	r.changes++
	return nil
}

func (r *reconciler) run(want State) error {
	have, err := r.tc.Qdiscs()
	if err != nil {
		return fmt.Errorf("list qdiscs: %w", err)
	}
	root, hasRoot := rootOf(have)
	wantRoot, wantsRoot := rootOf(want.Qdiscs)
	if wantsRoot && wantRoot.Handle != RootHandle {
		return fmt.Errorf("desired root %s is not drip's %s", HandleString(wantRoot.Handle), HandleString(RootHandle))
	}
	own := hasRoot && Major(root.Handle) == RootMajor
	switch {
	case !wantsRoot:
		if own {
			return r.do(r.tc.DeleteQdisc(root), "delete", root)
		}
		return nil
	case hasRoot && !own && root.Handle != 0:
		return fmt.Errorf("%w: %s (drip replaces only the kernel's default root or its own %s)", ErrForeignRoot, root, HandleString(RootHandle))
	case own && sameQdisc(root, wantRoot):
	case own && root.Handle == wantRoot.Handle && root.Kind == wantRoot.Kind:
		if err := r.do(r.tc.ChangeQdisc(wantRoot), "change", wantRoot); err != nil {
			return err
		}
	default:
		// Kernel default root (handle 0), or drip's root of another kind:
		// start over under a fresh root.
		if own {
			if err := r.do(r.tc.DeleteQdisc(root), "delete", root); err != nil {
				return err
			}
		}
		if err := r.do(r.tc.AddQdisc(wantRoot), "add", wantRoot); err != nil {
			return err
		}
		have = nil
	}

	filters, err := r.tc.Filters()
	if err != nil {
		return fmt.Errorf("list filters: %w", err)
	}
	classes, err := r.tc.Classes()
	if err != nil {
		return fmt.Errorf("list classes: %w", err)
	}
	wantFilters := map[Filter]bool{}
	for _, f := range want.Filters {
		wantFilters[f.key()] = true
	}
	haveFilters := map[Filter]bool{}
	for _, f := range filters {
		if wantFilters[f.key()] && !haveFilters[f.key()] {
			haveFilters[f.key()] = true
			continue
		}
		if err := r.do(r.tc.DeleteFilter(f), "delete", f); err != nil {
			return err
		}
	}

	wantClasses := map[uint32]Class{}
	for _, c := range want.Classes {
		wantClasses[c.Handle] = c
	}
	haveClasses := map[uint32]Class{}
	for _, c := range classes {
		if Major(c.Handle) != RootMajor {
			continue
		}
		if _, ok := wantClasses[c.Handle]; ok {
			haveClasses[c.Handle] = c
			continue
		}
		if err := r.do(r.tc.DeleteClass(c), "delete", c); err != nil {
			return err
		}
	}
	for _, c := range want.Classes {
		old, ok := haveClasses[c.Handle]
		switch {
		case !ok:
			err = r.do(r.tc.AddClass(c), "add", c)
		case old.Rate != c.Rate || old.Ceil != c.Ceil:
			err = r.do(r.tc.ChangeClass(c), "change", c)
		}
		if err != nil {
			return err
		}
	}

	if err := r.leaves(have, want.Qdiscs, wantClasses); err != nil {
		return err
	}

	for _, f := range want.Filters {
		if haveFilters[f.key()] {
			continue
		}
		if err := r.do(r.tc.AddFilter(f), "add", f); err != nil {
			return err
		}
		haveFilters[f.key()] = true
	}
	return nil
}

// leaves reconciles the qdiscs under drip's classes. Qdiscs the kernel
// created by itself (the default leaf of a new class) are not drip's and
// are simply grafted over.
func (r *reconciler) leaves(have, want []Qdisc, classes map[uint32]Class) error {
	wantBy := map[uint32]Qdisc{}
	for _, q := range want {
		if q.Parent != HandleRoot {
			wantBy[q.Handle] = q
		}
	}
	haveBy := map[uint32]Qdisc{}
	for _, q := range have {
		if !isOwnLeaf(q.Handle) || Major(q.Parent) != RootMajor {
			continue
		}
		if _, alive := classes[q.Parent]; !alive {
			continue // went with its class
		}
		if w, ok := wantBy[q.Handle]; ok && w.Parent == q.Parent {
			haveBy[q.Handle] = q
			continue
		}
		if err := r.do(r.tc.DeleteQdisc(q), "delete", q); err != nil {
			return err
		}
	}
	for _, q := range want {
		if q.Parent == HandleRoot {
			continue
		}
		old, ok := haveBy[q.Handle]
		var err error
		switch {
		case ok && sameQdisc(old, q):
		case ok && old.Kind == q.Kind:
			err = r.do(r.tc.ChangeQdisc(q), "change", q)
		case ok:
			// netem ↔ bfifo: a qdisc cannot change kind in place.
			if err = r.do(r.tc.DeleteQdisc(old), "delete", old); err == nil {
				err = r.do(r.tc.AddQdisc(q), "add", q)
			}
		default:
			err = r.do(r.tc.AddQdisc(q), "add", q)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Remove deletes drip's root qdisc, and with it everything drip installed
// on the device, if there is one. It reports whether it removed anything.
func Remove(tc TC) (bool, error) {
	n, err := Reconcile(tc, State{})
	return n > 0, err
}

func rootOf(qs []Qdisc) (Qdisc, bool) {
	for _, q := range qs {
		if q.Parent == HandleRoot {
			return q, true
		}
	}
	return Qdisc{}, false
}

// Read-back tolerances: the kernel keeps delay and jitter in 64 ns ticks
// and loss as a fraction of 2³², so what is read back is the desired value
// rounded.
const (
	timeTolerance = time.Microsecond
	lossTolerance = 1e-6
)

// sameQdisc compares what drip sets on a qdisc of this kind.
func sameQdisc(a, b Qdisc) bool {
	if a.Handle != b.Handle || a.Parent != b.Parent || a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case KindHTB:
		return a.Default == b.Default
	case KindBFIFO:
		return a.Limit == b.Limit
	case KindNetem:
		return a.Limit == b.Limit &&
			near(a.Netem.Delay, b.Netem.Delay) && near(a.Netem.Jitter, b.Netem.Jitter) &&
			math.Abs(a.Netem.Loss-b.Netem.Loss) < lossTolerance
	}
	return true
}

func near(a, b time.Duration) bool { return (a - b).Abs() < timeTolerance }
