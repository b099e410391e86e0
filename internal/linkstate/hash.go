package linkstate

import "github.com/dripmesh/drip/internal/encoding"

// The functions in this file are exchanged between brokers in effect: every
// router must compute the same checksums (they travel in DBSummary and
// decide between same-Seq copies) and the same edge hashes (they break SPF
// ties, and routers that broke them differently would forward in loops).
// Do not change them; hash_test.go pins golden values.

const golden = 0x9e3779b97f4a7c15

// mix64 is splitmix64's finalizer: a cheap bijection that spreads every
// input bit over the output.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// hasher folds a sequence of words into a 64-bit checksum. It is not
// cryptographic: it guards against accidents (two incarnations of a router
// reusing a sequence number), not against forgers.
type hasher struct{ h uint64 }

func (s *hasher) add(v uint64) { s.h = mix64(s.h + v + golden) }

func boolWord(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Checksum returns the checksum of the LSA's contents, Seq and Age
// excluded.
func (a *LSA) Checksum() uint64 {
	s := hasher{h: uint64(KindRouter)}
	s.add(uint64(a.Origin))
	s.add(boolWord(a.Withdrawn))
	for _, l := range a.Links {
		s.add(uint64(l.Neighbor)<<32 | uint64(l.Cost))
	}
	return s.h
}

// v1Words is how many words of each filter a cat-v1 checksum covers: the
// 512 bits that every Bloom had before cat-v2 widened them.
const v1Words = 512 / 64

// Checksum returns the checksum of the advertisement's contents, Seq and
// Age excluded; QoS classes count only when there are some. For cat-v1 it is the checksum brokers computed before
// schemes existed (the first 512 bits of each filter, no scheme word), so
// that mixed-version meshes of cat-v1 brokers keep agreeing; any other
// scheme adds its number and every word of its filters.
func (p *PredAd) Checksum() uint64 {
	s := hasher{h: uint64(KindPredicate)}
	s.add(uint64(p.Origin))
	s.add(boolWord(p.Withdrawn))
	s.add(uint64(p.Params.M)<<32 | uint64(p.Params.K))
	n := v1Words
	if p.Params.Scheme != encoding.SchemeCatV1 {
		s.add(uint64(p.Params.Scheme))
		n = encoding.MaxBits / 64
	}
	for _, f := range p.Filters {
		for i := range n {
			s.add(f.Word(i))
		}
	}
	s.addClasses(p.Classes, n)
	return s.h
}

// summaryHash is an entry's contribution to the LSDB digest. The digest is
// the sum of these over all entries, so it updates in O(1) per change and
// does not depend on the order entries arrived in.
func summaryHash(s Summary) uint64 {
	h := hasher{h: uint64(s.Kind)}
	h.add(uint64(s.Origin))
	h.add(s.Seq)
	h.add(s.Sum)
	return h.h
}

// edgeShift makes room for path sums: an edge hash has 64−edgeShift bits,
// so a path of fewer than 2^edgeShift links cannot overflow the sum.
const edgeShift = 16

// EdgeHash is the secondary weight of the directed link u→v in SPF (doc.go,
// "Shortest paths and tie-breaking"): a path's weight is (Σ cost, Σ
// EdgeHash), compared lexicographically. It is exported for reference
// implementations in tests.
func EdgeHash(u, v uint32) uint64 {
	return mix64(uint64(u)<<32|uint64(v)) >> edgeShift
}
