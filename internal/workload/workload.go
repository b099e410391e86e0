package workload

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dripmesh/drip/internal/content"
)

// Config parameterises the generator. The zero Config is invalid; start from
// Default or SingleConstraint.
type Config struct {
	Seed                int64   // every stream is reproducible from it
	Names               int     // attribute-name vocabulary size (>= AttrsPerMessage); the replication knob
	AttrsPerMessage     int     // 10 in the paper
	StringFraction      float64 // 0.6: fraction of names that are string-typed (the rest int)
	Terms               int     // 200: size of the string vocabulary (<= len of built-in term list)
	IntMax              int64   // 100: ints are uniform in [0, IntMax]
	FiltersPerPredicate int     // 20
	MinConstraints      int     // 1
	MaxConstraints      int     // 5
	// RangeFraction is the share of int constraints that are ranges, the
	// rest being "=". Zero means Carzaniga09 §5.1.4's mix, 10% "<" and 10%
	// ">", drawn exactly as the paper presets always drew it, so that their
	// seeded streams do not change.
	RangeFraction float64
	// TwoSidedFraction is the share of ranges that are two-sided, lo < x <
	// hi: two constraints on one name (a filter then has more constraints
	// than names), with hi - lo uniform in [2, IntMax/20+2], a few percent
	// of the values. The other ranges are "<" or ">", half each. Used only
	// with RangeFraction > 0.
	TwoSidedFraction float64
}

// Default is the generative model of Carzaniga09 §5.1.4: messages of 10
// attributes, 60% strings over 200 terms and 40% ints in [0,100], predicates
// of 20 filters of 1–5 constraints. The seed does not say how many names
// there are; 10 (every message carries every name) is the densest choice and
// the one that gives the highest replication.
func Default() Config {
	return Config{
		Seed:                1,
		Names:               10,
		AttrsPerMessage:     10,
		StringFraction:      0.6,
		Terms:               MaxTerms,
		IntMax:              100,
		FiltersPerPredicate: 20,
		MinConstraints:      1,
		MaxConstraints:      5,
	}
}

// SingleConstraint is the comparative workload of Carzaniga09 §5.1.4 and
// §5.2.1: Default with one constraint per filter, "to increase the matching
// probability", and 200 names, which reproduces the seed's Fig. 2 (80
// clients of 20 filters on 8 brokers, 10 per broker: client replication 4.2,
// i.e. the "5% client replication" of Figs. 4–5, broker replication 3.3).
// Measured with 80 predicates, 10 on each of 8 brokers, and 10,000
// messages, averaged over seeds 1–5 (TestReplicationTable):
//
//	Names   client   broker
//	   10    55.5     8.00
//	   20    36.0     7.96
//	   40    19.5     7.45
//	   80     9.94    5.79
//	  160     5.76    4.14
//	  190     4.60    3.51
//	  200     4.34    3.40
//	  210     4.05    3.21
//	  230     3.56    2.91
//
// Seeds differ by about ±0.4 in client replication, more than the step
// between 200 and 210.
func SingleConstraint() Config {
	c := Default()
	c.Names = 200
	c.MinConstraints = 1
	c.MaxConstraints = 1
	return c
}

// Ranges is a range-heavy workload of our own (docs/results/encoded-matching.md),
// the range counterpart of SingleConstraint: 200 names of which 80% are
// ints in [0, 10000], one attribute per filter, 90% of int constraints
// ranges and 80% of those two-sided (lo < x < hi, "price between"), the
// rest "<" or ">". Ints span four decades, so an encoding's buckets (1/64
// of an octave, up to 128 wide here) are coarser than the values. With 200
// filters per broker a message is wanted by about 60% of the brokers
// (TestRangesReplication).
func Ranges() Config {
	c := SingleConstraint()
	c.StringFraction = 0.2
	c.IntMax = 10000
	c.RangeFraction = 0.9
	c.TwoSidedFraction = 0.8
	return c
}

