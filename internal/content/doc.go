// Package content is drip's data model (Carzaniga09 §2.1, docs/design.md §1): typed
// attribute values, messages, constraints, filters (conjunctions of
// constraints) and predicates (disjunctions of filters), their exact
// evaluation, and the text predicate language with its parser and canonical
// printer.
//
// # Evaluation semantics
//
// A constraint is satisfied only by a message that has an attribute of that
// name whose value is comparable with the constraint's value:
//
//   - A missing attribute satisfies no constraint, not even "!=" (SQL's NULL
//     rule, and what JMS selectors do). "exists" is satisfied by an attribute
//     of any type.
//   - Numbers compare numerically across int64 and float64, exactly (no
//     rounding through float64): 3 = 3.0, 2 < 2.5, and 9007199254740993 is
//     not equal to 9007199254740992.0. NaN satisfies no ordering or equality
//     constraint and satisfies "!=".
//   - Strings compare bytewise (lexicographic order of their UTF-8 bytes);
//     prefix, suffix and contains apply to strings only.
//   - Booleans support "=" and "!=" only.
//   - Any other combination (a string constraint on an int attribute, say) is
//     a type mismatch and is not satisfied, "!=" included.
//
// An empty filter (no constraints) matches every message; an empty predicate
// (no filters) matches none. Parsing never produces either: they exist only
// for programmatic use.
package content
