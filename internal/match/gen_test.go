package match

import (
	"math"
	"math/rand/v2"

	"github.com/dripmesh/drip/internal/content"
)

// chooser is a source of bounded choices: seeded randomness for property
// tests, fuzzer bytes for the fuzz test.
type chooser interface {
	intn(n int) int // in [0, n), n > 0
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int { return c.r.IntN(n) }

// byteChooser reads choices from fuzz input; once it runs dry every choice
// is 0, which ends the op stream (see genOps).
type byteChooser struct{ b []byte }

func (c *byteChooser) intn(n int) int {
	if len(c.b) == 0 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	if n > 256 {
		v = v<<8 | c.intn(256)
	}
	return v % n
}

func (c *byteChooser) empty() bool { return len(c.b) == 0 }

// Small vocabularies so that constraints meet values often, with the edge
// cases of content's semantics among them.
var (
	genNames = []string{"a", "b", "c", "d"}
	// The long string makes contains scan its operands rather than walk
	// the trie when a name has few of them.
	genStrings = []string{"", "a", "ab", "abc", "b", "ba", "bab", "3", "B", "abababababababababba"}
	genNumbers = []content.Value{
		content.Int(-1), content.Int(0), content.Int(1), content.Int(2), content.Int(3),
		content.Float(0), content.Float(math.Copysign(0, -1)), content.Float(2.5),
		content.Float(-2.5), content.Float(3), content.Float(math.NaN()),
		content.Float(math.Inf(1)), content.Float(math.Inf(-1)),
		content.Int(math.MaxInt64), content.Int(math.MinInt64), content.Int(math.MaxInt64 - 1),
		content.Float(0x1p63), content.Float(-0x1p63), content.Float(1e19),
		content.Int(1<<53 + 1), content.Float(1 << 53), content.Int(1 << 53),
	}
	genOps = []content.Op{
		content.OpEq, content.OpNe, content.OpLt, content.OpLe, content.OpGt, content.OpGe,
		content.OpPrefix, content.OpSuffix, content.OpContains, content.OpExists,
	}
)

func genValue(c chooser) content.Value {
	switch c.intn(4) {
	case 0, 1:
		return genNumbers[c.intn(len(genNumbers))]
	case 2:
		return content.String(genStrings[c.intn(len(genStrings))])
	default:
		return content.Bool(c.intn(2) == 1)
	}
}

// genConstraint returns a constraint whose operator applies to its value;
// the value is redrawn until it does. With nonFinite, float operands may be
// NaN or infinite, which Validate refuses but the index still handles.
func genConstraint(c chooser, nonFinite bool) content.Constraint {
	name := genNames[c.intn(len(genNames))]
	op := genOps[c.intn(len(genOps))]
	if op == content.OpExists {
		return content.Constraint{Name: name, Op: op}
	}
	for {
		k := content.Constraint{Name: name, Op: op, Value: genValue(c)}
		if op.AppliesTo(k.Value.Kind()) && (nonFinite || k.Validate() == nil) {
			return k
		}
		if cc, ok := c.(*byteChooser); ok && cc.empty() {
			// Out of bytes every draw is the same: fall back to a string,
			// which every operator but exists takes.
			return content.Constraint{Name: name, Op: op, Value: content.String("a")}
		}
	}
}

// genPredicate returns 1–4 filters of 1–4 constraints, with a chance of
// repeating a constraint inside a filter and a filter inside the predicate.
func genPredicate(c chooser, nonFinite bool) content.Predicate {
	p := make(content.Predicate, 1+c.intn(4))
	for i := range p {
		if i > 0 && c.intn(6) == 0 {
			p[i] = p[c.intn(i)]
			continue
		}
		f := make(content.Filter, 1+c.intn(4))
		for j := range f {
			if j > 0 && c.intn(6) == 0 {
				f[j] = f[c.intn(j)]
				continue
			}
			f[j] = genConstraint(c, nonFinite)
		}
		p[i] = f
	}
	return p
}

func genMessage(c chooser) content.Message {
	attrs := map[string]content.Value{}
	for _, n := range genNames {
		if c.intn(4) != 0 {
			attrs[n] = genValue(c)
		}
	}
	return content.MessageFrom(attrs)
}

// genInvalidPredicate returns a predicate that Validate rejects.
func genInvalidPredicate(c chooser) content.Predicate {
	bad := content.Filter{{Name: "a", Op: content.OpPrefix, Value: content.Int(1)}}
	switch c.intn(4) {
	case 0:
		return content.Predicate{}
	case 1:
		return content.Predicate{content.Filter{}}
	case 2:
		return append(genPredicate(c, false), bad)
	default:
		return content.Predicate{{{Name: "", Op: content.OpExists}}}
	}
}
