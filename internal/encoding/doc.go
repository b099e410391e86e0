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
// # Schemes (wire contract)
//
// A Scheme names the categorization and the Bloom layout; Params carry it
// with M and K. cat-v1 is Carzaniga09 §3's: existence and equality
// categories only, so that every operator but "=" maps to its attribute's
// existence category, and on the paper's comparative workload more than
// half of the brokers a message is sent to have no matching filter.
// cat-v2 (the default) keeps those categories and adds fine categories
// for ranges, prefixes, suffixes and substrings, hashed into their own
// part of a wider Bloom (docs/design.md §2, "Precise categories"). Brokers
// name their scheme in Open and in every advertisement; a mesh runs one,
// and brokers of different schemes refuse to link.
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
// the union over its attributes. Under cat-v1 a constraint gets its
// equality category if its operator is "=", and the existence category of
// its value's type otherwise (Carzaniga09 §3's γ); a filter gets the union
// over its constraints. Two cases get no category, which only weakens the
// filter: "exists" (it admits any type, so no single existence category is
// implied) and a constraint without a valid value (nothing satisfies it). A
// filter of only "exists" constraints therefore encodes to the zero Bloom,
// which every message's Bloom contains: still a correct necessary
// condition.
//
// # Fine categories (cat-v2, wire contract)
//
// A fine category is a class byte, the escaped name, '=' and a payload.
// The class bytes differ from the first byte of every category above, so
// no two kinds share a string:
//
//	r name = level '/' prefix   a node of the numeric key trie (level 1..14
//	                            in decimal, prefix in lowercase hex)
//	p name = b                  the string's first byte is b
//	s name = b                  its last byte is b
//	u name = b                  it contains byte b
//	b name = b1 b2              it contains b1 b2
//	l name =                    it is longer than 24 bytes
//
// The numeric key (numkey.go) is a monotone 14-bit function of a number's
// exact value, int64 and float64 alike: a sign bit, the exponent clamped
// to [-64, 63], and the top 6 mantissa bits, truncated. A number's
// attribute inserts the key's node at each of the 14 levels (NaN none). A
// string attribute inserts its first and last byte, and every byte and
// pair of consecutive bytes; a string longer than 24 bytes only those of
// its first and last 12 bytes, and the l category.
//
// A constraint maps to categories that every value satisfying it inserts;
// where no single category is implied it maps to a disjunction, and the
// filter to several Blooms (Carzaniga09 §3's π may map a predicate to many
// category sets). Under cat-v2:
//
//   - "=" as cat-v1; a filter on one attribute also gets its existence
//     category (K more bits for a filter that would have only K);
//   - every other operator gets its existence category as in cat-v1, plus:
//   - "!=" on a bool: the equality category of the other value;
//   - prefix p: p's first byte, and the pairs of its first 12 bytes;
//     suffix s: s's last byte, and the pairs of its last 12 bytes;
//   - contains c: c's byte (one byte) or pairs (more), or the l category
//     (two Blooms); only l if c is longer than 24 bytes;
//   - "<", "<=", ">", ">=": the constraints on one attribute are
//     intersected into an interval of keys (a strict bound at the edge of
//     its bucket leaving the bucket out), and the interval into the fewest
//     trie nodes that cover it: one Bloom per node, a node's alternatives
//     a disjunction;
//   - at most 8 pairs per string constraint (evenly spaced), at most 16
//     nodes per range in a filter on one attribute (each with its two
//     parent nodes, implied categories that add bits), 2 in a filter on
//     several, and at most 16 Blooms per filter; beyond, the cover is
//     coarsened (fewer, larger nodes) or a contains alternative dropped,
//     which only weakens the filter.
//
// docs/design.md §2 argues the choices with measurements.
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
// Under cat-v1 existence and equality categories set bits in [0, M).
// Under cat-v2 they set bits in [0, M/4) exactly as cat-v1 does at M/4, and
// fine categories set bits in [M/4, M): p_i = M/4 + ⌊x_i · (3M/4) / 2^64⌋.
// The frequent equality filters are then as selective as under cat-v1,
// however many fine categories a message has.
//
// # Wire form (wire contract)
//
// A Bloom's dense form is M/8 bytes, bit i in byte i/8 at bit i%8. An
// advertisement's filters travel in their scheme's form (wireform.go):
// dense under cat-v1, position lists under cat-v2. cat-v1 takes M a
// multiple of 8 in [8, 512], cat-v2 a multiple of 32 in [64, 2048], both
// 1 ≤ K ≤ 32; all brokers of a mesh must share scheme, M and K
// (DefaultParams is cat-v2, M=2048, K=6; DefaultParamsV1 cat-v1, M=512,
// K=6).
//
// # Advertisements and the PREDICATES table
//
// A broker advertises the Blooms of all its local filters, deduplicated
// and without covered ones (Advertise). Other brokers store them in a
// Table, router ID → Blooms, and match messages against an immutable,
// indexed Snapshot of it; see Snapshot for the index. Table.Snapshot
// indexes only what changed since its last full build while that is a
// small part of the table; Table.Plan, Build.Run and Table.Install do the
// same in three steps, of which only the first and last touch the table,
// so that the index can be built on another goroutine.
package encoding
