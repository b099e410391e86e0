package dedup

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mustNew(t testing.TB, cfg Config) *Filter {
	t.Helper()
	f, err := New(cfg)
	require.NoError(t, err)
	return f
}

func TestAdmitTable(t *testing.T) {
	cfg := Config{Window: 128, Epochs: 2, MaxOrigins: 8, IdleTimeout: time.Minute}
	type step struct {
		s    Stamp
		want Verdict
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"first copy then duplicate", []step{{Stamp{1, 7, 5}, First}, {Stamp{1, 7, 5}, Duplicate}}},
		{"unstamped always passes", []step{{Stamp{1, 7, 0}, First}, {Stamp{1, 7, 0}, First}}},
		{"reordered within the window", []step{{Stamp{1, 7, 100}, First}, {Stamp{1, 7, 3}, First}, {Stamp{1, 7, 3}, Duplicate}, {Stamp{1, 7, 100}, Duplicate}}},
		{"below the window is stale", []step{{Stamp{1, 7, 300}, First}, {Stamp{1, 7, 173}, First}, {Stamp{1, 7, 172}, Stale}}},
		{"a jump forgets what it passed", []step{{Stamp{1, 7, 1}, First}, {Stamp{1, 7, 1000}, First}, {Stamp{1, 7, 999}, First}, {Stamp{1, 7, 1}, Stale}}},
		{"origins are apart", []step{{Stamp{1, 7, 5}, First}, {Stamp{2, 7, 5}, First}, {Stamp{2, 7, 5}, Duplicate}}},
		{"epochs are apart", []step{{Stamp{1, 7, 5}, First}, {Stamp{1, 8, 5}, First}, {Stamp{1, 7, 5}, Duplicate}, {Stamp{1, 8, 5}, Duplicate}}},
		{"a third epoch evicts the oldest", []step{{Stamp{1, 7, 5}, First}, {Stamp{1, 8, 5}, First}, {Stamp{1, 9, 5}, First}, {Stamp{1, 8, 5}, Duplicate}, {Stamp{1, 7, 5}, Stale}}},
		{"an epoch older than all kept is stale", []step{{Stamp{1, 8, 5}, First}, {Stamp{1, 9, 5}, First}, {Stamp{1, 3, 5}, Stale}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := mustNew(t, cfg)
			for i, st := range tc.steps {
				assert.Equal(t, st.want, f.Admit(st.s, t0), "step %d: %+v", i, st.s)
			}
		})
	}
}

// reference is the filter's specification with maps instead of bit rings.
type reference struct {
	window, epochs int
	origins        map[uint32][]uint64 // kept epochs
	seen           map[Stamp]bool
	hi             map[[2]uint64]uint64 // (origin, epoch) → one past the highest seq
}

func newReference(cfg Config) *reference {
	return &reference{window: (cfg.Window + 63) / 64 * 64, epochs: cfg.Epochs,
		origins: map[uint32][]uint64{}, seen: map[Stamp]bool{}, hi: map[[2]uint64]uint64{}}
}

func (r *reference) admit(s Stamp) Verdict {
	if s.Seq == 0 {
		return First
	}
	kept := r.origins[s.Origin]
	found := false
	for _, e := range kept {
		found = found || e == s.Epoch
	}
	if !found {
		if len(kept) == r.epochs {
			oldest := 0
			for i, e := range kept {
				if e < kept[oldest] {
					oldest = i
				}
			}
			if s.Epoch < kept[oldest] {
				return Stale
			}
			r.forget(s.Origin, kept[oldest])
			kept[oldest] = s.Epoch
		} else {
			kept = append(kept, s.Epoch)
		}
		r.origins[s.Origin] = kept
	}
	key := [2]uint64{uint64(s.Origin), s.Epoch}
	hi := r.hi[key]
	if s.Seq+uint64(r.window) < hi {
		return Stale
	}
	if r.seen[s] {
		return Duplicate
	}
	r.seen[s] = true
	r.hi[key] = max(hi, s.Seq+1)
	return First
}

func (r *reference) forget(origin uint32, epoch uint64) {
	for s := range r.seen {
		if s.Origin == origin && s.Epoch == epoch {
			delete(r.seen, s)
		}
	}
	delete(r.hi, [2]uint64{uint64(origin), epoch})
}

// TestAdmitMatchesReference: random streams of stamps — bursts, reordering
// within and beyond the window, repeats, new epochs — get the reference's
// verdict, stamp by stamp.
func TestAdmitMatchesReference(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		cfg := Config{Window: 64 * (1 + rng.IntN(4)), Epochs: 1 + rng.IntN(3), MaxOrigins: 64, IdleTimeout: time.Hour}
		f, ref := mustNew(t, cfg), newReference(cfg)
		next := map[[2]uint64]uint64{}
		var history []Stamp
		for i := range 2000 {
			var s Stamp
			switch k := rng.IntN(10); {
			case k < 2 && len(history) > 0: // a repeat of something sent
				s = history[rng.IntN(len(history))]
			default:
				s = Stamp{Origin: rng.Uint32N(3), Epoch: uint64(1 + rng.IntN(4))}
				key := [2]uint64{uint64(s.Origin), s.Epoch}
				next[key] += uint64(1 + rng.IntN(8))
				// Mostly in order, sometimes far behind (a slow path).
				s.Seq = next[key]
				if back := uint64(rng.IntN(3 * cfg.Window)); k == 9 && back < s.Seq {
					s.Seq -= back
				}
			}
			history = append(history, s)
			want := ref.admit(s)
			require.Equal(t, want, f.Admit(s, t0), "seed %d step %d stamp %+v window %d epochs %d", seed, i, s, cfg.Window, cfg.Epochs)
		}
	}
}