// Validate reports the first field of c that makes no sense.
func (c Config) Validate() error {
	switch {
	case c.Names < 1:
		return fmt.Errorf("workload: Names = %d, want at least 1", c.Names)
	case c.AttrsPerMessage < 1:
		return fmt.Errorf("workload: AttrsPerMessage = %d, want at least 1", c.AttrsPerMessage)
	case c.AttrsPerMessage > c.Names:
		return fmt.Errorf("workload: AttrsPerMessage = %d exceeds Names = %d (a message's names are distinct)",
			c.AttrsPerMessage, c.Names)
	case math.IsNaN(c.StringFraction) || c.StringFraction < 0 || c.StringFraction > 1:
		return fmt.Errorf("workload: StringFraction = %v, want a fraction in [0, 1]", c.StringFraction)
	case c.Terms < 1 || c.Terms > MaxTerms:
		return fmt.Errorf("workload: Terms = %d, want 1 to %d (the built-in term list)", c.Terms, MaxTerms)
	case c.IntMax < 0:
		return fmt.Errorf("workload: IntMax = %d, want at least 0", c.IntMax)
	case c.FiltersPerPredicate < 1:
		return fmt.Errorf("workload: FiltersPerPredicate = %d, want at least 1", c.FiltersPerPredicate)
	case c.MinConstraints < 1:
		return fmt.Errorf("workload: MinConstraints = %d, want at least 1", c.MinConstraints)
	case c.MinConstraints > c.MaxConstraints:
		return fmt.Errorf("workload: MinConstraints = %d exceeds MaxConstraints = %d",
			c.MinConstraints, c.MaxConstraints)
	case c.MaxConstraints > c.Names:
		return fmt.Errorf("workload: MaxConstraints = %d exceeds Names = %d (a filter's names are distinct)",
			c.MaxConstraints, c.Names)
	case math.IsNaN(c.RangeFraction) || c.RangeFraction < 0 || c.RangeFraction > 1:
		return fmt.Errorf("workload: RangeFraction = %v, want a fraction in [0, 1]", c.RangeFraction)
	case math.IsNaN(c.TwoSidedFraction) || c.TwoSidedFraction < 0 || c.TwoSidedFraction > 1:
		return fmt.Errorf("workload: TwoSidedFraction = %v, want a fraction in [0, 1]", c.TwoSidedFraction)
	}
	// Generated predicates must be ones a broker accepts from a client.
	if l := content.DefaultLimits(); c.maxFilterLen() > l.MaxConstraints || c.FiltersPerPredicate > l.MaxFilters {
		return fmt.Errorf("workload: %d filters of up to %d constraints exceed content.DefaultLimits (%d filters of %d)",
			c.FiltersPerPredicate, c.maxFilterLen(), l.MaxFilters, l.MaxConstraints)
	}
	return nil
}

// maxFilterLen is the most constraints a filter can have: two-sided ranges
// put two on one name.
func (c Config) maxFilterLen() int {
	if c.RangeFraction > 0 && c.TwoSidedFraction > 0 {
		return 2 * c.MaxConstraints
	}
	return c.MaxConstraints
}

// stringNames is how many of the names, the first ones, are string-typed.
func (c Config) stringNames() int {
	return int(math.Round(c.StringFraction * float64(c.Names)))
}

// Generator draws messages and predicates from a Config. It is not safe for
// concurrent use.
type Generator struct {
	cfg      Config
	names    []string
	nStrings int // names[:nStrings] are string-typed

	// Messages and predicates use separate streams and scratch space so that
	// neither sequence depends on how many of the other were drawn.
	msgRand, predRand *rand.Rand
	msgPerm, predPerm []int // permutations of name indexes for sampling without replacement
}

// Stream identifiers mixed into the seed; changing them changes every
// seeded experiment.
const (
	streamMessages   = 0x6d657373616765 // "message"
	streamPredicates = 0x70726564696361 // "predica"
)

// New returns a generator for c, or c's validation error.
func New(c Config) (*Generator, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{
		cfg:      c,
		names:    vocabulary(c.Names),
		nStrings: c.stringNames(),
		msgRand:  newRand(c.Seed, streamMessages),
		predRand: newRand(c.Seed, streamPredicates),
		msgPerm:  identity(c.Names),
		predPerm: identity(c.Names),
	}
	return g, nil
}

// Config returns the configuration g was built with.
func (g *Generator) Config() Config { return g.cfg }

// Message returns the next message of the message stream.
func (g *Generator) Message() content.Message {
	k := g.cfg.AttrsPerMessage
	attrs := make([]content.Attribute, k)
	for i, n := range sample(g.msgRand, g.msgPerm, k) {
		attrs[i] = content.Attribute{Name: g.names[n], Value: g.value(g.msgRand, n)}
	}
	m, err := content.NewMessage(attrs, nil)
	if err != nil {
		// Names are distinct and values valid by construction.
		panic(fmt.Sprintf("workload: generated an invalid message: %v", err))
	}
	return m
}

// Messages returns the next n messages of the message stream.
func (g *Generator) Messages(n int) []content.Message {
	ms := make([]content.Message, n)
	for i := range ms {
		ms[i] = g.Message()
	}
	return ms
}

// Filter returns the next filter of the predicate stream.
func (g *Generator) Filter() content.Filter {
	lo, hi := g.cfg.MinConstraints, g.cfg.MaxConstraints
	k := lo + g.predRand.IntN(hi-lo+1)
	f := make(content.Filter, 0, k)
	for _, n := range sample(g.predRand, g.predPerm, k) {
		f = g.appendConstraints(f, n)
	}
	return f
}

