package encoding

import (
	"fmt"
	"math/bits"
)

// Params are the encoding parameters every broker of a mesh must share: M
// bits per filter and K hash positions per category. Two brokers with
// different Params compute unrelated Blooms and would silently drop each
// other's messages, so they travel with every advertisement.
type Params struct {
	M int
	K int
}

// MaxK bounds K: beyond it every message's Bloom is nearly full at any M
// this package allows, and matching degenerates to broadcast.
const MaxK = 32

// DefaultParams are the mesh-wide defaults, chosen by the false-positive
// study of docs/results/encoded-matching.md on the workload of Carzaniga09
// §5.1.4: at M=512, K=6 a broker that does not match a message even on
// categories is still selected for it only 2% of the time (M=256 cannot go
// below 34% there, whatever K), and message Blooms are a fifth full, which
// keeps the indexed Match fast. M costs bytes only in advertisements;
// message Blooms never travel.
func DefaultParams() Params { return Params{M: 512, K: 6} }

// Validate reports whether p can be used: 1 ≤ K ≤ MaxK and M a multiple of
// 8 in [8, MaxBits], so that the wire form is whole bytes.
func (p Params) Validate() error {
	if p.K < 1 || p.K > MaxK {
		return fmt.Errorf("encoding: K=%d hash positions, want 1..%d", p.K, MaxK)
	}
	if p.M < 8 || p.M > MaxBits || p.M%8 != 0 {
		return fmt.Errorf("encoding: M=%d bits, want a multiple of 8 in 8..%d", p.M, MaxBits)
	}
	return nil
}

// Bytes is the size of one Bloom's wire form.
func (p Params) Bytes() int { return p.M / 8 }

// mustValidate guards the encoders: Params come from configuration and are
// validated there, so an invalid one here is a programming error that would
// otherwise produce filters that match nothing they should.
func (p Params) mustValidate() {
	if err := p.Validate(); err != nil {
		panic(err)
	}
}

// The hash layout of doc.go. These constants are exchanged between brokers
// (every broker must derive the same positions): do not change.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
	splitGamma  = 0x9e3779b97f4a7c15
)

// hashCategory returns the 64-bit FNV-1a hash of a category's bytes.
func hashCategory(c []byte) uint64 {
	h := uint64(fnvOffset64)
	for _, b := range c {
		h ^= uint64(b)
		h *= fnvPrime64
	}
	return h
}

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

// add sets the K positions of a category given by its bytes.
func (p Params) add(b *Bloom, category []byte) {
	h := hashCategory(category)
	for i := range p.K {
		b.Set(position(h, i, uint64(p.M)))
	}
}

// Positions appends the K positions (in hash order, possibly repeated) of
// a category given in its string form (see Categories), for tests, golden
// vectors and other implementations of the layout.
func (p Params) Positions(category string, dst []int) []int {
	p.mustValidate()
	h := hashCategory([]byte(category))
	for i := range p.K {
		dst = append(dst, position(h, i, uint64(p.M)))
	}
	return dst
}
