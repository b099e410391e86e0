package netem

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"syscall"
)

// Fake is an in-memory TC for one device. It enforces the kernel rules the
// reconciler's ordering depends on, so a wrong order fails here as it
// would on a real device:
//
//   - a root qdisc may replace only the kernel's default root (handle 0);
//   - a class slot holds one explicitly added qdisc;
//   - a class with filters bound to it cannot be deleted (EBUSY);
//   - deleting the root takes every class, leaf and filter with it.
//
// Every change is recorded in Ops, one line each, so tests can assert the
// exact work a pass did.
type Fake struct {
	mu sync.Mutex
	// NoNetem makes adding a netem qdisc fail as on a kernel without
	// sch_netem.
	NoNetem bool
	// Ops lists the changes made, e.g. "add class htb d1:1001 ...".
	Ops []string

	root    Qdisc
	leaves  map[uint32]Qdisc
	classes map[uint32]Class
	filters []Filter
	nextID  uint32
}

// NewFake returns a device with the kernel's default root qdisc.
func NewFake() *Fake {
	f := &Fake{}
	f.reset()
	return f
}

func (f *Fake) reset() {
	f.root = Qdisc{Parent: HandleRoot, Kind: "noqueue"}
	f.leaves = map[uint32]Qdisc{}
	f.classes = map[uint32]Class{}
	f.filters = nil
}

func (f *Fake) record(op string, obj fmt.Stringer) { f.Ops = append(f.Ops, op+" "+obj.String()) }

// TakeOps returns the recorded changes and forgets them.
func (f *Fake) TakeOps() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ops := f.Ops
	f.Ops = nil
	return ops
}

// State returns what is installed as a Plan lists it (filters sorted,
// kernel IDs cleared), the kernel's default root left out.
func (f *Fake) State() State {
	qs, _ := f.Qdiscs()
	if qs[0].Handle == 0 {
		qs = qs[1:]
	}
	cs, _ := f.Classes()
	fs, _ := f.Filters()
	for i := range fs {
		fs[i].ID = 0
	}
	sortFilters(fs)
	return State{Qdiscs: nilIfEmpty(qs), Classes: nilIfEmpty(cs), Filters: nilIfEmpty(fs)}
}

// Qdiscs lists the root first, then the leaves by handle.
func (f *Fake) Qdiscs() ([]Qdisc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Qdisc{f.root}, sortedValues(f.leaves)...), nil
}

// AddQdisc installs q at the root or under a class.
func (f *Fake) AddQdisc(q Qdisc) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q.Kind == KindNetem && f.NoNetem {
		return fmt.Errorf("%w: %w", ErrNetemUnsupported, syscall.ENOENT)
	}
	if q.Handle == 0 || Minor(q.Handle) != 0 {
		return syscall.EINVAL
	}
	if q.Parent == HandleRoot {
		if f.root.Handle != 0 {
			return syscall.EEXIST
		}
		f.reset()
		f.root = q
		f.record("add", q)
		return nil
	}
	if _, ok := f.classes[q.Parent]; !ok {
		return syscall.ENOENT
	}
	if _, used := f.leaves[q.Handle]; used || q.Handle == f.root.Handle {
		return syscall.EEXIST
	}
	for _, l := range f.leaves {
		if l.Parent == q.Parent {
			return syscall.EEXIST
		}
	}
	f.leaves[q.Handle] = q
	f.record("add", q)
	return nil
}

// ChangeQdisc alters the options of an installed qdisc.
func (f *Fake) ChangeQdisc(q Qdisc) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, ok := f.leaves[q.Handle]
	if q.Parent == HandleRoot {
		old, ok = f.root, f.root.Handle == q.Handle && q.Handle != 0
	}
	if !ok {
		return syscall.ENOENT
	}
	if old.Parent != q.Parent || old.Kind != q.Kind {
		return syscall.EINVAL
	}
	if q.Parent == HandleRoot {
		f.root = q
	} else {
		f.leaves[q.Handle] = q
	}
	f.record("change", q)
	return nil
}

// DeleteQdisc removes a qdisc; the root takes everything with it.
func (f *Fake) DeleteQdisc(q Qdisc) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q.Parent == HandleRoot {
		if f.root.Handle == 0 || f.root.Handle != q.Handle {
			return syscall.ENOENT
		}
		f.reset()
		f.record("delete", q)
		return nil
	}
	if _, ok := f.leaves[q.Handle]; !ok {
		return syscall.ENOENT
	}
	delete(f.leaves, q.Handle)
	f.record("delete", q)
	return nil
}

// Classes lists the classes by handle.
func (f *Fake) Classes() ([]Class, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sortedValues(f.classes), nil
}

// AddClass adds a class under the root qdisc or another class.
func (f *Fake) AddClass(c Class) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, parentClass := f.classes[c.Parent]
	switch {
	case f.root.Kind != KindHTB || Major(c.Handle) != Major(f.root.Handle):
		return syscall.EINVAL
	case c.Parent != f.root.Handle && !parentClass:
		return syscall.ENOENT
	case c.Rate == 0 || Minor(c.Handle) == 0:
		return syscall.EINVAL
	}
	if _, ok := f.classes[c.Handle]; ok {
		return syscall.EEXIST
	}
	f.classes[c.Handle] = c
	f.record("add", c)
	return nil
}

// ChangeClass alters a class's rates.
func (f *Fake) ChangeClass(c Class) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, ok := f.classes[c.Handle]
	if !ok {
		return syscall.ENOENT
	}
	if old.Parent != c.Parent || c.Rate == 0 {
		return syscall.EINVAL
	}
	f.classes[c.Handle] = c
	f.record("change", c)
	return nil
}

// DeleteClass removes a class and its leaf; it fails while filters point
// at the class or it has children.
func (f *Fake) DeleteClass(c Class) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.classes[c.Handle]; !ok {
		return syscall.ENOENT
	}
	for _, fl := range f.filters {
		if fl.Class == c.Handle {
			return syscall.EBUSY
		}
	}
	for _, other := range f.classes {
		if other.Parent == c.Handle {
			return syscall.EBUSY
		}
	}
	delete(f.classes, c.Handle)
	for h, l := range f.leaves {
		if l.Parent == c.Handle {
			delete(f.leaves, h)
		}
	}
	f.record("delete", c)
	return nil
}

// Filters lists the filters on the root qdisc in the order they were added.
func (f *Fake) Filters() ([]Filter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.filters), nil
}

// AddFilter attaches a filter to the root qdisc and gives it an ID.
func (f *Fake) AddFilter(fl Filter) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.root.Handle == 0 || fl.Parent != f.root.Handle {
		return syscall.ENOENT
	}
	if !fl.Dst.IsValid() || fl.Class == 0 {
		return syscall.EINVAL
	}
	f.nextID++
	fl.ID = f.nextID
	f.filters = append(f.filters, fl)
	f.record("add", fl)
	return nil
}

// DeleteFilter removes the filter with fl's ID.
func (f *Fake) DeleteFilter(fl Filter) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.filters, func(x Filter) bool {
		return x.ID == fl.ID && x.Parent == fl.Parent && x.Priority == fl.Priority
	})
	if i < 0 {
		return syscall.ENOENT
	}
	f.filters = slices.Delete(f.filters, i, i+1)
	f.record("delete", fl)
	return nil
}

func sortedValues[V any](m map[uint32]V) []V {
	keys := make([]uint32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare)
	out := make([]V, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

// nilIfEmpty makes "nothing" compare equal however it was arrived at.
func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}
