package encoding

import "fmt"

// Scheme names a categorization and Bloom layout (doc.go). Every broker of
// a mesh must use the same one: a Bloom encoded under one scheme means
// nothing under another, and a filter matched against a message encoded
// differently can miss it. Brokers therefore name their scheme in Open and
// in every predicate advertisement, and refuse peers of another scheme.
type Scheme uint8

// The schemes. The zero value is cat-v1, which is what a broker that names
// no scheme (one older than the field) encodes with.
const (
	// SchemeCatV1 is Carzaniga09 §3's categorization: existence and
	// equality categories only, every operator but "=" mapped to the
	// attribute's existence category.
	SchemeCatV1 Scheme = iota
	// SchemeCatV2 adds fine categories that keep ranges, prefixes,
	// suffixes and substrings selective, hashed into their own part of a
	// wider Bloom (docs/design.md §2, "Precise categories").
	SchemeCatV2
)

// The scheme names of the wire (Open.bloom_scheme, PredicateAd.bloom_scheme)
// and the --bloom-scheme flag. Exchanged between brokers: do not change.
var schemeNames = [...]string{SchemeCatV1: "cat-v1", SchemeCatV2: "cat-v2"}

// String returns the scheme's wire name.
func (s Scheme) String() string {
	if int(s) < len(schemeNames) {
		return schemeNames[s]
	}
	return fmt.Sprintf("scheme(%d)", uint8(s))
}

// ParseScheme returns the scheme of a wire or flag name. The empty name is
// cat-v1: brokers older than the scheme field send none.
func ParseScheme(name string) (Scheme, error) {
	if name == "" {
		return SchemeCatV1, nil
	}
	for s, n := range schemeNames {
		if n == name {
			return Scheme(s), nil
		}
	}
	return 0, fmt.Errorf("unknown Bloom scheme %q, want cat-v1 or cat-v2", name)
}

// DefaultParams are the scheme's default M and K: DefaultParams for
// cat-v2, DefaultParamsV1 for cat-v1, and for an unknown scheme Params
// that do not validate.
func (s Scheme) DefaultParams() Params {
	switch s {
	case SchemeCatV1:
		return DefaultParamsV1()
	case SchemeCatV2:
		return DefaultParams()
	}
	return Params{Scheme: s}
}

// Schemes lists the schemes this build implements, oldest first.
func Schemes() []Scheme { return []Scheme{SchemeCatV1, SchemeCatV2} }
