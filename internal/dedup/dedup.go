package dedup

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"time"
)

// Stamp names a message in the mesh: the router that accepted it from a
// publisher, that router's boot epoch, and the router's count of accepted
// messages (from 1). Seq 0 means unstamped.
type Stamp struct {
	Origin uint32
	Epoch  uint64
	Seq    uint64
}

// Verdict is what Admit says of a stamp.
type Verdict uint8

const (
	// First is a first copy: pass it on.
	First Verdict = iota
	// Duplicate has been admitted before: drop it.
	Duplicate
	// Stale is too old to tell (see the package documentation): drop it.
	Stale
)

var verdictNames = [...]string{First: "first", Duplicate: "duplicate", Stale: "stale"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Config bounds what a Filter remembers.
type Config struct {
	// Window is how many sequence numbers are remembered per origin and
	// epoch; it is rounded up to a multiple of 64.
	Window int
	// Epochs is how many boot epochs of one origin are remembered: a
	// router that restarts twice within IdleTimeout still has every copy
	// of its earlier incarnations' messages told apart.
	Epochs int
	// MaxOrigins bounds the origins remembered; past it the origin heard
	// from least recently is forgotten. Set it above the mesh's router
	// count: a forgotten origin's late duplicates would pass.
	MaxOrigins int
	// IdleTimeout is how long an origin is remembered after its last
	// stamp.
	IdleTimeout time.Duration
}

// DefaultConfig is what brokers run with: 2 KiB per (origin, epoch).
func DefaultConfig() Config {
	return Config{Window: 1 << 14, Epochs: 3, MaxOrigins: 1 << 16, IdleTimeout: 10 * time.Minute}
}

// ClientConfig is what a subscribing client runs with: it sees only the
// messages it matches, from the few brokers it subscribes at in turn.
func ClientConfig() Config {
	return Config{Window: 1 << 12, Epochs: 3, MaxOrigins: 1 << 12, IdleTimeout: 10 * time.Minute}
}

// Validate reports every field out of range.
func (c Config) Validate() error {
	var errs []error
	if c.Window < 64 || c.Window > 1<<24 {
		errs = append(errs, fmt.Errorf("window %d, want 64 to %d sequence numbers", c.Window, 1<<24))
	}
	if c.Epochs < 1 || c.Epochs > 16 {
		errs = append(errs, fmt.Errorf("epochs %d, want 1 to 16", c.Epochs))
	}
	if c.MaxOrigins < 1 {
		errs = append(errs, fmt.Errorf("max origins %d, want at least 1", c.MaxOrigins))
	}
	if c.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("idle timeout %v, want more than 0", c.IdleTimeout))
	}
	return errors.Join(errs...)
}

// shards spreads origins over locks so that brokers receiving from many
// links at once rarely contend.
const shards = 16

// Filter admits each stamp once. The zero value is not usable; use New.
type Filter struct {
	cfg    Config
	words  int // uint64 words per window
	shards [shards]shard
}

type shard struct {
	mu      sync.Mutex
	origins map[uint32]*origin
	limit   int
}

// origin holds the windows of one router's recent epochs.
type origin struct {
	epochs   []epochWindow // at most Config.Epochs, in no particular order
	lastSeen time.Time
}

type epochWindow struct {
	epoch uint64
	w     *window
}

// New returns an empty filter.
func New(cfg Config) (*Filter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("duplicate filter: %w", err)
	}
	f := &Filter{cfg: cfg, words: (cfg.Window + 63) / 64}
	per := max(1, (cfg.MaxOrigins+shards-1)/shards)
	for i := range f.shards {
		f.shards[i].origins = make(map[uint32]*origin)
		f.shards[i].limit = per
	}
	return f, nil
}

// Config returns the filter's configuration.
func (f *Filter) Config() Config { return f.cfg }

