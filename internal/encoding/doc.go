// Package encoding is the Bloom-filter encoding of messages and predicates of
// Carzaniga09 §3 (docs/design.md §2) and the PREDICATES table that matches encoded
// messages against every broker's encoded predicate (Carzaniga09 §2.2).
//
// # Two phases
//
// A message m becomes a set of categories S_m = μ(m) and a predicate p one
// set S_p^i per filter; each set then becomes an M-bit Bloom filter with K
// positions per category. Categorization and hashing both preserve the
// subset relation, so (Carzaniga09 §3, eq. 1)
//
//	p(m) ⇒ ∃i: B_p^i ⊆ B_m
//
// and a Bloom match is a necessary condition for an exact match: it may
// select a broker that then delivers to nobody (a false positive, removed
// by the exact local match), never miss one.
//
// # Categories (wire contract)
//
// Categories are byte strings, and their bytes are hashed, so every broker
// must build exactly these:
//
//	existence  "∃" type name             ∃ is U+2203, bytes E2 88 83
//	equality   type name "=" value
//
// The type symbol is '$' for strings, '#' for numbers (int64 and float64
// share it because they compare with each other) and '?' for booleans. In
// the name, '\' and '=' are each preceded by a '\'. The value is last and
// unescaped: a string's bytes, content.CanonicalNumber for a number (so 3
// and 3.0 share "#x=3"), "true" or "false". The syntax is unambiguous: an
// equality category starts with an ASCII type symbol and an existence one
// with E2; the name ends at the first '=' not preceded by an escaping '\';
// and CanonicalNumber gives equal numbers one text and unequal ones
// different texts.
//
// An attribute a gets α(a) = {∃·type·name, type·name·'='·value}, a message
// the union over its attributes. A constraint gets its equality category if
// its operator is "=", and the existence category of its value's type
// otherwise (Carzaniga09 §3's γ); a filter gets the union over its
// constraints. Two cases get no category, which only weakens the filter:
// "exists" (it admits any type, so no single existence category is implied)
// and a constraint without a valid value (nothing satisfies it). A filter of
// only "exists" constraints therefore encodes to the zero Bloom, which
// every message's Bloom contains: still a correct necessary condition.
//
// # Hash layout (wire contract)
//
// For a category c with bytes c[0..n):
//
//	h   = FNV-1a 64 of c   (offset basis 14695981039346656037, prime 1099511628211)
//	x_i = splitmix64(h + (i+1)·0x9e3779b97f4a7c15 mod 2^64),  i = 0..K-1
//	p_i = ⌊x_i · M / 2^64⌋ (the high word of the 128-bit product)
//
// where splitmix64(z) is z ^= z>>30; z *= 0xbf58476d1ce4e5b9; z ^= z>>27;
// z *= 0x94d049bb133111eb; z ^= z>>31. Bit p_i is set for each i (two
// positions may coincide). Position i does not depend on K, and the
// high-word reduction needs neither division nor a power-of-two M. The
// positions are independent outputs of one generator rather than the
// double hashing h1 + i·h2, which at these small M makes related categories
// share positions and measurably raises the false-positive rate (see
// TestMembershipFalsePositiveRateMatchesTheory). The layout is ours, not
// github.com/bits-and-blooms/bloom's Locations, because a wire contract
// must not move with a library version (and that module is not a
// dependency); golden vectors pin it.
//
// # Wire form (wire contract)
//
// A Bloom travels as M/8 bytes, bit i in byte i/8 at bit i%8. M must be a
// multiple of 8 in [8, 512] and 1 ≤ K ≤ 32; all brokers of a mesh must
// share M and K (DefaultParams is M=512, K=6).
//
// # Advertisements and the PREDICATES table
//
// A broker advertises the Blooms of all its local filters, deduplicated
// and without covered ones (Advertise). Other brokers store them in a
// Table, router ID → Blooms, and match messages against an immutable,
// indexed Snapshot of it; see Snapshot for the index.
package encoding
