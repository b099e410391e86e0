package netem

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/topology"
)

func leafName(i int) string { return fmt.Sprintf("l%d", i) }

// star is a hub linked to n leaves, link i at (i+1) × 100 kB/s with a delay
// on every other link.
func star(n int) *topology.Topology {
	var sb strings.Builder
	sb.WriteString("brokers:\n  - {name: hub, id: 0}\n")
	for i := range n {
		fmt.Fprintf(&sb, "  - {name: %s, id: %d}\n", leafName(i), i+1)
	}
	sb.WriteString("links:\n")
	for i := range n {
		fmt.Fprintf(&sb, "  - {a: hub, b: %s, bandwidth: %dKBps, delay: %dms}\n", leafName(i), (i+1)*100, (i%2)*10)
	}
	t, err := topology.Parse([]byte(sb.String()))
	if err != nil {
		panic(err)
	}
	return t
}

func plan(t testing.TB, in Input) State {
	t.Helper()
	p, err := NewPlan(in)
	require.NoError(t, err)
	return p.State
}

func reconcile(t testing.TB, tc TC, want State) int {
	t.Helper()
	n, err := Reconcile(tc, want)
	require.NoError(t, err)
	return n
}

func squareInput(t testing.TB) Input {
	return Input{Topology: mustTopo(t, square), Self: "a", Addrs: map[string][]netip.Addr{
		"b": addrs("10.0.0.2", "fd00::b"), "c": addrs("fd00::c"), "d": addrs("10.0.0.4"),
	}}
}

func TestReconcileFromScratchAndIdempotent(t *testing.T) {
	f := NewFake()
	want := plan(t, squareInput(t))
	n := reconcile(t, f, want)
	assert.Equal(t, len(want.Qdiscs)+len(want.Classes)+len(want.Filters), n, "one change per object")
	assert.Equal(t, want, f.State())
	f.TakeOps()

	assert.Zero(t, reconcile(t, f, want), "second pass changes nothing")
	assert.Empty(t, f.TakeOps())
}

func TestReconcileMovedPeer(t *testing.T) {
	f := NewFake()
	in := squareInput(t)
	reconcile(t, f, plan(t, in))
	f.TakeOps()

	// A pod rescheduled: b's IPv4 address changes, its IPv6 one does not.
	in.Addrs["b"] = addrs("10.0.0.22", "fd00::b")
	assert.Equal(t, 2, reconcile(t, f, plan(t, in)))
	assert.Equal(t, []string{
		"delete filter u32 parent d1: prio 1 dst 10.0.0.2/32 flowid d1:1001",
		"add filter u32 parent d1: prio 1 dst 10.0.0.22/32 flowid d1:1001",
	}, f.TakeOps(), "only b's filter moves")
	assert.Equal(t, plan(t, in), f.State())
}

func TestReconcileChangedLink(t *testing.T) {
	f := NewFake()
	in := squareInput(t)
	reconcile(t, f, plan(t, in))
	f.TakeOps()

	in.Topology.Links[0].Bandwidth = 1e6
	in.Topology.Links[0].Loss = 0
	reconcile(t, f, plan(t, in))
	assert.Equal(t, []string{
		"change class htb d1:1001 parent d1: rate 1000000B/s ceil 1000000B/s",
		"change qdisc netem 1001: parent d1:1001 limit 1000 delay 20ms jitter 1ms loss 0%",
	}, f.TakeOps(), "in place: filters and other links untouched")

	// Without impairments the leaf becomes a bfifo, which is a new qdisc.
	in.Topology.Links[0].Delay, in.Topology.Links[0].Jitter = 0, 0
	reconcile(t, f, plan(t, in))
	assert.Equal(t, []string{
		"delete qdisc netem 1001: parent d1:1001 limit 1000 delay 20ms jitter 1ms loss 0%",
		"add qdisc bfifo 1001: parent d1:1001 limit 100000b",
	}, f.TakeOps())
	assert.Equal(t, plan(t, in), f.State())
}

func TestReconcileRemovedPeer(t *testing.T) {
	f := NewFake()
	in := squareInput(t)
	reconcile(t, f, plan(t, in))
	f.TakeOps()

	in.Topology.Links = slices.DeleteFunc(in.Topology.Links, func(l topology.Link) bool { return l.A == "a" && l.B == "b" })
	reconcile(t, f, plan(t, in))
	// The fake refuses to delete a class with filters bound (EBUSY), so
	// this order is the only one that works.
	assert.Equal(t, []string{
		"delete filter u32 parent d1: prio 1 dst 10.0.0.2/32 flowid d1:1001",
		"delete filter u32 parent d1: prio 2 dst fd00::b/128 flowid d1:1001",
		"delete class htb d1:1001 parent d1: rate 2000000B/s ceil 2000000B/s",
	}, f.TakeOps(), "the leaf goes with its class")
	assert.Equal(t, plan(t, in), f.State())
}