// Predicate returns the next predicate of the predicate stream.
func (g *Generator) Predicate() content.Predicate {
	p := make(content.Predicate, g.cfg.FiltersPerPredicate)
	for i := range p {
		p[i] = g.Filter()
	}
	return p
}

// Predicates returns the next n predicates of the predicate stream.
func (g *Generator) Predicates(n int) []content.Predicate {
	ps := make([]content.Predicate, n)
	for i := range ps {
		ps[i] = g.Predicate()
	}
	return ps
}

// value draws a value for name index n from the message distribution, which
// the seed also prescribes for constraint operands.
func (g *Generator) value(r *rand.Rand, n int) content.Value {
	if n < g.nStrings {
		return content.String(terms[r.IntN(g.cfg.Terms)])
	}
	return content.Int(g.intValue(r))
}

func (g *Generator) intValue(r *rand.Rand) int64 {
	if g.cfg.IntMax == math.MaxInt64 {
		return int64(r.Uint64() >> 1)
	}
	return r.Int64N(g.cfg.IntMax + 1)
}

// appendConstraints draws the constraints on name index n, with the
// operator mix of Carzaniga09 §5.1.4 or, for ints, the Config's ranges: one
// constraint, or two for a two-sided range.
func (g *Generator) appendConstraints(f content.Filter, n int) content.Filter {
	r := g.predRand
	c := content.Constraint{Name: g.names[n], Op: content.OpEq}
	if n >= g.nStrings {
		if g.cfg.RangeFraction == 0 {
			switch x := r.IntN(10); {
			case x == 8:
				c.Op = content.OpLt
			case x == 9:
				c.Op = content.OpGt
			}
			c.Value = content.Int(g.intValue(r))
			return append(f, c)
		}
		if r.Float64() < g.cfg.RangeFraction {
			if r.Float64() < g.cfg.TwoSidedFraction {
				lo := g.intValue(r)
				width := 2 + r.Int64N(g.cfg.IntMax/20+1)
				hi := lo + width
				if hi < lo { // overflow near MaxInt64
					hi = math.MaxInt64
				}
				gt := content.Constraint{Name: c.Name, Op: content.OpGt, Value: content.Int(lo)}
				lt := content.Constraint{Name: c.Name, Op: content.OpLt, Value: content.Int(hi)}
				return append(f, gt, lt)
			}
			c.Op = content.OpLt
			if r.IntN(2) == 0 {
				c.Op = content.OpGt
			}
		}
		c.Value = content.Int(g.intValue(r))
		return append(f, c)
	}
	return append(f, g.stringConstraint(r, c))
}

// stringConstraint draws a string constraint with the operator mix of
// Carzaniga09 §5.1.4.
func (g *Generator) stringConstraint(r *rand.Rand, c content.Constraint) content.Constraint {
	t := terms[r.IntN(g.cfg.Terms)]
	switch r.IntN(10) {
	case 7:
		c.Op = content.OpPrefix
		t = t[:1+r.IntN(len(t)-1)]
	case 8:
		c.Op = content.OpSuffix
		t = t[1+r.IntN(len(t)-1):]
	case 9:
		// An interior substring: it starts after the first byte and ends
		// before the last, so it is neither a prefix nor a suffix operand.
		c.Op = content.OpContains
		length := 1 + r.IntN(len(t)-2)
		start := 1 + r.IntN(len(t)-1-length)
		t = t[start : start+length]
	}
	c.Value = content.String(t)
	return c
}

// sample returns k distinct indexes of perm, uniformly, by a partial
// Fisher–Yates shuffle. It is uniform whatever order perm is left in by
// earlier calls, so perm need not be reset. The result aliases perm.
func sample(r *rand.Rand, perm []int, k int) []int {
	for i := 0; i < k; i++ {
		j := i + r.IntN(len(perm)-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm[:k]
}

func identity(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

// vocabulary returns n attribute names "a00", "a01", ... zero-padded to a
// common width so that they sort in index order.
func vocabulary(n int) []string {
	width := len(fmt.Sprint(n - 1))
	if width < 2 {
		width = 2
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("a%0*d", width, i)
	}
	return names
}

// newRand derives a PCG stream from the seed and a stream identifier,
// through splitmix64 so that nearby seeds give unrelated streams.
func newRand(seed int64, stream uint64) *rand.Rand {
	s := uint64(seed) ^ stream
	return rand.New(rand.NewPCG(splitmix64(&s), splitmix64(&s)))
}

func splitmix64(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
