package encoding

// MaxBits is the largest Bloom filter width M that Params accepts.
const MaxBits = 512

// Bloom is an M-bit Bloom filter (M ≤ MaxBits) as a fixed-size value: it
// never allocates, copies cheaply, and is comparable, so it can key a map
// for deduplication. Bits at positions ≥ M are always zero.
type Bloom struct {
	w [MaxBits / 64]uint64
}

// Params are the encoding parameters every broker of a mesh must share: M
// bits per filter and K hash positions per category.
type Params struct {
	M int
	K int
}