// Admit records s and says whether it is a first copy. now is the time of
// arrival, for IdleTimeout. An unstamped message (Seq 0) is always First.
func (f *Filter) Admit(s Stamp, now time.Time) Verdict {
	if s.Seq == 0 {
		return First
	}
	sh := &f.shards[s.Origin%shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	o := sh.origins[s.Origin]
	if o == nil {
		if len(sh.origins) >= sh.limit {
			sh.evictOldest()
		}
		o = &origin{}
		sh.origins[s.Origin] = o
	}
	o.lastSeen = now
	w := o.window(s.Epoch, f)
	if w == nil {
		return Stale
	}
	return w.admit(s.Seq)
}

// window returns the window of epoch, making room for it if it is new;
// nil when the epoch is older than every kept one and none can be evicted.
func (o *origin) window(epoch uint64, f *Filter) *window {
	oldest := -1
	for i, e := range o.epochs {
		if e.epoch == epoch {
			return e.w
		}
		if oldest < 0 || e.epoch < o.epochs[oldest].epoch {
			oldest = i
		}
	}
	w := newWindow(f.words)
	if len(o.epochs) < f.cfg.Epochs {
		o.epochs = append(o.epochs, epochWindow{epoch, w})
		return w
	}
	if epoch < o.epochs[oldest].epoch {
		// An incarnation older than every one remembered: its copies can
		// no longer be told apart.
		return nil
	}
	o.epochs[oldest] = epochWindow{epoch, w}
	return w
}

func (sh *shard) evictOldest() {
	var victim uint32
	var at time.Time
	first := true
	for id, o := range sh.origins {
		if first || o.lastSeen.Before(at) || o.lastSeen.Equal(at) && id < victim {
			victim, at, first = id, o.lastSeen, false
		}
	}
	delete(sh.origins, victim)
}

// Expire forgets origins not heard from since now − IdleTimeout and returns
// how many it forgot.
func (f *Filter) Expire(now time.Time) int {
	n := 0
	for i := range f.shards {
		sh := &f.shards[i]
		sh.mu.Lock()
		for id, o := range sh.origins {
			if now.Sub(o.lastSeen) >= f.cfg.IdleTimeout {
				delete(sh.origins, id)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// Stats counts the origins and windows remembered and their bytes.
func (f *Filter) Stats() (origins, windows, bytes int) {
	for i := range f.shards {
		sh := &f.shards[i]
		sh.mu.Lock()
		origins += len(sh.origins)
		for _, o := range sh.origins {
			windows += len(o.epochs)
		}
		sh.mu.Unlock()
	}
	return origins, windows, windows * f.words * 8
}

// window remembers which of the last len(bits)×64 sequence numbers below
// hi have been admitted: bit s mod size stands for s.
type window struct {
	bits []uint64
	hi   uint64 // one past the highest sequence number admitted
}

func newWindow(words int) *window { return &window{bits: make([]uint64, words)} }

func (w *window) size() uint64 { return uint64(len(w.bits)) * 64 }

func (w *window) admit(seq uint64) Verdict {
	switch {
	case seq >= w.hi:
		w.clear(w.hi, seq)
		w.hi = seq + 1
	case w.hi-seq > w.size():
		return Stale
	case w.test(seq):
		return Duplicate
	}
	w.set(seq)
	return First
}

func (w *window) test(s uint64) bool {
	i := s % w.size()
	return w.bits[i/64]&(1<<(i%64)) != 0
}

func (w *window) set(s uint64) {
	i := s % w.size()
	w.bits[i/64] |= 1 << (i % 64)
}

// clear forgets sequence numbers lo..hi (inclusive), which the window is
// about to cover anew, a word at a time.
func (w *window) clear(lo, hi uint64) {
	if hi-lo+1 >= w.size() {
		clear(w.bits)
		return
	}
	for s := lo; s <= hi; {
		i := s % w.size()
		word, bit := i/64, i%64
		n := min(64-bit, hi-s+1) // bits to clear in this word
		mask := ^uint64(0)
		if n < 64 {
			mask = (1<<n - 1) << bit
		}
		w.bits[word] &^= mask
		s += n
	}
}

// onesCount is used by tests to check that clear leaves no stale bit.
func (w *window) onesCount() int {
	n := 0
	for _, b := range w.bits {
		n += bits.OnesCount64(b)
	}
	return n
}
