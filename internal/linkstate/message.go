package linkstate

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
)

// Version is the protocol version carried in hellos. Routers ignore hellos
// of another version, so no adjacency forms between them. It is exchanged
// between brokers: change it only with the wire format.
const Version = 1

// Message is one control message between neighbours: *Hello, *LSA,
// *PredAd, *DBSummary or *DBRequest. Messages are immutable once handed to
// or returned by a Node: the node shares them between envelopes and keeps
// them in its database.
type Message interface {
	// WireSize estimates the bytes of the message's protobuf encoding,
	// framing included, so control traffic can be measured before the wire
	// format exists and checked against it after.
	WireSize() int
	isMessage()
}

// Envelope is a message for one neighbour.
type Envelope struct {
	To  uint32
	Msg Message
}

// Kind says which table an LSDB entry belongs to.
type Kind uint8

const (
	// KindRouter entries are LSAs: a router's adjacencies and their costs,
	// the input of the UNICAST table (Carzaniga09 §2.2).
	KindRouter Kind = 1
	// KindPredicate entries are predicate advertisements: a router's
	// encoded predicate, the rows of the PREDICATES table.
	KindPredicate Kind = 2
)

// String returns "router" or "predicate".
func (k Kind) String() string {
	switch k {
	case KindRouter:
		return "router"
	case KindPredicate:
		return "predicate"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Key names an LSDB entry: each router originates one entry of each kind.
type Key struct {
	Kind   Kind
	Origin uint32
}

// Summary describes an LSDB entry without its contents, for the database
// exchange: enough to tell who has the newer copy.
type Summary struct {
	Kind   Kind
	Origin uint32
	Seq    uint64
	// Sum is the checksum of the contents (see LSA.Checksum). Two copies
	// with one Seq and different Sums come from two incarnations of the
	// origin; the larger Sum wins everywhere, and the origin itself jumps
	// its sequence past both.
	Sum uint64
}

// Hello keeps an adjacency alive, proves two-way reachability, samples the
// RTT and compares LSDB digests. A router sends one to each neighbour every
// HelloInterval, and at once when the neighbour has not heard it yet or an
// adjacency just came up.
type Hello struct {
	Router  uint32
	Name    string
	Version uint32
	// SentAt is the sender's clock when it sent the hello. Only the sender
	// interprets it, when it comes back as Echo: clocks need not agree.
	SentAt time.Duration
	// Echoed says Echo and Hold are valid: the sender has received a hello
	// from the receiver since the link came up.
	Echoed bool
	// Echo is the SentAt of the last hello the sender received from the
	// receiver, and Hold the time the sender held it before this hello, so
	// the receiver measures RTT = now − Echo − Hold on its own clock.
	Echo time.Duration
	Hold time.Duration
	// Heard says the sender has heard the receiver recently: the link works
	// both ways. An adjacency is up once each side hears it has been heard.
	Heard bool
	// Digest summarises the sender's LSDB (see Node.Digest). Neighbours
	// whose digests keep differing exchange database summaries, which heals
	// floods lost without acknowledgement.
	Digest uint64
	// Keepalive is the sender's Config.Keepalive: the longest its link
	// stays silent. 0: it promises nothing, and the receiver suspects no
	// silence of it (Config.SuspectMultiplier).
	Keepalive time.Duration
	// Probe asks the receiver for a hello back at once, which echoes this
	// one: the sender heard a silent link again and wants its RTT before
	// it routes over it (suspect.go).
	Probe bool
}

// Link is one adjacency in an LSA.
type Link struct {
	Neighbor uint32
	Cost     uint32
}

// LSA is a router's link-state advertisement: its adjacencies and their
// costs. The newest (highest Seq) wins; a Withdrawn LSA has no links and
// tells the mesh the router left.
type LSA struct {
	Origin uint32
	Seq    uint64
	// Age is the time since the origin created this copy, as the sender
	// knew it when sending. Receivers age the entry from there, so every
	// copy of an entry expires at about the same time everywhere.
	Age       time.Duration
	Withdrawn bool
	// Links are sorted by neighbour ID.
	Links []Link
	// Seal is the origin's signature (Config.Auth); empty when
	// advertisements are not signed.
	Seal Seal
}

// PredAd is a router's predicate advertisement: the Bloom filters of all
// its local subscribers' filters (Carzaniga09 §2.2, §3).
type PredAd struct {
	Origin    uint32
	Seq       uint64
	Age       time.Duration
	Withdrawn bool
	// Params are the Bloom scheme and parameters the filters were encoded
	// with.
	Params  encoding.Params
	Filters []encoding.Bloom
	// Classes are the filters of subscriptions with a deadline or the
	// two-path option, in CompareQoS order (docs/design.md §11).
	Classes []QoSClass
	// Seal is the origin's signature (Config.Auth).
	Seal Seal
	// Sum is Checksum(), computed once as the sending node installed the
	// advertisement, on the copies it sends (0: not known): a link that
	// sends the copy as a delta carries it, and computing it again costs
	// more than the rest of the delta at a thousand filters. It is never
	// on the wire; a receiver computes its own.
	Sum uint64
}

// DBSummary lists every entry of the sender's LSDB. The receiver requests
// what it lacks or holds older, and sends back what it holds newer or the
// sender lacks; one summary therefore synchronises both sides.
type DBSummary struct {
	Entries []Summary
}

// DBRequest asks for the current copies of entries.
type DBRequest struct {
	Keys []Key
}

func (*Hello) isMessage()     {}
func (*LSA) isMessage()       {}
func (*PredAd) isMessage()    {}
func (*DBSummary) isMessage() {}
func (*DBRequest) isMessage() {}

// SummedPredAd is a received predicate advertisement with its checksum
// (PredAd.Checksum), which the driver's decoder computed on the link's
// reader (transport.AdDecoder), so that the single-threaded core does not
// compute it again: at a thousand filters it costs more than the rest of
// taking the advertisement in. Step takes it as the advertisement itself.
// It is never sent.
type SummedPredAd struct {
	Ad  *PredAd
	Sum uint64
}

func (*SummedPredAd) isMessage() {}

// OversizedAd stands for a predicate advertisement that a link's decoder
// did not build, since it carried more filters or bytes than a broker
// takes (Config.MaxFilters): Step refuses it as it would the
// advertisement (LimitError), without the memory. It is never sent.
type OversizedAd struct {
	Origin  uint32
	Seq     uint64
	Filters int // as many as the decoder counted
	Bytes   int // of the filters' wire form
	Limit   string
}

func (*OversizedAd) isMessage() {}

// WireSize implements Message: what it stands for.
func (o *OversizedAd) WireSize() int { return framed(o.Bytes) }

// WireSize is the advertisement's.
func (s *SummedPredAd) WireSize() int { return s.Ad.WireSize() }

// The estimates follow protobuf's encoding: a one-byte tag per non-zero
// field, varints for integers and durations (nanoseconds), length-prefixed
// bytes and sub-messages, fixed64 for hashes, and a one-of wrapper (tag and
// length) around each control message on the link stream.

func varintSize(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

func uintField(v uint64) int {
	if v == 0 {
		return 0
	}
	return 1 + varintSize(v)
}

func durField(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return uintField(uint64(d))
}

func boolField(b bool) int {
	if b {
		return 2
	}
	return 0
}

func bytesField(n int) int { return 1 + varintSize(uint64(n)) + n }

func fixed64Field(v uint64) int {
	if v == 0 {
		return 0
	}
	return 9
}

func framed(body int) int { return bytesField(body) }

// WireSize implements Message.
func (h *Hello) WireSize() int {
	n := uintField(uint64(h.Router)) + uintField(uint64(h.Version)) + durField(h.SentAt) +
		boolField(h.Echoed) + durField(h.Echo) + durField(h.Hold) + boolField(h.Heard) +
		fixed64Field(h.Digest) + durField(h.Keepalive) + boolField(h.Probe)
	if h.Name != "" {
		n += bytesField(len(h.Name))
	}
	return framed(n)
}

func (l Link) wireSize() int {
	return bytesField(uintField(uint64(l.Neighbor)) + uintField(uint64(l.Cost)))
}

// WireSize implements Message.
func (a *LSA) WireSize() int {
	n := uintField(uint64(a.Origin)) + uintField(a.Seq) + durField(a.Age) + boolField(a.Withdrawn)
	for _, l := range a.Links {
		n += l.wireSize()
	}
	return framed(n + a.Seal.wireSize())
}

// WireSize implements Message.
func (p *PredAd) WireSize() int {
	n := uintField(uint64(p.Origin)) + uintField(p.Seq) + durField(p.Age) + boolField(p.Withdrawn) +
		uintField(uint64(p.Params.M)) + uintField(uint64(p.Params.K)) + bytesField(len(p.Params.Scheme.String()))
	// Filters travel in one bytes field, in their scheme's wire form
	// (encoding.Params.AppendFilters).
	if len(p.Filters) > 0 {
		n += bytesField(p.Params.FiltersSize(p.Filters))
	}
	for _, c := range p.Classes {
		n += 1 + c.wireSize(p.Params) // a two-byte tag: field 30
	}
	return framed(n + p.Seal.wireSize())
}

func (s Summary) wireSize() int {
	return bytesField(uintField(uint64(s.Kind)) + uintField(uint64(s.Origin)) + uintField(s.Seq) + fixed64Field(s.Sum))
}

// WireSize implements Message.
func (s *DBSummary) WireSize() int {
	n := 0
	for _, e := range s.Entries {
		n += e.wireSize()
	}
	return framed(n)
}

// WireSize implements Message.
func (r *DBRequest) WireSize() int {
	n := 0
	for _, k := range r.Keys {
		n += bytesField(uintField(uint64(k.Kind)) + uintField(uint64(k.Origin)))
	}
	return framed(n)
}
