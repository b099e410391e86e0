package transport

import (
	"fmt"
	"time"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

// ControlToProto converts a link-state message for the wire.
func ControlToProto(m linkstate.Message) (*dripv1.Control, error) {
	switch m := m.(type) {
	case *linkstate.Hello:
		return &dripv1.Control{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{
			Router: m.Router, Name: m.Name, Version: m.Version,
			SentAtNs: int64(m.SentAt), Echoed: m.Echoed, EchoNs: int64(m.Echo), HoldNs: int64(m.Hold),
			Heard: m.Heard, Digest: m.Digest, KeepaliveNs: int64(m.Keepalive), Probe: m.Probe,
		}}}, nil
	case *linkstate.LSA:
		links := make([]*dripv1.LinkCost, len(m.Links))
		for i, l := range m.Links {
			links[i] = &dripv1.LinkCost{Neighbor: l.Neighbor, Cost: l.Cost}
		}
		return &dripv1.Control{Msg: &dripv1.Control_Lsa{Lsa: &dripv1.Lsa{
			Origin: m.Origin, Seq: m.Seq, AgeNs: int64(m.Age), Withdrawn: m.Withdrawn, Links: links,
			Signature: m.Seal.Sig, Certificate: m.Seal.Cert,
		}}}, nil
	case *linkstate.PredAd:
		if err := m.Params.Validate(); err != nil {
			return nil, fmt.Errorf("predicate advertisement of router %d: %w", m.Origin, err)
		}
		var classes []*dripv1.QosClass
		for _, c := range m.Classes {
			classes = append(classes, &dripv1.QosClass{
				DeadlineNs: int64(c.Deadline), TwoPaths: c.TwoPaths,
				Filters: m.Params.AppendFilters(make([]byte, 0, m.Params.FiltersSize(c.Filters)), c.Filters),
			})
		}
		return &dripv1.Control{Msg: &dripv1.Control_PredicateAd{PredicateAd: &dripv1.PredicateAd{
			Origin: m.Origin, Seq: m.Seq, AgeNs: int64(m.Age), Withdrawn: m.Withdrawn,
			BloomBits: uint32(m.Params.M), BloomHashes: uint32(m.Params.K), BloomScheme: m.Params.Scheme.String(),
			Filters:    m.Params.AppendFilters(make([]byte, 0, m.Params.FiltersSize(m.Filters)), m.Filters),
			QosClasses: classes,
			Signature:  m.Seal.Sig, Certificate: m.Seal.Cert,
		}}}, nil
	case *linkstate.DBSummary:
		entries := make([]*dripv1.EntrySummary, len(m.Entries))
		for i, e := range m.Entries {
			entries[i] = &dripv1.EntrySummary{Kind: uint32(e.Kind), Origin: e.Origin, Seq: e.Seq, Sum: e.Sum}
		}
		return &dripv1.Control{Msg: &dripv1.Control_DbSummary{DbSummary: &dripv1.DbSummary{Entries: entries}}}, nil
	case *linkstate.DBRequest:
		keys := make([]*dripv1.EntryKey, len(m.Keys))
		for i, k := range m.Keys {
			keys[i] = &dripv1.EntryKey{Kind: uint32(k.Kind), Origin: k.Origin}
		}
		return &dripv1.Control{Msg: &dripv1.Control_DbRequest{DbRequest: &dripv1.DbRequest{Keys: keys}}}, nil
	default:
		return nil, fmt.Errorf("no wire form for link-state message %T", m)
	}
}