func TestRemove(t *testing.T) {
	f := NewFake()
	reconcile(t, f, plan(t, squareInput(t)))
	f.TakeOps()

	removed, err := Remove(f)
	require.NoError(t, err)
	assert.True(t, removed)
	assert.Equal(t, []string{"delete qdisc htb d1: parent root default ffff"}, f.TakeOps(), "one delete takes everything")
	assert.True(t, f.State().Empty())
	qs, _ := f.Qdiscs()
	assert.Equal(t, []Qdisc{{Parent: HandleRoot, Kind: "noqueue"}}, qs, "the kernel's default is back")

	removed, err = Remove(f)
	require.NoError(t, err)
	assert.False(t, removed, "nothing of drip's left")
	assert.Empty(t, f.TakeOps())
}

func TestReconcileForeignRoot(t *testing.T) {
	f := NewFake()
	require.NoError(t, f.AddQdisc(Qdisc{Handle: MakeHandle(1, 0), Parent: HandleRoot, Kind: KindHTB}))
	f.TakeOps()
	_, err := Reconcile(f, plan(t, squareInput(t)))
	require.ErrorIs(t, err, ErrForeignRoot)
	assert.True(t, Fatal(err))
	assert.Contains(t, err.Error(), "qdisc htb 1: parent root")
	assert.Empty(t, f.TakeOps(), "someone else's root is left alone")

	removed, err := Remove(f)
	require.NoError(t, err)
	assert.False(t, removed, "and never removed")
}

func TestReconcileStaleState(t *testing.T) {
	// What a crashed earlier run with another topology might have left:
	// drip's root with a class, leaf and filters the plan does not have,
	// and a duplicate of a filter it does.
	f := NewFake()
	want := plan(t, squareInput(t))
	require.NoError(t, f.AddQdisc(want.Qdiscs[0]))
	stale := Class{Handle: PeerClass(9), Parent: RootHandle, Rate: 5, Ceil: 5}
	require.NoError(t, f.AddClass(stale))
	require.NoError(t, f.AddClass(Class{Handle: PeerClass(1), Parent: RootHandle, Rate: 7, Ceil: 7}))
	require.NoError(t, f.AddQdisc(Qdisc{Handle: PeerLeaf(9), Parent: stale.Handle, Kind: KindBFIFO, Limit: 1}))
	require.NoError(t, f.AddQdisc(Qdisc{Handle: PeerLeaf(1), Parent: PeerClass(1), Kind: KindNetem, Limit: 3}))
	require.NoError(t, f.AddFilter(Filter{Parent: RootHandle, Priority: 1, Dst: netip.MustParsePrefix("10.0.0.2/32"), Class: stale.Handle}))
	require.NoError(t, f.AddFilter(want.Filters[0]))
	require.NoError(t, f.AddFilter(want.Filters[0]))
	f.TakeOps()

	reconcile(t, f, want)
	assert.Equal(t, want, f.State())
	assert.Zero(t, reconcile(t, f, want))
}

func TestReconcileNoNetem(t *testing.T) {
	f := NewFake()
	f.NoNetem = true
	in := squareInput(t)
	_, err := Reconcile(f, plan(t, in))
	require.ErrorIs(t, err, ErrNetemUnsupported)
	assert.Contains(t, err.Error(), "add qdisc netem 1001:")

	in.NoNetem = true
	reconcile(t, f, plan(t, in))
	assert.Equal(t, plan(t, in), f.State(), "converges from the partial state")
}

// TestFakeRules checks that the fake refuses what the kernel refuses, so
// that the reconciler tests above can fail.
func TestFakeRules(t *testing.T) {
	f := NewFake()
	class := Class{Handle: PeerClass(1), Parent: RootHandle, Rate: 1, Ceil: 1}
	assert.ErrorIs(t, f.AddClass(class), syscall.EINVAL, "no htb root yet")
	require.NoError(t, f.AddQdisc(Qdisc{Handle: RootHandle, Parent: HandleRoot, Kind: KindHTB}))
	assert.ErrorIs(t, f.AddQdisc(Qdisc{Handle: RootHandle, Parent: HandleRoot, Kind: KindHTB}), syscall.EEXIST)
	assert.ErrorIs(t, f.AddQdisc(Qdisc{Handle: PeerLeaf(1), Parent: class.Handle, Kind: KindBFIFO}), syscall.ENOENT, "no class")
	require.NoError(t, f.AddClass(class))
	assert.ErrorIs(t, f.AddClass(class), syscall.EEXIST)
	require.NoError(t, f.AddQdisc(Qdisc{Handle: PeerLeaf(1), Parent: class.Handle, Kind: KindBFIFO}))
	assert.ErrorIs(t, f.AddQdisc(Qdisc{Handle: PeerLeaf(2), Parent: class.Handle, Kind: KindBFIFO}), syscall.EEXIST, "slot taken")
	assert.ErrorIs(t, f.ChangeQdisc(Qdisc{Handle: PeerLeaf(1), Parent: class.Handle, Kind: KindNetem}), syscall.EINVAL, "kind is fixed")
	require.NoError(t, f.AddFilter(Filter{Parent: RootHandle, Priority: 1, Dst: netip.MustParsePrefix("10.0.0.1/32"), Class: class.Handle}))
	assert.ErrorIs(t, f.DeleteClass(class), syscall.EBUSY, "filter bound")
	assert.ErrorIs(t, f.DeleteFilter(Filter{Parent: RootHandle, Priority: 1, ID: 99}), syscall.ENOENT)
}

