package client

import (
	"fmt"
	"slices"
	"time"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

// Attrs are a message's attributes by name. Values are string, int, int64,
// float64 or bool; delivered messages carry int64 for every integer.
type Attrs map[string]any

// Message is what publishers send and subscribers receive.
type Message struct {
	Attrs   Attrs
	Payload []byte // opaque to the mesh; no predicate reads it
}

// Delivery is a message delivered to a subscription.
type Delivery struct {
	Message
	// Ingress is the router ID of the broker where the message entered the
	// mesh.
	Ingress uint32
	// PublishedAt is when the ingress broker accepted the message, by that
	// broker's clock (zero if the broker did not say).
	PublishedAt time.Time
	// Hops is the number of broker-to-broker hops the message travelled.
	Hops int
	// IngressEpoch and Seq complete the message's stamp (Ingress,
	// IngressEpoch, Seq), which names it in the mesh; the client delivers
	// each stamp once. Seq 0: a broker too old to stamp.
	IngressEpoch, Seq uint64
	// Gap is set on the first delivery after a gap: the subscription's
	// broker had failed and it was installed again (see Gap).
	Gap *Gap
	// Lost is how many matching messages the broker reported dropping
	// since the previous delivery because this subscription was read too
	// slowly; LostTotal is the broker's running total at that report. Both
	// are zero when nothing was lost. Subscription.Lost has the total, also
	// of reports after the last delivery.
	Lost, LostTotal uint64
}

// toProto converts m, naming the attribute that cannot be sent. Attributes
// go out sorted by name so that equal messages have equal encodings.
func (m Message) toProto() (*dripv1.Message, error) {
	names := make([]string, 0, len(m.Attrs))
	for n := range m.Attrs {
		names = append(names, n)
	}
	slices.Sort(names)
	// One allocation for all attributes and one for all values, rather
	// than two per attribute: this is the publishing hot path.
	attrs := make([]dripv1.Attribute, len(names))
	values := make([]dripv1.Value, len(names))
	pm := &dripv1.Message{Attributes: make([]*dripv1.Attribute, len(names)), Payload: m.Payload}
	for i, n := range names {
		if n == "" {
			return nil, fmt.Errorf("attribute with an empty name")
		}
		if err := setValue(&values[i], m.Attrs[n]); err != nil {
			return nil, fmt.Errorf("attribute %q: %w", n, err)
		}
		attrs[i].Name, attrs[i].Value = n, &values[i]
		pm.Attributes[i] = &attrs[i]
	}
	return pm, nil
}

func setValue(pv *dripv1.Value, v any) error {
	switch x := v.(type) {
	case string:
		pv.Kind = &dripv1.Value_StringValue{StringValue: x}
	case int:
		pv.Kind = &dripv1.Value_IntValue{IntValue: int64(x)}
	case int64:
		pv.Kind = &dripv1.Value_IntValue{IntValue: x}
	case float64:
		pv.Kind = &dripv1.Value_FloatValue{FloatValue: x}
	case bool:
		pv.Kind = &dripv1.Value_BoolValue{BoolValue: x}
	case nil:
		return fmt.Errorf("value is nil; want string, int, int64, float64 or bool")
	default:
		return fmt.Errorf("value of type %T is not supported; want string, int, int64, float64 or bool", v)
	}
	return nil
}

// messageFromProto converts a delivered message, rejecting what no broker
// should send.
func messageFromProto(pm *dripv1.Message) (Message, error) {
	if pm == nil {
		return Message{}, fmt.Errorf("message is missing")
	}
	m := Message{Attrs: make(Attrs, len(pm.GetAttributes())), Payload: pm.GetPayload()}
	for i, a := range pm.GetAttributes() {
		if a.GetName() == "" {
			return Message{}, fmt.Errorf("attribute %d has an empty name", i)
		}
		if _, dup := m.Attrs[a.GetName()]; dup {
			return Message{}, fmt.Errorf("attribute %q given twice", a.GetName())
		}
		switch k := a.GetValue().GetKind().(type) {
		case *dripv1.Value_StringValue:
			m.Attrs[a.GetName()] = k.StringValue
		case *dripv1.Value_IntValue:
			m.Attrs[a.GetName()] = k.IntValue
		case *dripv1.Value_FloatValue:
			m.Attrs[a.GetName()] = k.FloatValue
		case *dripv1.Value_BoolValue:
			m.Attrs[a.GetName()] = k.BoolValue
		default:
			return Message{}, fmt.Errorf("attribute %q has no value", a.GetName())
		}
	}
	return m, nil
}

func deliveryFromProto(p *dripv1.Published) (Delivery, error) {
	m, err := messageFromProto(p.GetMessage())
	if err != nil {
		return Delivery{}, err
	}
	d := Delivery{Message: m, Ingress: p.GetIngressRouter(), Hops: int(p.GetHops()), IngressEpoch: p.GetIngressEpoch(), Seq: p.GetSeq()}
	if ns := p.GetPublishedUnixNano(); ns != 0 {
		d.PublishedAt = time.Unix(0, ns)
	}
	return d, nil
}
