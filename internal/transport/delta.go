package transport

import (
	"fmt"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

// MaxAdvertisementBytes bounds the filters of an advertisement in their
// wire form, whole or rebuilt from deltas. It is gRPC's default receive
// limit, which peer streams keep, so no advertisement a broker could send
// whole is larger: a peer cannot grow one past it a delta at a time.
const MaxAdvertisementBytes = 4 << 20

// AdEncoder sends the predicate advertisements of one link, each as a delta
// against the last one of its origin sent on that link when that is
// smaller (docs/design.md §2, "Advertisements travel as deltas"). A router
// re-advertises its whole predicate whenever one of its clients subscribes
// or leaves, to every broker over every link, where the change is a few
// filters among hundreds. The receiving end's AdDecoder holds the same last advertisements,
// since a link delivers what was sent in order; a new link starts both
// afresh.
//
// An AdEncoder is used by one goroutine at a time; the zero value is not
// usable, see NewAdEncoder.
type AdEncoder struct {
	last map[uint32]*linkstate.PredAd
}

// NewAdEncoder returns the encoder of a new link.
func NewAdEncoder() *AdEncoder { return &AdEncoder{last: map[uint32]*linkstate.PredAd{}} }

// Base returns the advertisement of origin that a delta on this link would
// be taken against, nil if none was sent.
func (e *AdEncoder) Base(origin uint32) *linkstate.PredAd { return e.last[origin] }

// Sent records that ad went out on this link, whole or as a delta: it is
// the base of the next one of its origin.
func (e *AdEncoder) Sent(ad *linkstate.PredAd) { e.last[ad.Origin] = ad }

// PredAdDelta converts ad as a delta against base, the last advertisement
// of its origin sent on the link; false when ad should go whole
// (ControlToProto): a withdrawal, other parameters, filters out of
// Advertise's order, or a change to more than about half the filters, where
// a delta would save little.
//
// sum is ad's checksum, which the delta carries; the copies a link-state
// node sends carry it (linkstate.PredAd.Sum), and computing it again costs
// more than the rest of the delta at a thousand filters.
func PredAdDelta(base, ad *linkstate.PredAd, sum uint64) (*dripv1.Control, bool) {
	if base == nil || ad.Withdrawn || base.Params != ad.Params || base.Origin != ad.Origin || ad.Params.Validate() != nil {
		return nil, false
	}
	removed, addedAt, ok := encoding.Diff(base.Filters, ad.Filters)
	// An index costs a varint of at most four bytes, a filter several.
	if !ok || 2*len(addedAt)+len(removed)/2 >= len(ad.Filters) {
		return nil, false
	}
	added := make([]encoding.Bloom, len(addedAt))
	for i, at := range addedAt {
		added[i] = ad.Filters[at]
	}
	c, err := ControlToProto(&linkstate.PredAd{Origin: ad.Origin, Seq: ad.Seq, Age: ad.Age, Params: ad.Params, Filters: added, Classes: ad.Classes, Seal: ad.Seal})
	if err != nil {
		return nil, false
	}
	p := c.GetPredicateAd()
	p.DeltaBase, p.DeltaRemoved, p.DeltaAddedAt, p.DeltaSum = base.Seq, removed, addedAt, sum
	return c, true
}

// ControlEncoder converts the link-state messages a broker sends into
// drip.v1.Control. A flood hands one message to each neighbour in turn, and
// the links of a broker share one ControlEncoder, which remembers the last
// message it converted: each is converted once per flood, and as a delta
// once per base (the links a flood reaches mostly hold the same last
// advertisement of its origin). It holds no more than the last message.
// One goroutine at a time: the broker's control plane.
type ControlEncoder struct {
	last   linkstate.Message
	whole  *dripv1.Control
	deltas map[*linkstate.PredAd]*dripv1.Control // by base; nil: the delta would not be smaller
}

// convert returns m as a Control: as a delta against base where that is
// smaller (base nil: whole), and whether it is a delta.
func (e *ControlEncoder) convert(m linkstate.Message, base *linkstate.PredAd) (*dripv1.Control, bool, error) {
	if m != e.last {
		e.last, e.whole = m, nil
		clear(e.deltas)
	}
	if ad, ok := m.(*linkstate.PredAd); ok && base != nil {
		c, known := e.deltas[base]
		if !known {
			sum := ad.Sum
			if sum == 0 {
				sum = ad.Checksum()
			}
			c, _ = PredAdDelta(base, ad, sum)
			if e.deltas == nil {
				e.deltas = map[*linkstate.PredAd]*dripv1.Control{}
			}
			e.deltas[base] = c
		}
		if c != nil {
			return c, true, nil
		}
	}
	if e.whole == nil {
		c, err := ControlToProto(m)
		if err != nil {
			return nil, false, err
		}
		e.whole = c
	}
	return e.whole, false, nil
}

// AdDecoder rebuilds the predicate advertisements one link receives as
// deltas (AdEncoder). It is used by the link's reader alone. It holds one
// advertisement per origin heard on the link, as the link-state database
// does.
type AdDecoder struct {
	// accept says this broker offered deltas on the link: a delta from a
	// peer it did not offer them to is a protocol violation.
	accept bool
	last   map[uint32]received
	// maxBytes bounds an advertisement's filters in their wire form,
	// whole or rebuilt: MaxAdvertisementBytes, smaller in tests.
	maxBytes int
	// maxFilters bounds the filters of one advertisement, its QoS
	// classes' included (0: none; linkstate.Config.MaxFilters).
	maxFilters int
}

// received is the last advertisement of an origin on the link and the
// size of its filters in their wire form.
type received struct {
	ad    *linkstate.PredAd
	bytes int
}

// NewAdDecoder returns the decoder of a new link; accept says whether this
// broker offered deltas on it, and maxFilters bounds the filters of an
// advertisement (0: no bound).
func NewAdDecoder(accept bool, maxFilters int) *AdDecoder {
	return &AdDecoder{accept: accept, last: map[uint32]received{}, maxBytes: MaxAdvertisementBytes, maxFilters: maxFilters}
}

// oversized returns the stand-in of an advertisement with filters of the
// given count and bytes (its classes' included) when it is over the
// decoder's bounds, and forgets the last one of its origin, against which
// no delta can then be taken; nil when it is within them. The filters are
// counted before any is decoded, so an advertisement too large takes no
// memory.
func (d *AdDecoder) oversized(p *dripv1.PredicateAd, filters, bytes int) *linkstate.OversizedAd {
	if bytes <= d.maxBytes && (d.maxFilters == 0 || filters <= d.maxFilters) {
		return nil
	}
	delete(d.last, p.Origin)
	return &linkstate.OversizedAd{Origin: p.Origin, Seq: p.Seq, Filters: filters, Bytes: bytes,
		Limit: fmt.Sprintf("%d filters and %d bytes per advertisement", d.maxFilters, d.maxBytes)}
}

// counted returns what p carries: its filters and their bytes, its
// classes' included, counted in the wire form of the parameters it claims
// (malformed ones count as their bytes; decoding refuses them later).
func counted(p *dripv1.PredicateAd) (filters, bytes int) {
	params := encoding.Params{M: int(p.BloomBits), K: int(p.BloomHashes)}
	if s, err := encoding.ParseScheme(p.BloomScheme); err == nil {
		params.Scheme = s
	}
	count := func(b []byte) int {
		if params.Validate() != nil {
			return len(b)
		}
		return params.CountFilters(b)
	}
	filters, bytes = count(p.Filters), len(p.Filters)
	for _, c := range p.QosClasses {
		filters += count(c.GetFilters())
		bytes += len(c.GetFilters())
	}
	return filters, bytes
}

// Decode converts one control message received on the link, rebuilding a
// delta from the last advertisement of its origin. A predicate
// advertisement, whole or rebuilt, comes as a linkstate.SummedPredAd: its
// checksum computed here, on the link's reader, rather than on the core.
// Every advertisement it returns becomes the last one of its origin; the
// caller must not modify it.
func (d *AdDecoder) Decode(c *dripv1.Control) (linkstate.Message, error) {
	p := c.GetPredicateAd()
	if p == nil {
		return ControlFromProto(c)
	}
	filters, bytes := counted(p)
	if p.DeltaBase == 0 {
		if o := d.oversized(p, filters, bytes); o != nil {
			return o, nil
		}
		m, err := ControlFromProto(c)
		if err != nil {
			return nil, err
		}
		ad := m.(*linkstate.PredAd)
		d.last[ad.Origin] = received{ad, len(p.Filters)}
		return &linkstate.SummedPredAd{Ad: ad, Sum: ad.Checksum()}, nil
	}
	// The added filters alone may be too many already.
	if o := d.oversized(p, filters, bytes); o != nil {
		return o, nil
	}
	if base, ok := d.last[p.Origin]; ok && base.ad.Seq == p.DeltaBase {
		whole := filters + len(base.ad.Filters) - len(p.DeltaRemoved)
		if o := d.oversized(p, whole, 0); o != nil {
			return o, nil
		}
	}
	// Decoded first as a whole advertisement of the added filters, which
	// checks everything else it carries.
	ad, err := predAdFromProto(p)
	if err != nil {
		return nil, err
	}
	size, err := d.rebuild(ad, p)
	if err != nil {
		return nil, fmt.Errorf("predicate advertisement of router %d, seq %d, as a delta against seq %d: %w", p.Origin, p.Seq, p.DeltaBase, err)
	}
	d.last[ad.Origin] = received{ad, size}
	// rebuild checked the checksum the sender computed.
	return &linkstate.SummedPredAd{Ad: ad, Sum: p.DeltaSum}, nil
}

// rebuild replaces the added filters of ad, decoded from delta p, with the
// whole advertisement's, and returns their size in wire form.
func (d *AdDecoder) rebuild(ad *linkstate.PredAd, p *dripv1.PredicateAd) (int, error) {
	if !d.accept {
		return 0, fmt.Errorf("deltas were not offered on this link")
	}
	last, ok := d.last[p.Origin]
	base := last.ad
	switch {
	case !ok:
		return 0, fmt.Errorf("no earlier advertisement of the router on this link")
	case base.Seq != p.DeltaBase:
		return 0, fmt.Errorf("the last one on this link has seq %d", base.Seq)
	case p.Withdrawn:
		return 0, fmt.Errorf("a withdrawal is sent whole")
	case ad.Params != base.Params:
		return 0, fmt.Errorf("its Bloom parameters %v differ from the base's %v", ad.Params, base.Params)
	}
	filters, gone, err := applyDelta(base.Filters, p.DeltaRemoved, p.DeltaAddedAt, ad.Filters)
	if err != nil {
		return 0, err
	}
	// Sized from the base's, rather than counted again whole.
	size := last.bytes - ad.Params.FiltersSize(gone) + len(p.Filters)
	if size > d.maxBytes {
		return 0, fmt.Errorf("rebuilt filters take %d bytes, over the %d an advertisement may", size, d.maxBytes)
	}
	if len(filters) == 0 {
		filters = nil // as predAdFromProto and the core build an empty one
	}
	ad.Filters = filters
	if sum := ad.Checksum(); sum != p.DeltaSum {
		return 0, fmt.Errorf("rebuilt advertisement has checksum %#x, the sender's had %#x", sum, p.DeltaSum)
	}
	return size, nil
}

// applyDelta returns base without the filters at the indexes removed
// (which it returns as gone) and with added at the positions addedAt of
// the result. It checks what a peer could get wrong: indexes ascending and
// in range, one position per added filter.
func applyDelta(base []encoding.Bloom, removed, addedAt []uint32, added []encoding.Bloom) (out, gone []encoding.Bloom, err error) {
	if len(addedAt) != len(added) {
		return nil, nil, fmt.Errorf("%d positions for %d added filters", len(addedAt), len(added))
	}
	if len(removed) > len(base) {
		return nil, nil, fmt.Errorf("%d filters removed from a base of %d", len(removed), len(base))
	}
	for i, r := range removed {
		if int(r) >= len(base) || i > 0 && r <= removed[i-1] {
			return nil, nil, fmt.Errorf("removed index %d at %d: not ascending below %d", r, i, len(base))
		}
	}
	n := len(base) - len(removed) + len(added)
	for i, a := range addedAt {
		if int(a) >= n || i > 0 && a <= addedAt[i-1] {
			return nil, nil, fmt.Errorf("added position %d at %d: not ascending below %d", a, i, n)
		}
	}
	out = make([]encoding.Bloom, 0, n)
	gone = make([]encoding.Bloom, 0, len(removed))
	bi, ri, ai := 0, 0, 0
	for len(out) < n {
		if ai < len(addedAt) && int(addedAt[ai]) == len(out) {
			out = append(out, added[ai])
			ai++
			continue
		}
		for ri < len(removed) && int(removed[ri]) == bi {
			gone = append(gone, base[bi])
			bi++
			ri++
		}
		out = append(out, base[bi])
		bi++
	}
	for _, r := range removed[ri:] {
		gone = append(gone, base[r])
	}
	return out, gone, nil
}
