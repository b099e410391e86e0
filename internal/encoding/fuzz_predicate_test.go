package encoding

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/dripmesh/drip/internal/content"
)

// encodeBudget is what one predicate's encoding may allocate: a fixed part
// and a part per byte of its text. A predicate of 1,024 filters, the most
// the parser takes, expands to at most 16,384 Blooms of 256 bytes (4 MiB);
// the wrapped expansion took gigabytes from 690 bytes.
const (
	encodeBudgetBase    = 8 << 20
	encodeBudgetPerByte = 8 << 10
)

// workBudget is what one predicate's encoding may hash: categories, each
// K hashed positions, at most a fixed part and a part per byte of its
// text. The hashing is the encoding's time, counted rather than clocked,
// so that the bound holds on any machine under any load.
const (
	workBudgetBase    = 1 << 10
	workBudgetPerByte = 64
)

// FuzzEncodePredicate parses untrusted predicate text as a broker does
// (content.DefaultLimits) and encodes it under both schemes, checking what
// one input may cost: at most maxDisjuncts Blooms per filter, categories
// to hash within workBudget (time: counted on cat-v2's plans, cat-v1
// hashing one per constraint), and allocations within encodeBudget
// (memory). The fuzzer's own hang detector catches an input that never
// returns.
func FuzzEncodePredicate(f *testing.F) {
	terms := func(n int, term string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(term, i)
		}
		return strings.Join(parts, " && ")
	}
	for _, s := range []string{
		`a = 1`,
		`x > 5 && x < 10 || s contains "ab" && t prefix "q"`,
		terms(64, `f%d < 1`),
		terms(64, `s%d contains "xy"`),
		terms(32, `f%d >= -3.5`) + " && " + terms(32, `s%d contains "q"`),
		strings.Repeat(terms(64, `f%d < 1`)+" || ", 9) + "z exists",
		`x >= 1 && x < 1.5`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		pred, err := content.Parse(in)
		if err != nil {
			return
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, s := range Schemes() {
			blooms := s.DefaultParams().EncodePredicate(pred)
			if limit := len(pred) * maxDisjuncts; len(blooms) > limit {
				t.Fatalf("%s: %d filters encode to %d Blooms, more than %d", s, len(pred), len(blooms), limit)
			}
		}
		runtime.ReadMemStats(&after)
		work := 0
		for _, f := range pred {
			for _, set := range v2FilterPlan(f).expand() {
				work += len(set)
			}
		}
		if limit := workBudgetBase + workBudgetPerByte*len(in); work > limit {
			t.Fatalf("encoding %d bytes of predicate hashes %d categories, more than %d", len(in), work, limit)
		}
		budget := uint64(encodeBudgetBase + encodeBudgetPerByte*len(in))
		if used := after.TotalAlloc - before.TotalAlloc; used > budget {
			t.Fatalf("encoding %d bytes of predicate allocated %d bytes, more than %d", len(in), used, budget)
		}
	})
}
