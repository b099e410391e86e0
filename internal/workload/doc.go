// Package workload generates the synthetic messages and predicates of Carzaniga09
// §5.1.4 (docs/design.md §7) and measures the replication factors that
// characterise an experiment (Carzaniga09 §5.1.4, Fig. 2).
//
// # Model
//
// Attributes are drawn from a vocabulary of Config.Names names. The first
// round(StringFraction·Names) names are string-typed and the rest int-typed,
// always, so that a constraint and a message never disagree on a name's type
// (a type mismatch would silently never match and distort replication).
//
//   - A message has AttrsPerMessage distinct names, uniform over the
//     vocabulary. A string value is uniform over the first Terms terms of a
//     built-in list of 200 frequent news-report terms (the seed's dictionary
//     [18] is not available, so the list stands in for it); an int value is
//     uniform in [0, IntMax].
//   - A filter has between MinConstraints and MaxConstraints constraints
//     (uniform) on distinct names, uniform over the vocabulary. String
//     constraints are 70% "=", 10% prefix, 10% suffix and 10% contains; the
//     operand of the last three is a non-empty proper substring of a term
//     taken from its start, end or interior, so that it can match. Int
//     constraints are 80% "=", 10% "<" and 10% ">". Equality values follow
//     the message distribution, as the seed prescribes. Config.RangeFraction
//     and TwoSidedFraction replace the int mix (the Ranges preset, ours, not
//     the paper's): ranges "<", ">" and two-sided lo < x < hi, the latter
//     two constraints on one name.
//   - A predicate is FiltersPerPredicate filters.
//
// Names is the knob that sets selectivity: with more names, a message
// carries a smaller share of the vocabulary and a constraint more often
// names an attribute the message lacks, so fewer messages match.
//
// # Reproducibility
//
// A Generator draws messages and predicates from two independent PCG
// streams, both derived from Config.Seed, so the predicates of an experiment
// do not depend on how many messages were drawn before them or vice versa.
// A Generator is not safe for concurrent use.
package workload
