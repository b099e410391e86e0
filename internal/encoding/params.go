package encoding

import (
	"fmt"
	"math/bits"
)

// Params are the encoding parameters every broker of a mesh must share:
// the scheme, M bits per filter and K hash positions per category. Two
// brokers with different Params compute unrelated Blooms and would
// silently drop each other's messages, so they travel in Open and with
// every advertisement.
type Params struct {
	Scheme Scheme
	M      int
	K      int
}

// MaxK bounds K: beyond it every message's Bloom is nearly full at any M
// this package allows, and matching degenerates to broadcast.
const MaxK = 32

// maxBitsV1 is the widest cat-v1 Bloom. Brokers older than cat-v2 refuse
// anything wider, so cat-v1 keeps their limit.
const maxBitsV1 = 512

// DefaultParams are the mesh-wide defaults: cat-v2 at M=2048, K=6, chosen
// by the study of docs/results/encoded-matching.md. Its first quarter, 512
// bits, holds exactly the Bloom that cat-v1's own default (M=512, K=6)
// would compute for the same existence and equality categories; the rest
// holds the fine categories.
func DefaultParams() Params { return Params{Scheme: SchemeCatV2, M: 2048, K: 6} }

// DefaultParamsV1 are cat-v1's defaults, chosen by the false-positive study
// of docs/results/encoded-matching.md on the workload of Carzaniga09
// §5.1.4: at M=512, K=6 a broker that does not match a message even on
// categories is still selected for it only 2% of the time (M=256 cannot
// go below 34% there, whatever K), and message Blooms are a fifth full,
// which keeps the indexed Match fast.
func DefaultParamsV1() Params { return Params{Scheme: SchemeCatV1, M: 512, K: 6} }

// Validate reports whether p can be used: a known scheme, 1 ≤ K ≤ MaxK,
// and for cat-v1 M a multiple of 8 in [8, 512], for cat-v2 a multiple of
// 32 in [64, MaxBits] (its coarse part is M/4 bits, whole bytes).
func (p Params) Validate() error {
	if p.K < 1 || p.K > MaxK {
		return fmt.Errorf("encoding: K=%d hash positions, want 1..%d", p.K, MaxK)
	}
	switch p.Scheme {
	case SchemeCatV1:
		if p.M < 8 || p.M > maxBitsV1 || p.M%8 != 0 {
			return fmt.Errorf("encoding: M=%d bits, want a multiple of 8 in 8..%d", p.M, maxBitsV1)
		}
	case SchemeCatV2:
		if p.M < 64 || p.M > MaxBits || p.M%32 != 0 {
			return fmt.Errorf("encoding: M=%d bits, want a multiple of 32 in 64..%d for %s", p.M, MaxBits, p.Scheme)
		}
	default:
		return fmt.Errorf("encoding: unknown scheme %s", p.Scheme)
	}
	return nil
}

// String is "cat-v2 M=2048 K=6", for logs and errors.
func (p Params) String() string { return fmt.Sprintf("%s M=%d K=%d", p.Scheme, p.M, p.K) }

// Bytes is the size of one Bloom's dense wire form (AppendBinary).
func (p Params) Bytes() int { return p.M / 8 }

// mustValidate guards the encoders: Params come from configuration and are
// validated there, so an invalid one here is a programming error that would
// otherwise produce filters that match nothing they should.
func (p Params) mustValidate() {
	if err := p.Validate(); err != nil {
		panic(err)
	}
}

// coarseBits is the width of the part of the Bloom that existence and
// equality categories hash into: all of it for cat-v1, the first quarter
// for cat-v2.
func (p Params) coarseBits() int {
	if p.Scheme == SchemeCatV2 {
		return p.M / 4
	}
	return p.M
}

// The hash layout of doc.go. These constants are exchanged between brokers
// (every broker must derive the same positions): do not change.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
	splitGamma  = 0x9e3779b97f4a7c15
)

// hashCategory returns the 64-bit FNV-1a hash of a category's bytes.
func hashCategory(c []byte) uint64 { return fnvAdd(fnvOffset64, c) }

// fnvAdd continues an FNV-1a hash with more bytes, so that categories that
// share a prefix (a class and a name) hash it once.
func fnvAdd(h uint64, c []byte) uint64 {
	for _, b := range c {
		h ^= uint64(b)
		h *= fnvPrime64
	}
	return h
}

// fnvByte continues an FNV-1a hash with one byte.
func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime64 }

// mix64 is splitmix64's finalizer.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// position returns the i-th position (0 ≤ i < K) of a category with hash h:
// the i-th output of a splitmix64 generator seeded with h, scaled to [0, M)
// by the high word of out·M. Double hashing (h1 + i·h2) would be cheaper,
// but at M ≤ 512 its progressions make related categories share positions
// and measurably raise the false-positive rate over the textbook rate.
func position(h uint64, i int, m uint64) int {
	pos, _ := bits.Mul64(mix64(h+uint64(i+1)*splitGamma), m)
	return int(pos)
}

// addCoarse sets the K positions of an existence or equality category with
// hash h: in [0, coarseBits).
func (p Params) addCoarse(b *Bloom, h uint64) {
	m := uint64(p.coarseBits())
	for i := range p.K {
		b.Set(position(h, i, m))
	}
}

// addFine sets the K positions of a cat-v2 fine category with hash h: in
// [M/4, M).
func (p Params) addFine(b *Bloom, h uint64) {
	base := p.coarseBits()
	m := uint64(p.M - base)
	for i := range p.K {
		b.Set(base + position(h, i, m))
	}
}

// add sets the K positions of a category given by its bytes, in the part
// of the Bloom its class hashes into.
func (p Params) add(b *Bloom, category []byte) {
	if isFine(category) {
		p.addFine(b, hashCategory(category))
		return
	}
	p.addCoarse(b, hashCategory(category))
}

// Positions appends the K positions (in hash order, possibly repeated) of
// a category given in its string form (see Scheme.Categories), for tests,
// golden vectors and other implementations of the layout.
func (p Params) Positions(category string, dst []int) []int {
	p.mustValidate()
	h := hashCategory([]byte(category))
	lo, m := 0, p.coarseBits()
	if p.Scheme == SchemeCatV2 && isFine([]byte(category)) {
		lo, m = m, p.M-m
	}
	for i := range p.K {
		dst = append(dst, lo+position(h, i, uint64(m)))
	}
	return dst
}