// TestNeverAdmitsTwice is the property exactly-once rests on: whatever the
// order, a stamp admitted once is never First again while its origin is
// remembered.
func TestNeverAdmitsTwice(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	f := mustNew(t, Config{Window: 256, Epochs: 2, MaxOrigins: 16, IdleTimeout: time.Hour})
	admitted := map[Stamp]bool{}
	for range 200000 {
		s := Stamp{Origin: rng.Uint32N(4), Epoch: uint64(1 + rng.IntN(3)), Seq: uint64(1 + rng.IntN(2000))}
		if f.Admit(s, t0) == First {
			require.False(t, admitted[s], "%+v admitted twice", s)
			admitted[s] = true
		}
	}
}

func TestWindowClearLeavesNoStaleBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for range 1000 {
		w := newWindow(1 + rng.IntN(4))
		hi := uint64(rng.IntN(1000))
		for s := uint64(0); s < w.size(); s++ {
			w.set(s)
		}
		w.hi = hi
		lo := hi
		top := lo + uint64(rng.IntN(int(w.size())+70))
		w.clear(lo, top)
		cleared := min(top-lo+1, w.size())
		require.Equal(t, int(w.size()-cleared), w.onesCount(), "clear(%d, %d) on %d bits", lo, top, w.size())
		for s := lo; s <= top && s < lo+w.size(); s++ {
			require.False(t, w.test(s), "bit %d survived clear(%d, %d)", s, lo, top)
		}
	}
}

func TestExpireAndEviction(t *testing.T) {
	f := mustNew(t, Config{Window: 64, Epochs: 1, MaxOrigins: shards, IdleTimeout: time.Minute})
	require.Equal(t, First, f.Admit(Stamp{1, 1, 1}, t0))
	require.Equal(t, First, f.Admit(Stamp{2, 1, 1}, t0.Add(50*time.Second)))
	assert.Equal(t, 1, f.Expire(t0.Add(70*time.Second)), "origin 1 is idle for 70 s")
	assert.Equal(t, First, f.Admit(Stamp{1, 1, 1}, t0.Add(71*time.Second)), "forgotten, so admitted again")
	assert.Equal(t, Duplicate, f.Admit(Stamp{2, 1, 1}, t0.Add(71*time.Second)))

	// One origin per shard: a second origin of shard 1 evicts the first.
	f = mustNew(t, Config{Window: 64, Epochs: 1, MaxOrigins: shards, IdleTimeout: time.Hour})
	f.Admit(Stamp{1, 1, 1}, t0)
	f.Admit(Stamp{1 + shards, 1, 1}, t0.Add(time.Second))
	origins, windows, bytes := f.Stats()
	assert.Equal(t, []int{1, 1, 8}, []int{origins, windows, bytes})
	assert.Equal(t, First, f.Admit(Stamp{1, 1, 1}, t0.Add(2*time.Second)), "evicted origin starts afresh")
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	require.NoError(t, ClientConfig().Validate())
	err := Config{Window: 1, Epochs: 0, MaxOrigins: 0, IdleTimeout: 0}.Validate()
	require.Error(t, err)
	for _, want := range []string{"window 1", "epochs 0", "max origins 0", "idle timeout 0s"} {
		assert.ErrorContains(t, err, want)
	}
	_, err = New(Config{})
	assert.ErrorContains(t, err, "duplicate filter: window 0")
}

// TestConcurrentAdmit: concurrent receivers of the same stamps admit each
// exactly once (run with -race).
func TestConcurrentAdmit(t *testing.T) {
	f := mustNew(t, DefaultConfig())
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := map[Stamp]int{}
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := map[Stamp]int{}
			for i := range 5000 {
				s := Stamp{Origin: uint32(i % 5), Epoch: 9, Seq: uint64(1 + (i+g*7)%5000)}
				if f.Admit(s, t0) == First {
					local[s]++
				}
			}
			mu.Lock()
			for s, n := range local {
				count[s] += n
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for s, n := range count {
		require.Equal(t, 1, n, "%+v", s)
	}
}

func BenchmarkAdmit(b *testing.B) {
	for _, tc := range []struct {
		name    string
		origins uint32
		jitter  int
	}{{"in-order", 1, 0}, {"reordered", 1, 64}, {"16-origins", 16, 8}} {
		b.Run(tc.name, func(b *testing.B) {
			f := mustNew(b, DefaultConfig())
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			seq := uint64(100)
			for b.Loop() {
				seq++
				s := seq
				if tc.jitter > 0 {
					s -= uint64(rng.IntN(tc.jitter))
				}
				f.Admit(Stamp{Origin: uint32(seq) % tc.origins, Epoch: 1, Seq: s}, t0)
			}
		})
	}
	b.Run("parallel", func(b *testing.B) {
		f := mustNew(b, DefaultConfig())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			seq := uint64(rand.Uint32())
			for pb.Next() {
				seq++
				f.Admit(Stamp{Origin: uint32(seq % 8), Epoch: 1, Seq: seq}, t0)
			}
		})
	})
}
