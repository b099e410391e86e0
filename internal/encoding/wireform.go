package encoding

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// The wire form of an advertisement's filters (PredicateAd.filters),
// exchanged between brokers:
//
//   - cat-v1: each Bloom's dense form (AppendBinary), M/8 bytes,
//     concatenated;
//   - cat-v2: each Bloom as a position list: a uvarint count n, then n
//     uvarint gaps, the set positions p_0 < p_1 < … being
//     p_i = p_{i-1} + 1 + gap_i with p_{-1} = -1, concatenated.
//
// A cat-v2 filter sets a few dozen of its 2048 bits, so a position list
// is 15–60 bytes where the dense form would be 256: an advertisement of
// cat-v2 filters is smaller than the same broker's cat-v1 one although
// ranges and substrings expand to more Blooms (docs/results/encoded-matching.md).

// AppendFilters appends the wire form of filters for p. It panics if p is
// invalid or a filter has a bit at or above p.M.
func (p Params) AppendFilters(dst []byte, filters []Bloom) []byte {
	p.mustValidate()
	if p.Scheme == SchemeCatV1 {
		for _, f := range filters {
			dst = f.AppendBinary(dst, p)
		}
		return dst
	}
	for _, f := range filters {
		if hi := f.highest(); hi >= p.M {
			panic(fmt.Sprintf("encoding: Bloom has bit %d set, beyond M=%d", hi, p.M))
		}
		dst = binary.AppendUvarint(dst, uint64(f.PopCount()))
		prev := -1
		for i, w := range f.w {
			for w != 0 {
				pos := i<<6 + bits.TrailingZeros64(w)
				w &= w - 1
				dst = binary.AppendUvarint(dst, uint64(pos-prev-1))
				prev = pos
			}
		}
	}
	return dst
}

// FiltersSize is len(p.AppendFilters(nil, filters)), computed without
// building the bytes.
func (p Params) FiltersSize(filters []Bloom) int {
	if p.Scheme == SchemeCatV1 {
		return len(filters) * p.Bytes()
	}
	n := 0
	for _, f := range filters {
		n += uvarintLen(uint64(f.PopCount()))
		prev := -1
		for i, w := range f.w {
			for w != 0 {
				pos := i<<6 + bits.TrailingZeros64(w)
				w &= w - 1
				n += uvarintLen(uint64(pos - prev - 1))
				prev = pos
			}
		}
	}
	return n
}

func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// ParseFilters decodes the wire form of filters for p. Data from a peer is
// untrusted: every error says what was wrong and at which filter, and no
// input can set a bit at or above p.M.
func (p Params) ParseFilters(data []byte) ([]Bloom, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Scheme == SchemeCatV1 {
		size := p.Bytes()
		if len(data)%size != 0 {
			return nil, fmt.Errorf("%d filter bytes is not a multiple of %d", len(data), size)
		}
		out := make([]Bloom, len(data)/size)
		for i := range out {
			f, err := BloomFromBytes(data[i*size:(i+1)*size], p)
			if err != nil {
				return nil, fmt.Errorf("filter %d: %w", i, err)
			}
			out[i] = f
		}
		return out, nil
	}
	// Counted first: growing the slice of 256-byte Blooms as they come
	// copied an advertisement of 1,000 filters several times over, a
	// twelfth of a 42-site lab hub's CPU while subscriptions changed.
	out := make([]Bloom, 0, countFilters(data))
	for len(data) > 0 {
		i := len(out)
		n, k := binary.Uvarint(data)
		if k <= 0 {
			return nil, fmt.Errorf("filter %d: truncated or overlong position count", i)
		}
		data = data[k:]
		if n > uint64(p.M) {
			return nil, fmt.Errorf("filter %d: %d positions, more than M=%d", i, n, p.M)
		}
		var f Bloom
		prev := -1
		for j := range n {
			gap, k := binary.Uvarint(data)
			if k <= 0 {
				return nil, fmt.Errorf("filter %d: position %d truncated or overlong", i, j)
			}
			data = data[k:]
			if gap >= uint64(p.M-prev-1) {
				return nil, fmt.Errorf("filter %d: position %d is beyond M=%d", i, j, p.M)
			}
			prev += 1 + int(gap)
			f.Set(prev)
		}
		out = append(out, f)
	}
	return out, nil
}

// CountFilters returns how many filters data, an advertisement's filters
// in their wire form for p, holds, without decoding them: what a broker
// checks before it takes the memory of an advertisement from a peer.
// Malformed data gives some count; ParseFilters refuses it.
func (p Params) CountFilters(data []byte) int {
	if p.Scheme == SchemeCatV1 {
		if size := p.Bytes(); size > 0 {
			return len(data) / size
		}
		return 0
	}
	return countFilters(data)
}

// countFilters returns how many position lists data holds, reading only
// the counts: a uvarint ends at its first byte below 0x80. Malformed data
// gives some count, which ParseFilters then refuses.
func countFilters(data []byte) int {
	filters := 0
	for len(data) > 0 {
		n, k := binary.Uvarint(data)
		if k <= 0 {
			break
		}
		data = data[k:]
		for ; n > 0 && len(data) > 0; data = data[1:] {
			if data[0] < 0x80 {
				n--
			}
		}
		filters++
	}
	return filters
}
