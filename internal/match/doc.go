// Package match is drip's exact local matcher: given a message, it finds the
// local subscribers whose predicates the message satisfies, at a cost that
// grows with what the message satisfies rather than with the number or the
// complexity of the installed predicates. It is what a broker runs for local
// delivery (Carzaniga09 §2.2, docs/design.md §4), where Bloom-filter false positives
// are removed.
//
// # Why not evaluate predicates one by one
//
// A JMS broker evaluates every subscriber's selector in isolation, so its
// cost per message is t_rcv + n·t_fltr + r·t_tx for n installed filters and
// replication r (Henjes07 §4.5), and it collapses as selectors get more
// expensive (Gorton03 §3.3, §4.2). Gorton03's remedy is to break selectors
// into "cacheable units" shared by all selectors and to evaluate each unit
// once per message. This package takes that idea to its end:
//
//   - Every distinct constraint is interned once, whoever uses it: x < 3
//     and x < 3.0 are the same constraint, and x = 1 && x = 1 is one
//     constraint required once. Identical filters are interned too, so a
//     filter shared by a thousand subscribers is checked once per message.
//     Both are reference-counted, and Remove frees what nobody uses.
//   - Per attribute name, the constraints are indexed so that those a value
//     satisfies are found without testing the others: "=" through a hash
//     map (numbers keyed so that int 3 and float 3.0 meet, and string "3"
//     stays apart from number 3); prefix and suffix by walking a trie of
//     the operands along the value; contains by walking that trie from
//     each position of the value, or, for a long value and few operands,
//     by scanning them; "<", "<=", ">", ">=" on numbers and strings through
//     sorted thresholds and a binary search; "!=" as all the "!=" of that
//     name and kind but the one equal to the value.
//   - Each filter is reached through one "access" constraint, the one
//     guessed least often satisfied ("=" before prefix and suffix, before
//     contains, before orderings, before "!=", before exists). Only when a
//     message satisfies it are the filter's other constraints checked. A
//     filter of five constraints whose access constraint fails costs
//     nothing.
//   - The broad operators (orderings, "!=", exists) are satisfied by about
//     half or nearly all values, so enumerating the satisfied ones would
//     cost in proportion to how many are installed. They are linked into
//     the per-name structures only while they are some filter's access
//     constraint; otherwise they are evaluated on demand, for the filters
//     whose access constraint matched, on the value the message gave their
//     name. The selective ones are found once per message and stamped, so
//     checking them costs one lookup.
//   - Many filters often share their access constraint and differ in a
//     numeric bound (symbol = "DRIP" && price < K, one K per subscriber).
//     Those are kept sorted by the bound, per attribute and operator, so
//     a message visits only the filters whose bound its value satisfies:
//     one binary search instead of one check per filter (boundGroup).
//
// This is the access-predicate scheme of Fabret et al. ("Filtering
// algorithms and implementation for very fast publish/subscribe systems",
// SIGMOD 2001) rather than the counting algorithm of Carzaniga and Wolf's
// SFF, which increments a counter of every filter for each of its satisfied
// constraints, so that its cost grows with the size of the conjunctions.
// Stamps numbered per message replace any per-message reset, so Match does
// no O(filters) clearing and, in steady state, no allocation.
//
// # Semantics
//
// Match agrees with content.Predicate.Matches on every input; the tests
// check it against one-by-one evaluation on random workloads. In short
// (content's doc.go is the reference):
//
//   - A missing attribute satisfies no constraint, not even "!=". "exists"
//     is satisfied by an attribute of any type.
//   - Numbers compare numerically across int64 and float64, exactly: 3 = 3.0
//     but 9007199254740993 != 9007199254740992.0. NaN satisfies no ordering
//     or equality constraint and satisfies every "!=" on numbers. (Validate
//     refuses NaN and infinite operands; the index would still treat them
//     as content.Constraint.Matches does, and the tests check it.)
//   - Strings compare bytewise; prefix, suffix and contains apply to strings
//     only. Booleans support "=" and "!=" only.
//   - Any other combination is a type mismatch and satisfies nothing, "!="
//     included.
//
// A subscriber matches when some filter of its predicate matches, and is
// reported once per message however many of its filters match. Empty
// predicates and filters are rejected by Add, as by content.Predicate's
// Validate.
package match