// ControlFromProto converts a received control message. It checks what the
// link-state core cannot: enum ranges, negative times, a known Bloom scheme,
// and that predicate filters decode with the scheme and parameters they
// claim.
func ControlFromProto(c *dripv1.Control) (linkstate.Message, error) {
	switch m := c.GetMsg().(type) {
	case *dripv1.Control_Hello:
		h := m.Hello
		if h.SentAtNs < 0 || h.EchoNs < 0 || h.HoldNs < 0 || h.KeepaliveNs < 0 {
			return nil, fmt.Errorf("hello from router %d: negative timestamp or interval", h.Router)
		}
		return &linkstate.Hello{
			Router: h.Router, Name: h.Name, Version: h.Version,
			SentAt: time.Duration(h.SentAtNs), Echoed: h.Echoed, Echo: time.Duration(h.EchoNs), Hold: time.Duration(h.HoldNs),
			Heard: h.Heard, Digest: h.Digest, Keepalive: time.Duration(h.KeepaliveNs), Probe: h.Probe,
		}, nil
	case *dripv1.Control_Lsa:
		l := m.Lsa
		if l.AgeNs < 0 {
			return nil, fmt.Errorf("LSA of router %d: negative age", l.Origin)
		}
		links := make([]linkstate.Link, len(l.Links))
		for i, lc := range l.Links {
			links[i] = linkstate.Link{Neighbor: lc.GetNeighbor(), Cost: lc.GetCost()}
			// The core relies on sorted, distinct neighbours, as every
			// correct router sends them.
			if i > 0 && links[i-1].Neighbor >= links[i].Neighbor {
				return nil, fmt.Errorf("LSA of router %d: links not in ascending neighbour order at %d", l.Origin, i)
			}
		}
		return &linkstate.LSA{Origin: l.Origin, Seq: l.Seq, Age: time.Duration(l.AgeNs), Withdrawn: l.Withdrawn, Links: links,
			Seal: linkstate.Seal{Sig: l.Signature, Cert: l.Certificate}}, nil
	case *dripv1.Control_PredicateAd:
		if m.PredicateAd.DeltaBase != 0 {
			return nil, fmt.Errorf("predicate advertisement of router %d: a delta, which only a link's AdDecoder can rebuild", m.PredicateAd.Origin)
		}
		return predAdFromProto(m.PredicateAd)
	case *dripv1.Control_DbSummary:
		entries := make([]linkstate.Summary, len(m.DbSummary.Entries))
		for i, e := range m.DbSummary.Entries {
			k, err := kindFromProto(e.GetKind())
			if err != nil {
				return nil, fmt.Errorf("database summary entry %d: %w", i, err)
			}
			entries[i] = linkstate.Summary{Kind: k, Origin: e.GetOrigin(), Seq: e.GetSeq(), Sum: e.GetSum()}
		}
		return &linkstate.DBSummary{Entries: entries}, nil
	case *dripv1.Control_DbRequest:
		keys := make([]linkstate.Key, len(m.DbRequest.Keys))
		for i, k := range m.DbRequest.Keys {
			kind, err := kindFromProto(k.GetKind())
			if err != nil {
				return nil, fmt.Errorf("database request entry %d: %w", i, err)
			}
			keys[i] = linkstate.Key{Kind: kind, Origin: k.GetOrigin()}
		}
		return &linkstate.DBRequest{Keys: keys}, nil
	default:
		return nil, fmt.Errorf("control message is empty or of an unknown kind")
	}
}

func kindFromProto(k uint32) (linkstate.Kind, error) {
	if k == uint32(linkstate.KindRouter) || k == uint32(linkstate.KindPredicate) {
		return linkstate.Kind(k), nil
	}
	return 0, fmt.Errorf("unknown entry kind %d", k)
}

// SetOpenBloom fills the Bloom fields of a broker's Open from its encoding
// parameters: scheme, M and K. Neighbours refuse a link unless all three
// match theirs (transport.Compatible, reason "bloom"), so a mesh runs one
// scheme; cat-v1 is named explicitly, though brokers older than the field
// send none and mean the same.
func SetOpenBloom(o *dripv1.Open, p encoding.Params) {
	o.BloomScheme = p.Scheme.String()
	o.BloomBits, o.BloomHashes = uint32(p.M), uint32(p.K)
}

// OpenBloom returns the encoding parameters a neighbour's Open announces,
// for logs and diagnostics.
func OpenBloom(o *dripv1.Open) (encoding.Params, error) {
	s, err := encoding.ParseScheme(o.GetBloomScheme())
	if err != nil {
		return encoding.Params{}, fmt.Errorf("open of router %d: %w", o.GetRouterId(), err)
	}
	p := encoding.Params{Scheme: s, M: int(o.GetBloomBits()), K: int(o.GetBloomHashes())}
	if err := p.Validate(); err != nil {
		return encoding.Params{}, fmt.Errorf("open of router %d: %w", o.GetRouterId(), err)
	}
	return p, nil
}

// predAdFromProto converts a predicate advertisement as it came: the
// filters it carries, whole or a delta's added ones.
func predAdFromProto(p *dripv1.PredicateAd) (*linkstate.PredAd, error) {
	if p.AgeNs < 0 {
		return nil, fmt.Errorf("predicate advertisement of router %d: negative age", p.Origin)
	}
	scheme, err := encoding.ParseScheme(p.BloomScheme)
	if err != nil {
		return nil, fmt.Errorf("predicate advertisement of router %d: %w", p.Origin, err)
	}
	params := encoding.Params{Scheme: scheme, M: int(p.BloomBits), K: int(p.BloomHashes)}
	filters, err := params.ParseFilters(p.Filters)
	if err != nil {
		return nil, fmt.Errorf("predicate advertisement of router %d: %w", p.Origin, err)
	}
	if len(filters) == 0 {
		filters = nil // as the core builds an empty advertisement
	}
	var classes []linkstate.QoSClass
	for i, c := range p.QosClasses {
		f, err := params.ParseFilters(c.GetFilters())
		if err != nil {
			return nil, fmt.Errorf("predicate advertisement of router %d: QoS class %d: %w", p.Origin, i, err)
		}
		classes = append(classes, linkstate.QoSClass{Deadline: time.Duration(c.GetDeadlineNs()), TwoPaths: c.GetTwoPaths(), Filters: f})
	}
	return &linkstate.PredAd{Origin: p.Origin, Seq: p.Seq, Age: time.Duration(p.AgeNs), Withdrawn: p.Withdrawn, Params: params, Filters: filters, Classes: classes,
		Seal: linkstate.Seal{Sig: p.Signature, Cert: p.Certificate}}, nil
}