// TestReconcileConverges is a property test: from random device states
// (subsets of an old and a new plan, with drifted parameters and
// duplicates), one pass reaches the desired state exactly and a second
// pass changes nothing.
func TestReconcileConverges(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for iter := range 300 {
		want := plan(t, randomInput(rng))
		f := NewFake()
		if rng.IntN(4) > 0 {
			seed(t, rng, f, plan(t, randomInput(rng)), want)
		}
		f.TakeOps()
		n, err := Reconcile(f, want)
		require.NoError(t, err, "iteration %d", iter)
		require.Equal(t, want, f.State(), "iteration %d", iter)
		assert.Len(t, f.TakeOps(), n)
		require.Zero(t, reconcile(t, f, want), "iteration %d: second pass", iter)
	}
}

func randomInput(rng *rand.Rand) Input {
	n := 1 + rng.IntN(6)
	var sb strings.Builder
	sb.WriteString("brokers:\n  - {name: self, id: 0}\n")
	for i := range n {
		fmt.Fprintf(&sb, "  - {name: %s, id: %d}\n", leafName(i), 1+rng.IntN(40)*n+i)
	}
	sb.WriteString("links:\n")
	in := Input{Self: "self", Addrs: map[string][]netip.Addr{}, NoNetem: rng.IntN(2) == 0}
	for i := range n {
		if rng.IntN(5) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "  - {a: self, b: %s, bandwidth: %d, delay: %dms, loss: %d%%}\n", leafName(i), rng.IntN(3)*500_000, rng.IntN(2)*10, rng.IntN(2))
		for range rng.IntN(3) {
			a := netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(12))})
			if rng.IntN(3) == 0 {
				a = netip.AddrFrom16([16]byte{0xfd, 15: byte(rng.IntN(12))})
			}
			in.Addrs[leafName(i)] = append(in.Addrs[leafName(i)], a)
		}
	}
	in.Topology, _ = topology.Parse([]byte(sb.String()))
	return in
}

// seed installs drip's root (with a random default class) and a random
// mix of objects from two plans, some drifted.
func seed(t *testing.T, rng *rand.Rand, f *Fake, old, want State) {
	root := Qdisc{Handle: RootHandle, Parent: HandleRoot, Kind: KindHTB, Default: uint16(rng.IntN(2)) * DefaultMinor}
	require.NoError(t, f.AddQdisc(root))
	for _, c := range append(slices.Clone(old.Classes), want.Classes...) {
		if rng.IntN(2) == 0 {
			c.Rate = max(1, c.Rate/uint64(1+rng.IntN(2)))
			_ = f.AddClass(c) // EEXIST when both plans have it
		}
	}
	for _, q := range append(slices.Clone(old.Qdiscs), want.Qdiscs...) {
		if q.Parent != HandleRoot && rng.IntN(2) == 0 {
			q.Limit += uint32(rng.IntN(2))
			_ = f.AddQdisc(q) // ENOENT without its class, EEXIST if taken
		}
	}
	for _, fl := range append(slices.Clone(old.Filters), want.Filters...) {
		for range rng.IntN(3) {
			require.NoError(t, f.AddFilter(fl))
		}
	}
}

func TestReconcileListErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, which := range []string{"qdiscs", "classes", "filters"} {
		t.Run(which, func(t *testing.T) {
			f := &failingTC{Fake: NewFake(), which: which, err: boom}
			_, err := Reconcile(f, plan(t, squareInput(t)))
			require.ErrorIs(t, err, boom)
			assert.Contains(t, err.Error(), "list "+which)
		})
	}
}

type failingTC struct {
	*Fake
	which string
	err   error
}

func (f *failingTC) Qdiscs() ([]Qdisc, error) {
	if f.which == "qdiscs" {
		return nil, f.err
	}
	return f.Fake.Qdiscs()
}

func (f *failingTC) Classes() ([]Class, error) {
	if f.which == "classes" {
		return nil, f.err
	}
	return f.Fake.Classes()
}

func (f *failingTC) Filters() ([]Filter, error) {
	if f.which == "filters" {
		return nil, f.err
	}
	return f.Fake.Filters()
}

func BenchmarkReconcileSteady(b *testing.B) {
	in := Input{Topology: star(64), Self: "hub", Addrs: map[string][]netip.Addr{}}
	for i := range 64 {
		in.Addrs[leafName(i)] = []netip.Addr{netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})}
	}
	want := plan(b, in)
	f := NewFake()
	reconcile(b, f, want)
	b.ReportAllocs()
	for b.Loop() {
		if n, err := Reconcile(f, want); err != nil || n != 0 {
			b.Fatal(n, err)
		}
	}
}
